package main

import (
	"archive/tar"
	"bytes"
	"compress/gzip"
	"encoding/json"
	"errors"
	"fmt"
	"math/rand/v2"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"sort"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/seed5ad92d46/sous/daemon"
	"github.com/seed5ad92d46/sous/internal/faultproxy"
	"github.com/seed5ad92d46/sous/internal/testutil"
	"github.com/seed5ad92d46/sous/runtime/journal"
)

// durableRecipe does one of each journaled kind of call. Every command
// appends to a counter file of its own, so that a step done twice shows.
const durableRecipe = `d = args["dir"]
def step(name):
    sh("echo %s >> %s/count/%s; echo %s >> %s/log" % (name, d, name, name, d))
print("starting")
step("a")
now = time.now()
sh("echo '%s' > %s/t1" % (now, d))
val = getenv("DURABLE_VAR", "unset")
sh("echo %s > %s/repo/f.txt" % (val, d))
commit = git.commit(d + "/repo", "from the recipe")
step("b")
n = extract_tar(d + "/a.tar", d + "/out", keep_archive=True)
st = git.status(d + "/repo")
txt = files.read(d + "/repo/f.txt")
sleep(0.05)
step("c")
r = run("cat", [d + "/log"])
step("d")
sh("echo '%s|%s|%s|%d|%s' > %s/final" % (now, val, st.clean, n, r.stdout.replace("\n", ","), d))
print("finished")
`

// durableDir makes a fresh directory for durableRecipe: the recipe, a git
// repository, an archive, the counter directory.
func durableDir(t *testing.T, recipe string) string {
	t.Helper()
	dir := t.TempDir()
	must := func(err error) {
		t.Helper()
		if err != nil {
			t.Fatal(err)
		}
	}
	must(os.WriteFile(filepath.Join(dir, "main.star"), []byte(recipe), 0o644))
	must(os.MkdirAll(filepath.Join(dir, "count"), 0o755))
	repo := filepath.Join(dir, "repo")
	must(os.MkdirAll(repo, 0o755))
	for _, args := range [][]string{{"init", "-q", "-b", "main"}, {"commit", "-q", "--allow-empty", "-m", "root"}} {
		cmd := exec.Command("git", args...)
		cmd.Dir, cmd.Env = repo, gitTestEnv()
		if out, err := cmd.CombinedOutput(); err != nil {
			t.Fatalf("git %v: %v\n%s", args, err, out)
		}
	}
	var buf bytes.Buffer
	gz := gzip.NewWriter(&buf)
	tw := tar.NewWriter(gz)
	for _, name := range []string{"x.txt", "y.txt"} {
		body := "content of " + name + "\n"
		must(tw.WriteHeader(&tar.Header{Name: name, Mode: 0o644, Size: int64(len(body)), Typeflag: tar.TypeReg}))
		_, err := tw.Write([]byte(body))
		must(err)
	}
	must(tw.Close())
	must(gz.Close())
	must(os.WriteFile(filepath.Join(dir, "a.tar"), buf.Bytes(), 0o644))
	return dir
}

func gitTestEnv() []string {
	return append(cleanEnv(), "GIT_AUTHOR_NAME=t", "GIT_AUTHOR_EMAIL=t@example.com",
		"GIT_COMMITTER_NAME=t", "GIT_COMMITTER_EMAIL=t@example.com", "GIT_CONFIG_GLOBAL=/dev/null")
}

// durableRun runs the sous binary in dir with env extra; killed says
// whether SIGKILL ended it.
func durableRun(t *testing.T, dir string, extra []string, args ...string) (out outcome, killed bool) {
	t.Helper()
	return retryWhileReleased(args, func() (outcome, bool) {
		cmd := exec.Command(sousBinary(t), args...)
		cmd.Dir = dir
		cmd.Env = append(gitTestEnv(), extra...)
		return runKillable(t, cmd)
	})
}

// retryWhileReleased runs a `sous resume` again while it is refused
// because the run's runner "is still alive", for up to 10 s: a daemon
// lets go of a killed runner's run once it has seen its connection close
// and applied what it sent, which on a loaded machine takes a moment
// after the kill. (A --journal file's lock goes with the process.)
// Other commands run once.
func retryWhileReleased(args []string, run func() (outcome, bool)) (outcome, bool) {
	deadline := time.Now().Add(10 * time.Second)
	for {
		o, killed := run()
		if len(args) == 0 || args[0] != "resume" || o.code != 2 ||
			!strings.Contains(o.stderr, "its runner is still alive") || time.Now().After(deadline) {
			return o, killed
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// runKillable runs cmd, capturing its output, and says whether SIGKILL
// ended it (a runner killed at a fault point) rather than an exit code.
func runKillable(t *testing.T, cmd *exec.Cmd) (out outcome, killed bool) {
	t.Helper()
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	err := cmd.Run()
	out = outcome{stdout: stdout.String(), stderr: stderr.String()}
	var ee *exec.ExitError
	if errors.As(err, &ee) {
		if ws, ok := ee.Sys().(syscall.WaitStatus); ok && ws.Signaled() && ws.Signal() == syscall.SIGKILL {
			return out, true
		}
		out.code = ee.ExitCode()
	} else if err != nil {
		t.Fatal(err)
	}
	return out, false
}

var runIDLine = regexp.MustCompile(`(?m)^sous: run ([0-9a-f]{16})$`)

func runIDOf(t *testing.T, o outcome) string {
	t.Helper()
	m := runIDLine.FindStringSubmatch(o.stderr)
	if m == nil {
		t.Fatalf("no `sous: run ID` line on stderr:\n%s", o.stderr)
	}
	return m[1]
}

// durableState is what a run of durableRecipe leaves that an interrupted
// and resumed run must leave the same: the counters, the log, what was
// extracted, the repository's history and files.
func durableState(t *testing.T, dir string) string {
	t.Helper()
	var b strings.Builder
	counts, _ := filepath.Glob(filepath.Join(dir, "count", "*"))
	sort.Strings(counts)
	for _, c := range counts {
		data, _ := os.ReadFile(c)
		fmt.Fprintf(&b, "count/%s: %q\n", filepath.Base(c), data)
	}
	for _, name := range []string{"log", "out/x.txt", "out/y.txt"} {
		data, err := os.ReadFile(filepath.Join(dir, name))
		fmt.Fprintf(&b, "%s: %q %v\n", name, data, err)
	}
	cmd := exec.Command("git", "log", "--format=%s")
	cmd.Dir, cmd.Env = filepath.Join(dir, "repo"), gitTestEnv()
	log, err := cmd.Output()
	fmt.Fprintf(&b, "git log: %q %v\n", log, err)
	final, err := os.ReadFile(filepath.Join(dir, "final"))
	if err != nil {
		t.Fatalf("no final file: %v", err)
	}
	// What the final line says but the time.now() and getenv answers,
	// which must be those the run read first (checked apart).
	parts := strings.Split(strings.TrimSpace(string(final)), "|")
	fmt.Fprintf(&b, "final: %q\n", parts[2:])
	return b.String()
}

// checkReplayedAnswers: time.now() and getenv gave the resumed run what
// they gave the run before it died, when they had answered by then.
func checkReplayedAnswers(t *testing.T, dir string) {
	t.Helper()
	final, _ := os.ReadFile(filepath.Join(dir, "final"))
	parts := strings.Split(strings.TrimSpace(string(final)), "|")
	t1, _ := os.ReadFile(filepath.Join(dir, "t1"))
	if strings.TrimSpace(string(t1)) != parts[0] {
		t.Errorf("time.now() was %q when the run wrote t1, %q at the end: not replayed", t1, parts[0])
	}
	f, _ := os.ReadFile(filepath.Join(dir, "repo", "f.txt"))
	if strings.TrimSpace(string(f)) != parts[1] {
		t.Errorf("getenv gave %q for f.txt, %q at the end: not replayed", f, parts[1])
	}
}

func journalRecords(t *testing.T, jdir, run string) []journal.Record {
	t.Helper()
	data, err := os.ReadFile(journal.Path(jdir, run))
	if err != nil {
		t.Fatal(err)
	}
	recs, _, err := journal.Decode(data)
	if err != nil {
		t.Fatal(err)
	}
	return recs
}

// TestDurableRunKilledAndResumed kills the runner at seeded points of
// durableRecipe (SOUS_FAULT_SEED replays one), sometimes the resume too,
// and resumes until the run ends: every command ran exactly once, the
// files are those of a run never killed, and the last resume exits 0.
func TestDurableRunKilledAndResumed(t *testing.T) {
	base := durableDir(t, durableRecipe)
	o, _ := durableRun(t, base, []string{"DURABLE_VAR=first"}, "run", "--journal", "j", "main.star", "-a", "dir="+base)
	o.expect(t, 0, "sous: run ")
	want := durableState(t, base)
	recs := journalRecords(t, filepath.Join(base, "j"), runIDOf(t, o))
	total := len(recs)

	seed := faultproxy.Seed(t)
	rng := rand.New(rand.NewPCG(seed, seed^0x5eed))
	for i := range 20 {
		point := 2 + rng.IntN(total-2) // 2..total-1: after the run record, before the end
		// A record half written: only a call's, which the runner writes
		// before the call starts. A torn answer is a runner that died
		// after the call did its work: that call runs again
		// (TestDurableJournalCutAtRandomByte).
		torn := rng.IntN(4) == 0 && recs[point-1].Kind == journal.KindCall
		// Sometimes the first resume dies too, a few records in.
		resumeFault := 0
		if rng.IntN(3) == 0 {
			resumeFault = 1 + rng.IntN(4)
		}
		t.Run(fmt.Sprintf("kill%d_at%d_%t_%d", i, point, torn, resumeFault), func(t *testing.T) {
			dir := durableDir(t, durableRecipe)
			fault := fmt.Sprint(point)
			if torn {
				fault += ":torn"
			}
			o, killed := durableRun(t, dir, []string{"DURABLE_VAR=first", "SOUS_FAULT_JOURNAL=" + fault},
				"run", "--journal", "j", "main.star", "-a", "dir="+dir)
			if !killed {
				t.Fatalf("SOUS_FAULT_JOURNAL=%s did not kill the run: %d\n%s", fault, o.code, o.stderr)
			}
			id := runIDOf(t, o)
			shown := o.stderr // what the runners printed, all together
			// The resumed runs get another value: only a getenv that had
			// not answered yet may see it.
			env := []string{"DURABLE_VAR=second"}
			done := false
			if resumeFault > 0 {
				// (Unless it ends before.)
				env2 := append(env, fmt.Sprintf("SOUS_FAULT_JOURNAL=%d", resumeFault))
				o2, killed := durableRun(t, dir, env2, "resume", "--journal", "j", id)
				shown += o2.stderr
				if !killed {
					o2.expect(t, 0, "sous: resuming run "+id)
					o, done = o2, true
				}
			}
			if !done {
				shown += resumeUntilDone(t, dir, env, id).stderr
			}
			// Each line the recipe prints was shown once, by one runner
			// or another.
			for _, line := range []string{"starting", "finished"} {
				if n := len(regexp.MustCompile("(?m)^"+line+"$").FindAllString(shown, -1)); n != 1 {
					t.Errorf("%q was printed %d times:\n%s", line, n, shown)
				}
			}
			if got := durableState(t, dir); got != want {
				t.Errorf("after the resume:\n%s\nwant (a run never killed):\n%s", got, want)
			}
			checkReplayedAnswers(t, dir)
		})
	}
}

// resumeUntilDone resumes run id, which must then end with exit code 0
// (or have ended already, when the resume before it was killed just after
// writing the end), and returns what the resume printed.
func resumeUntilDone(t *testing.T, dir string, env []string, id string) outcome {
	t.Helper()
	o, _ := durableRun(t, dir, env, "resume", "--journal", "j", id)
	if o.code == 2 && strings.Contains(o.stderr, "finished (ok") {
		// The resume before was killed right after it wrote the end.
		recs := journalRecords(t, filepath.Join(dir, "j"), id)
		if last := recs[len(recs)-1]; last.Kind != journal.KindEnd || last.Status != "ok" {
			t.Fatalf("refused as finished, but the journal ends with %+v", last)
		}
		return outcome{}
	}
	o.expect(t, 0, "sous: resuming run "+id)
	return o
}

// durableKilled runs recipe in a fresh durableDir with the runner killed
// after its point-th journal record, and returns the dir and the run's id.
func durableKilled(t *testing.T, recipe string, point int) (dir, id string) {
	t.Helper()
	dir = durableDir(t, recipe)
	o, killed := durableRun(t, dir, []string{fmt.Sprintf("SOUS_FAULT_JOURNAL=%d", point)},
		"run", "--journal", "j", "main.star", "-a", "dir="+dir)
	if !killed {
		t.Fatalf("not killed: exit %d\n%s", o.code, o.stderr)
	}
	return dir, runIDOf(t, o)
}

const stepsRecipe = `d = args["dir"]
def step(name):
    sh("echo %s >> %s/count/%s" % (name, d, name))
for s in ["a", "b", "c", "d", "e", "f"]:
    step(s)
`

// TestDurableJournalCutAtRandomByte cuts a journal at a random byte of
// what a crash can lose (what was appended after the last sync, which
// comes before each command starts): the resume recovers and exits 0,
// every command ran once, but the last one the journal had started,
// whose answer was cut off, which runs again with a notice.
func TestDurableJournalCutAtRandomByte(t *testing.T) {
	seed := faultproxy.Seed(t)
	rng := rand.New(rand.NewPCG(seed, 7))
	for i := range 6 {
		// 2 + 2k records: the run, then k calls with their answers.
		dir, id := durableKilled(t, stepsRecipe, 3+2*rng.IntN(5))
		path := journal.Path(filepath.Join(dir, "j"), id)
		data, err := os.ReadFile(path)
		if err != nil {
			t.Fatal(err)
		}
		// The records' bytes: a writer killed before its Close leaves
		// zeros after them, which no cut there loses.
		recs, good, _ := journal.Decode(data)
		data = data[:good]
		// The last sync: right after the last call record (each step is
		// an effect). Find where it ends.
		lastCall := len(recs) - 1
		for recs[lastCall].Kind != journal.KindCall {
			lastCall--
		}
		synced := 0
		for n := range len(data) + 1 {
			if got, _, err := journal.Decode(data[:n]); err == nil && len(got) == lastCall+1 {
				synced = n
				break
			}
		}
		cut := synced + rng.IntN(len(data)-synced+1)
		if err := os.WriteFile(path, data[:cut], 0o600); err != nil {
			t.Fatal(err)
		}
		o, _ := durableRun(t, dir, nil, "resume", "--journal", "j", id)
		o.expect(t, 0)
		again := recs[lastCall].Seq // the step whose answer may be gone
		redone := cut < len(data)   // the answer was cut (or torn)
		for s, name := range []string{"a", "b", "c", "d", "e", "f"} {
			data, _ := os.ReadFile(filepath.Join(dir, "count", name))
			want := name + "\n"
			if redone && s+1 == again {
				want += name + "\n"
			}
			if string(data) != want {
				t.Errorf("round %d (cut %d of %d): count/%s is %q, want %q\n%s", i, cut, len(data), name, data, want, o.stderr)
			}
		}
		if notice := fmt.Sprintf("sh at line 3 was under way when run %s's runner died: it runs again", id); redone != strings.Contains(o.stderr, notice) {
			t.Errorf("round %d: answer cut %t, but the notice is there: %t\n%s", i, redone, !redone, o.stderr)
		}
	}
}

func TestDurableResumeRefusals(t *testing.T) {
	t.Run("finished", func(t *testing.T) {
		dir := durableDir(t, stepsRecipe)
		o, _ := durableRun(t, dir, nil, "run", "--journal", "j", "main.star", "-a", "dir="+dir)
		o.expect(t, 0)
		id := runIDOf(t, o)
		o, _ = durableRun(t, dir, nil, "resume", "--journal", "j", id)
		o.expect(t, 2, "sous: resume: run "+id+": finished (ok, exit code 0): there is nothing to resume")
	})
	t.Run("no such run", func(t *testing.T) {
		dir := t.TempDir()
		o, _ := durableRun(t, dir, nil, "resume", "--journal", "j", "0123456789abcdef")
		o.expect(t, 2, "run 0123456789abcdef: no journal in j")
		o, _ = durableRun(t, dir, nil, "resume", "0123456789abcdef")
		o.expect(t, 2, "resume: where is the run's journal? --journal DIR for a run on the embedded daemon")
	})
	t.Run("recipe changed", func(t *testing.T) {
		dir, id := durableKilled(t, stepsRecipe, 6) // steps a and b done, c recorded
		journalBefore, _ := os.ReadFile(journal.Path(filepath.Join(dir, "j"), id))
		changed := strings.Replace(stepsRecipe, `"echo %s >> %s/count/%s"`, `"echo %s >>%s/count/%s"`, 1)
		if err := os.WriteFile(filepath.Join(dir, "main.star"), []byte(changed), 0o644); err != nil {
			t.Fatal(err)
		}
		o, _ := durableRun(t, dir, nil, "resume", "--journal", "j", id)
		o.expect(t, 2, "sous: recipe changed since run "+id+": line 3 calls sh with other arguments (\"echo a >>/",
			", the journal has sh(\"echo a >> /")
		after, _ := os.ReadFile(journal.Path(filepath.Join(dir, "j"), id))
		if !bytes.Equal(after, journalBefore) {
			t.Error("the refused resume changed the journal")
		}
		if data, _ := os.ReadFile(filepath.Join(dir, "count", "a")); string(data) != "a\n" {
			t.Errorf("count/a is %q: something ran again", data)
		}
		// The recipe as it was resumes.
		if err := os.WriteFile(filepath.Join(dir, "main.star"), []byte(stepsRecipe), 0o644); err != nil {
			t.Fatal(err)
		}
		o, _ = durableRun(t, dir, nil, "resume", "--journal", "j", id)
		o.expect(t, 0)
		for _, name := range []string{"a", "b", "c", "d", "e", "f"} {
			if data, _ := os.ReadFile(filepath.Join(dir, "count", name)); string(data) != name+"\n" {
				t.Errorf("count/%s is %q", name, data)
			}
		}
	})
	t.Run("another builtin", func(t *testing.T) {
		dir, id := durableKilled(t, stepsRecipe, 4)
		changed := strings.Replace(stepsRecipe, "for s in", "files.stat(d)\nfor s in", 1)
		os.WriteFile(filepath.Join(dir, "main.star"), []byte(changed), 0o644)
		o, _ := durableRun(t, dir, nil, "resume", "--journal", "j", id)
		o.expect(t, 2, "recipe changed since run "+id+": line 4 calls files.stat(\"/", "), the journal has sh(\"echo a")
	})
	t.Run("recipe changed inside retry", func(t *testing.T) {
		// retry() catches its function's errors: the resume still stops
		// with exit 2, and the retries run nothing.
		recipe := `d = args["dir"]
def step():
    sh("echo a >> %s/count/a" % d)
retry(step, attempts=3, backoff=0.01)
`
		dir, id := durableKilled(t, recipe, 3) // the sh answered
		os.WriteFile(filepath.Join(dir, "main.star"), []byte(strings.Replace(recipe, ">> %s", ">>%s", 1)), 0o644)
		o, _ := durableRun(t, dir, nil, "resume", "--journal", "j", id)
		o.expect(t, 2, "sous: recipe changed since run "+id+": line 3 calls sh with other arguments")
		if data, _ := os.ReadFile(filepath.Join(dir, "count", "a")); string(data) != "a\n" {
			t.Errorf("count/a is %q: something ran again", data)
		}
	})
	t.Run("runner alive", func(t *testing.T) {
		dir, id := startDurableSleeper(t)
		o, _ := durableRun(t, dir, nil, "resume", "--journal", "j", id)
		o.expect(t, 2, "run "+id+": its runner is still alive")
	})
	t.Run("live call", func(t *testing.T) {
		// Killed once hosts()'s call is recorded, before it runs.
		recipe := "pool = hosts([\"unix:///nowhere.sock\"])\nsh(\"echo x >> count/x\")\n"
		dir, id := durableKilled(t, recipe, 2)
		o, _ := durableRun(t, dir, nil, "resume", "--journal", "j", id)
		o.expect(t, 2, "run "+id+": cannot be resumed: line 1 called hosts, whose live object")
	})
}

// TestDurableSleepWaitsWhatWasLeft: a resumed run that died in a sleep
// waits only what was left of it.
func TestDurableSleepWaitsWhatWasLeft(t *testing.T) {
	dir, id := durableKilled(t, "sleep(4)\nsh(\"echo x >> count/x\")\n", 2) // killed once sleep's call is recorded
	time.Sleep(2500 * time.Millisecond)
	start := time.Now()
	// From another directory: the run goes on in the one it ran in, where
	// its relative paths lead.
	o, _ := durableRun(t, t.TempDir(), nil, "resume", "--journal", filepath.Join(dir, "j"), id)
	took := time.Since(start)
	o.expect(t, 0)
	if took > 3500*time.Millisecond {
		t.Errorf("the resume took %s: it slept the whole 4s again", took)
	}
	if data, _ := os.ReadFile(filepath.Join(dir, "count", "x")); string(data) != "x\n" {
		t.Errorf("count/x is %q", data)
	}
}

// TestDurableRunIDInStartEvent: --json's start event carries the run id
// that stderr names.
func TestDurableRunIDInStartEvent(t *testing.T) {
	dir := durableDir(t, "print('hi')\n")
	o, _ := durableRun(t, dir, nil, "run", "--journal", "j", "--json", "main.star")
	o.expect(t, 0)
	id := runIDOf(t, o)
	var start struct{ Event, Run string }
	if err := json.Unmarshal([]byte(o.stdoutLines()[0]), &start); err != nil || start.Event != "start" || start.Run != id {
		t.Errorf("start event %q (%v), want run %q", o.stdoutLines()[0], err, id)
	}
}

// startDurableSleeper starts a durable run of sleep(30) in a fresh dir,
// killed when the test ends, and returns the dir and its id once it runs.
func startDurableSleeper(t *testing.T) (dir, id string) {
	t.Helper()
	dir = durableDir(t, "sleep(30)\n")
	cmd := exec.Command(sousBinary(t), "run", "--journal", "j", "main.star")
	cmd.Dir, cmd.Env = dir, cleanEnv()
	var stderr testutil.SyncBuffer
	cmd.Stderr = &stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cmd.Process.Kill(); cmd.Wait() })
	for deadline := time.Now().Add(10 * time.Second); time.Now().Before(deadline); time.Sleep(20 * time.Millisecond) {
		if m := runIDLine.FindStringSubmatch(stderr.String()); m != nil {
			return dir, m[1]
		}
	}
	t.Fatalf("no run id:\n%s", stderr.String())
	return "", ""
}

// TestDurableRunsList: sous runs tells a running, a finished, a
// resumable and a stopped run apart, with their steps.
func TestDurableRunsList(t *testing.T) {
	dir, running := startDurableSleeper(t)
	fin := writeAndRun(t, dir, "ok.star", "sh(\"true\")\nsh(\"true\")\n", "")
	resumable := writeAndRun(t, dir, "killed.star", "sh(\"true\")\nsh(\"true\")\n", "SOUS_FAULT_JOURNAL=4")
	stuck := writeAndRun(t, dir, "pool.star", "hosts([\"unix:///nowhere.sock\"])\n", "SOUS_FAULT_JOURNAL=2")
	o, _ := durableRun(t, dir, nil, "runs", "--journal", "j")
	o.expect(t, 0)
	for _, want := range []string{
		running + `\s+\S+main.star\s+running\s+.*\s+1$`,
		fin + `\s+\S+ok.star\s+finished ok\s+.*\s+2$`,
		resumable + `\s+\S+killed.star\s+resumable\s+.*\s+2$`,
		stuck + `\s+\S+pool.star\s+stopped \(line 1 called hosts\)\s+.*\s+1$`,
	} {
		if !regexp.MustCompile("(?m)^" + want).MatchString(o.stdout) {
			t.Errorf("no line matching %s:\n%s", want, o.stdout)
		}
	}
	o, _ = durableRun(t, dir, nil, "runs")
	o.expect(t, 2, "runs: which runs? --journal DIR for runs on the embedded daemon")
}

// writeAndRun writes a recipe into dir and runs it with --journal j and
// the environment fault ("": none); it returns the run's id.
func writeAndRun(t *testing.T, dir, name, recipe, fault string) string {
	t.Helper()
	if err := os.WriteFile(filepath.Join(dir, name), []byte(recipe), 0o644); err != nil {
		t.Fatal(err)
	}
	var env []string
	if fault != "" {
		env = append(env, fault)
	}
	o, _ := durableRun(t, dir, env, "run", "--journal", "j", name)
	return runIDOf(t, o)
}

// TestDurableResumeTakesOverACallOnAnOutlivingDaemon: a runner that
// died in a command on a socket daemon, which outlives it and may still
// run the command, is resumed by following that command (its id is the
// call's), not by running it again; the command before it, answered, is
// replayed. An extract_tar that may have consumed its archive is not
// done again: exit 2, the journal as it was.
func TestDurableResumeTakesOverACallOnAnOutlivingDaemon(t *testing.T) {
	sock, _ := socketDaemon(t, "tok", daemon.Config{Env: []string{"PATH=" + os.Getenv("PATH")}})
	target := []string{"--socket", sock, "--token-file", tokenFile(t, "tok")}
	recipe := `d = args["dir"]
sh("echo a >> %s/count/a" % d)
sh("echo b >> %s/count/b; sleep 0.5; echo done >> %s/count/b" % (d, d))
extract_tar(d + "/a.tar", d + "/out")
`
	dir := durableDir(t, recipe)
	// Killed once the second sh is recorded: the sh may or may not
	// have reached the daemon.
	o, killed := durableRun(t, dir, []string{"SOUS_FAULT_JOURNAL=4"},
		append([]string{"run", "--journal", "j", "main.star", "-a", "dir=" + dir}, target...)...)
	if !killed {
		t.Fatalf("not killed: %d\n%s", o.code, o.stderr)
	}
	id := runIDOf(t, o)
	// The resume is killed in turn once extract_tar's call is recorded
	// (its second record: the sh's answer, then that call).
	o, killed = durableRun(t, dir, []string{"SOUS_FAULT_JOURNAL=2"}, append([]string{"resume", "--journal", "j", id}, target...)...)
	if !killed {
		t.Fatalf("resume not killed: %d\n%s", o.code, o.stderr)
	}
	if !strings.Contains(o.stderr, "sous: sh at line 3 was under way when run "+id+"'s runner died: taking over what it started on unix://"+sock) {
		t.Errorf("no notice of the take-over:\n%s", o.stderr)
	}
	for name, want := range map[string]string{"a": "a\n", "b": "b\ndone\n"} {
		if data, _ := os.ReadFile(filepath.Join(dir, "count", name)); string(data) != want {
			t.Errorf("count/%s is %q, want %q", name, data, want)
		}
	}
	before, _ := os.ReadFile(journal.Path(filepath.Join(dir, "j"), id))
	o, _ = durableRun(t, dir, nil, append([]string{"resume", "--journal", "j", id}, target...)...)
	o.expect(t, 2, "sous: run "+id+": the runner died in extract_tar(\"/", "keep_archive=True makes it safe to extract again")
	after, _ := os.ReadFile(journal.Path(filepath.Join(dir, "j"), id))
	if !bytes.Equal(before, after) {
		t.Error("the stopped resume changed the journal")
	}
}

// TestDurableShRunningWhenTheRunnerDied: the runner is killed while a
// command runs on a socket daemon; the resume follows that command to
// its end rather than start it again.
func TestDurableShRunningWhenTheRunnerDied(t *testing.T) {
	sock, _ := socketDaemon(t, "tok", daemon.Config{Env: []string{"PATH=" + os.Getenv("PATH")}})
	target := []string{"--socket", sock, "--token-file", tokenFile(t, "tok")}
	recipe := `d = args["dir"]
r = sh("echo b >> %s/count/b; sleep 1; echo done >> %s/count/b; echo out" % (d, d))
sh("echo '%s' > %s/final" % (r.stdout.strip(), d))
`
	dir := durableDir(t, recipe)
	cmd := exec.Command(sousBinary(t), append([]string{"run", "--journal", "j", "main.star", "-a", "dir=" + dir}, target...)...)
	cmd.Dir, cmd.Env = dir, cleanEnv()
	var stderr testutil.SyncBuffer
	cmd.Stderr = &stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	for deadline := time.Now().Add(10 * time.Second); ; time.Sleep(10 * time.Millisecond) {
		if data, _ := os.ReadFile(filepath.Join(dir, "count", "b")); len(data) > 0 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("the command did not start:\n%s", stderr.String())
		}
	}
	cmd.Process.Kill()
	cmd.Wait()
	id := runIDOf(t, outcome{stderr: stderr.String()})
	o, _ := durableRun(t, dir, nil, append([]string{"resume", "--journal", "j", id}, target...)...)
	o.expect(t, 0, "taking over what it started")
	if data, _ := os.ReadFile(filepath.Join(dir, "count", "b")); string(data) != "b\ndone\n" {
		t.Errorf("count/b is %q: the command ran again, or was not followed to its end", data)
	}
	if data, _ := os.ReadFile(filepath.Join(dir, "final")); string(data) != "out\n" {
		t.Errorf("final is %q: the resumed sh did not give the command's output", data)
	}
}
