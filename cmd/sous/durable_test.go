package main

import (
	"archive/tar"
	"bytes"
	"compress/gzip"
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

	"github.com/seed5ad92d46/sous/internal/faultproxy"
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
	cmd := exec.Command(sousBinary(t), args...)
	cmd.Dir = dir
	cmd.Env = append(gitTestEnv(), extra...)
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
			// The resumed runs get another value: only a getenv that had
			// not answered yet may see it.
			env := []string{"DURABLE_VAR=second"}
			done := false
			if resumeFault > 0 {
				// (Unless it ends before.)
				env2 := append(env, fmt.Sprintf("SOUS_FAULT_JOURNAL=%d", resumeFault))
				o2, killed := durableRun(t, dir, env2, "resume", "--journal", "j", id)
				if !killed {
					o2.expect(t, 0, "sous: resuming run "+id)
					o, done = o2, true
				}
			}
			if !done {
				o = resumeUntilDone(t, dir, env, id)
			}
			// "starting" was printed before the first call: a journal that
			// holds that call shows it was printed.
			if (point > 2 || !torn) && strings.Contains(o.stdout+o.stderr, "starting") {
				t.Errorf("the resume printed again what the run had printed:\n%s", o.stderr)
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
