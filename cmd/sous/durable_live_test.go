package main

import (
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"github.com/seed5ad92d46/sous/daemon"
	"github.com/seed5ad92d46/sous/runtime/journal"
)

// processRecipe uses a process every way a recipe can: spawn, stdin
// writes with and without an offset, read_line, close_stdin, wait, a
// lines() loop whose body runs commands, output(). Each process and
// each command appends to a counter file of its own.
const processRecipe = `d = args["dir"]
def step(name):
    sh("echo %s >> %s/count/%s" % (name, d, name))
step("a")
p = spawn("sh", ["-c", "echo p >> %s/count/p; while read l; do echo got:$l; done; echo bye" % d])
p.write("one\n")
first = p.read_line()
p.write("two\n", offset=4)
step("b")
p.close_stdin()
r = p.wait()
got = [l for l in p.lines()]
step("c")
q = spawn("sh", ["-c", "echo q >> %s/count/q; for i in 1 2 3; do echo line$i; done" % d], echo=False)
for l in q.lines():
    sh("echo %s >> %s/count/%s" % (l, d, l))
q.wait()
print("finished")
sh("echo '%s|%s|%s|%s' > %s/final" % (first, r.stdout.replace("\n", ","), ",".join(got), q.output().replace("\n", ","), d))
`

// TestDurableProcessesResumeOnASocketDaemon kills the runner of
// processRecipe after each of its journal records, the processes going
// on on a socket daemon, and resumes it: every process and command ran
// once, every stdin byte reached its process once, the lines the
// recipe read are those of a run never killed, and the resume exits 0.
func TestDurableProcessesResumeOnASocketDaemon(t *testing.T) {
	sock, _ := socketDaemon(t, "tok", daemon.Config{Env: []string{"PATH=" + os.Getenv("PATH")}})
	target := []string{"--socket", sock, "--token-file", tokenFile(t, "tok")}
	runArgs := func(dir string) []string {
		return append([]string{"run", "--journal", "j", "main.star", "-a", "dir=" + dir}, target...)
	}
	base := durableDir(t, processRecipe)
	o, _ := durableRun(t, base, nil, runArgs(base)...)
	o.expect(t, 0)
	want := processState(t, base)
	if !strings.Contains(want, "final: \"got:one|got:one,got:two,bye,|got:one,got:two,bye|line1,line2,line3,\"") {
		t.Fatalf("the run never killed:\n%s\n%s", want, o.stderr)
	}
	recs := journalRecords(t, filepath.Join(base, "j"), runIDOf(t, o))
	total := len(recs)
	var points []string
	for point := 2; point < total; point++ {
		points = append(points, fmt.Sprint(point))
		if recs[point-1].Kind == journal.KindAnswer {
			// Killed half way through an answer: the call did its work
			// (a write reached the process, a command ran) but the
			// journal does not say so. The resume takes it over: the
			// write is sent again at its offset and dropped, the command
			// is followed, not run again.
			points = append(points, fmt.Sprintf("%d:torn", point))
		}
	}
	dup := 0 // lines of p shown, over all the kills
	defer func() {
		// Most kills show each line once: the marks do their work.
		if runs := 2 * len(points); dup > runs+runs/4 {
			t.Errorf("%d got: lines shown over %d kills, want about %d", dup, len(points), runs)
		}
	}()
	for _, point := range points {
		t.Run("kill_at"+point, func(t *testing.T) {
			dir := durableDir(t, processRecipe)
			o, killed := durableRun(t, dir, []string{"SOUS_FAULT_JOURNAL=" + point}, runArgs(dir)...)
			if !killed {
				t.Fatalf("not killed: %d\n%s", o.code, o.stderr)
			}
			id := runIDOf(t, o)
			shown := o.stderr + o.stdout
			o, _ = durableRun(t, dir, nil, append([]string{"resume", "--journal", "j", id}, target...)...)
			o.expect(t, 0, "sous: resuming run "+id)
			shown += o.stderr + o.stdout
			if got := processState(t, dir); got != want {
				t.Errorf("after the resume:\n%s\nwant:\n%s\nresume's stderr:\n%s", got, want, o.stderr)
			}
			if n := len(regexp.MustCompile(`(?m)^finished$`).FindAllString(shown, -1)); n != 1 {
				t.Errorf("finished shown %d times", n)
			}
			// What p echoed is shown, and what it had shown as a call on
			// it started is not shown again: a line at most twice (one
			// shown after the last call on p started, before the runner
			// died), never lost.
			for _, line := range []string{"got:one", "got:two", "bye"} {
				if n := len(regexp.MustCompile(`(?m)^(\[\S+\] )?`+line+`$`).FindAllString(shown, -1)); n < 1 || n > 2 {
					t.Errorf("%s shown %d times:\n%s", line, n, shown)
				}
			}
			dup += strings.Count(shown, "got:")
		})
	}
}

// processState is what processRecipe leaves: its counters and final line.
func processState(t *testing.T, dir string) string {
	t.Helper()
	var b strings.Builder
	for _, name := range []string{"a", "b", "c", "p", "q", "line1", "line2", "line3"} {
		data, err := os.ReadFile(filepath.Join(dir, "count", name))
		fmt.Fprintf(&b, "count/%s: %q %v\n", name, data, err)
	}
	final, err := os.ReadFile(filepath.Join(dir, "final"))
	fmt.Fprintf(&b, "final: %q %v\n", strings.TrimSpace(string(final)), err)
	return b.String()
}

// TestDurableProcessesOnTheEmbeddedDaemon: the embedded daemon's
// processes die with the runner. A process the run only spawned runs
// again, with a notice; one whose wait the journal answered needs no
// process (its Result is its end); one the run had written to stops the
// resume with exit code 2 before anything is done twice.
func TestDurableProcessesOnTheEmbeddedDaemon(t *testing.T) {
	t.Run("only spawned", func(t *testing.T) {
		recipe := "p = spawn(\"sh\", [\"-c\", \"echo p >> count/p\"])\nsh(\"echo x >> count/x\")\np.wait()\n"
		dir, id := durableKilled(t, recipe, 4) // the sh recorded
		o, _ := durableRun(t, dir, nil, "resume", "--journal", "j", id)
		o.expect(t, 0, "sous: process sous-"+id+"-1-1 died with the run's runner (on the embedded daemon): it runs again")
		if data, _ := os.ReadFile(filepath.Join(dir, "count", "x")); string(data) != "x\n" {
			t.Errorf("count/x is %q", data)
		}
		if data, _ := os.ReadFile(filepath.Join(dir, "count", "p")); !strings.HasSuffix(string(data), "p\n") {
			t.Errorf("count/p is %q: the process did not run again", data)
		}
	})
	t.Run("waited for", func(t *testing.T) {
		recipe := "p = spawn(\"sh\", [\"-c\", \"echo p >> count/p; echo hi\"])\nr = p.wait()\nsh(\"echo x >> count/x\")\n" +
			"sh(\"echo '%s|%s' > final\" % (p.output().strip(), [l for l in p.lines()]))\n"
		dir, id := durableKilled(t, recipe, 6) // the first sh recorded
		o, _ := durableRun(t, dir, nil, "resume", "--journal", "j", id)
		o.expect(t, 0)
		for name, want := range map[string]string{"p": "p\n", "x": "x\n", "../final": "hi|[\"hi\"]\n"} {
			if data, _ := os.ReadFile(filepath.Join(dir, "count", name)); string(data) != want {
				t.Errorf("count/%s is %q, want %q", name, data, want)
			}
		}
	})
	t.Run("written to", func(t *testing.T) {
		recipe := "p = spawn(\"cat\")\np.write(\"hi\\n\")\nsh(\"echo x >> count/x\")\np.close_stdin()\np.wait()\n"
		dir, id := durableKilled(t, recipe, 7) // the sh answered
		before, _ := os.ReadFile(journalPath(dir, id))
		o, _ := durableRun(t, dir, nil, "resume", "--journal", "j", id)
		o.expect(t, 2, "sous: run "+id+": process sous-"+id+"-1-1 ran on the embedded daemon, which died with the runner, "+
			"and the run had called Process.write on it: resuming would do again what the run saw done")
		if after, _ := os.ReadFile(journalPath(dir, id)); string(after) != string(before) {
			t.Error("the stopped resume changed the journal")
		}
		if data, _ := os.ReadFile(filepath.Join(dir, "count", "x")); string(data) != "x\n" {
			t.Errorf("count/x is %q", data)
		}
	})
}

func journalPath(dir, id string) string { return journal.Path(filepath.Join(dir, "j"), id) }

// TestDurableProcessesOnADaemonKeptJournal: the same take-over with the
// journal kept by the daemon (no --journal), resumed from another
// directory by the run's id: where the journal lives changes nothing.
func TestDurableProcessesOnADaemonKeptJournal(t *testing.T) {
	target, _ := journalDaemon(t, true)
	base := durableDir(t, processRecipe)
	o, _ := durableRun(t, base, nil, append([]string{"run", "main.star", "-a", "dir=" + base}, target...)...)
	o.expect(t, 0)
	want := processState(t, base)
	for _, point := range []string{"5", "7:torn", "9", "14", "19", "23", "27"} {
		t.Run("kill_at"+point, func(t *testing.T) {
			dir := durableDir(t, processRecipe)
			o, killed := durableRun(t, dir, []string{"SOUS_FAULT_JOURNAL=" + point},
				append([]string{"run", "main.star", "-a", "dir=" + dir}, target...)...)
			if !killed {
				t.Fatalf("not killed: %d\n%s", o.code, o.stderr)
			}
			id := runIDOf(t, o)
			o, _ = durableRun(t, t.TempDir(), nil, append([]string{"resume", id}, target...)...)
			o.expect(t, 0, "sous: resuming run "+id)
			if got := processState(t, dir); got != want {
				t.Errorf("after the resume:\n%s\nwant:\n%s\n%s", got, want, o.stderr)
			}
		})
	}
}
