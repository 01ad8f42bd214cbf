package main

import (
	"encoding/binary"
	"fmt"
	"math/rand/v2"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/seed5ad92d46/sous/daemon"
	"github.com/seed5ad92d46/sous/internal/testutil"
	"github.com/seed5ad92d46/sous/runtime/journal"
)

// daemonRecipe runs three commands, each appending to a counter file of
// its own, and prints between them. Its journal: 1 run, 2 call a,
// 3 answer a, 4 print, 5 call b, 6 answer b, 7 call c, 8 answer c,
// 9 print, 10 end.
const daemonRecipe = `d = args["dir"]
sh("echo a >> %s/count/a" % d)
print("between")
sh("echo b >> %s/count/b" % d)
sh("echo c >> %s/count/c" % d)
print("done")
`

// journalDaemon serves a daemon on a Unix socket, with a state dir to keep
// run journals in; it returns the target flags and the state dir.
func journalDaemon(t *testing.T, withState bool) (target []string, state string) {
	t.Helper()
	cfg := daemon.Config{Env: []string{"PATH=" + os.Getenv("PATH")}}
	if withState {
		state = t.TempDir()
		cfg.StateDir = state
	}
	sock, _ := socketDaemon(t, "tok", cfg)
	return []string{"--socket", sock, "--token-file", tokenFile(t, "tok")}, state
}

func counts(t *testing.T, dir string) string {
	t.Helper()
	var b strings.Builder
	for _, name := range []string{"a", "b", "c"} {
		data, _ := os.ReadFile(filepath.Join(dir, "count", name))
		fmt.Fprintf(&b, "%s=%q ", name, data)
	}
	return b.String()
}

const eachOnce = `a="a\n" b="b\n" c="c\n" `

// recipePrints is the lines of daemonRecipe's prints on stderr.
func recipePrints(o outcome) string {
	return strings.Join(regexp.MustCompile(`(?m)^(between|done)$`).FindAllString(o.stderr, -1), " ")
}

// runsLine finds run's line in `sous runs` output.
func runsLine(t *testing.T, o outcome, run string) string {
	t.Helper()
	m := regexp.MustCompile(`(?m)^` + run + `\s.*$`).FindString(o.stdout)
	if m == "" {
		t.Fatalf("no line of run %s:\n%s", run, o.stdout)
	}
	return m
}

// TestDurableOnDaemonKilledAndResumedFromAnotherClient: a run against a
// socket daemon with a state dir is journaled there with no flag; its
// runner is killed (SIGKILL once the daemon acknowledged the answer of
// the first command); sous runs shows it resumable; sous resume from
// another client, in another directory, finishes it with every command
// done once, and does not print again what was printed.
func TestDurableOnDaemonKilledAndResumedFromAnotherClient(t *testing.T) {
	for _, sync := range []string{"batch", "always"} {
		t.Run(sync, func(t *testing.T) {
			target, state := journalDaemon(t, true)
			dir := durableDir(t, daemonRecipe)
			o, killed := durableRun(t, dir, []string{"SOUS_FAULT_JOURNAL=4"},
				append([]string{"run", "--journal-sync", sync, "main.star", "-a", "dir=" + dir}, target...)...)
			if !killed {
				t.Fatalf("not killed: %d\n%s", o.code, o.stderr)
			}
			id := runIDOf(t, o)
			if recipePrints(o) != "between" {
				t.Fatalf("the run printed %q before it was killed", recipePrints(o))
			}
			if _, err := os.Stat(filepath.Join(state, "runs", id+".journal")); err != nil {
				t.Fatalf("no journal in the daemon's state dir: %v", err)
			}
			if _, err := os.Stat(filepath.Join(dir, "j")); err == nil {
				t.Fatal("a journal directory was made next to the recipe")
			}
			// The daemon lets go of the run once it has seen the dead
			// runner's connection close, which on a loaded machine is not
			// at once: "running" until then.
			waitRunState(t, target, id, "resumable")
			o, _ = durableRun(t, t.TempDir(), nil, append([]string{"runs"}, target...)...)
			o.expect(t, 0)
			if line := runsLine(t, o, id); !regexp.MustCompile(`main\.star\s+resumable\s+.*\s1$`).MatchString(line) {
				t.Errorf("runs: %q", line)
			}
			o, _ = durableRun(t, t.TempDir(), nil, append([]string{"resume", id, "--journal-sync", sync}, target...)...)
			o.expect(t, 0, "sous: resuming run "+id)
			if recipePrints(o) != "done" {
				t.Errorf("the resume printed %q, want only what the run had not printed", recipePrints(o))
			}
			if got := counts(t, dir); got != eachOnce {
				t.Errorf("counters %s, want each once", got)
			}
			o, _ = durableRun(t, t.TempDir(), nil, append([]string{"runs", "--json"}, target...)...)
			o.expect(t, 0)
			if !regexp.MustCompile(`"run": "` + id + `",\s+"recipe": "[^"]+",\s+"state": "finished"`).MatchString(o.stdout) {
				t.Errorf("runs --json: %s", o.stdout)
			}
			o, _ = durableRun(t, t.TempDir(), nil, append([]string{"resume", id}, target...)...)
			o.expect(t, 2, "resume: run "+id+": finished (ok, exit code 0): there is nothing to resume")
		})
	}
}

// TestDurableOnDaemonLockFollowsTheConnection: while the runner lives,
// the daemon says its run is running and refuses to resume it (exit 2);
// once the runner is killed, its connection drops and the run is
// resumable at once.
func TestDurableOnDaemonLockFollowsTheConnection(t *testing.T) {
	target, _ := journalDaemon(t, true)
	dir := durableDir(t, "sleep(30)\n")
	cmd := exec.Command(sousBinary(t), append([]string{"run", "main.star"}, target...)...)
	cmd.Dir, cmd.Env = dir, cleanEnv()
	var stderr testutil.SyncBuffer
	cmd.Stderr = &stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cmd.Process.Kill(); cmd.Wait() })
	var id string
	for deadline := time.Now().Add(10 * time.Second); id == "" && time.Now().Before(deadline); time.Sleep(20 * time.Millisecond) {
		if m := runIDLine.FindStringSubmatch(stderr.String()); m != nil {
			id = m[1]
		}
	}
	if id == "" {
		t.Fatalf("no run id:\n%s", stderr.String())
	}
	waitRunState(t, target, id, "running")
	// Run once, not retried as durableRun retries "still alive".
	resume := exec.Command(sousBinary(t), append([]string{"resume", id}, target...)...)
	resume.Dir, resume.Env = t.TempDir(), gitTestEnv()
	o, _ := runKillable(t, resume)
	o.expect(t, 2, "sous: resume: run "+id+": its runner is still alive (it holds the journal's lock)")
	cmd.Process.Kill()
	cmd.Wait()
	waitRunState(t, target, id, "resumable")
}

// waitRunState waits until sous runs says run is in state.
func waitRunState(t *testing.T, target []string, run, state string) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for {
		o, _ := durableRun(t, t.TempDir(), nil, append([]string{"runs"}, target...)...)
		o.expect(t, 0)
		line := runsLine(t, o, run)
		if regexp.MustCompile(`\s` + state + `\s`).MatchString(line) {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("run %s never %s: %q", run, state, line)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// TestDurableOnDaemonTornTail: the runner killed once its print record
// reached the daemon, and that record then cut at a random byte (as a
// crash in the middle of writing it leaves it): the daemon drops the torn
// record, and the resume finishes the run with every command done once,
// printing again only the line whose record was lost.
func TestDurableOnDaemonTornTail(t *testing.T) {
	seed := uint64(time.Now().UnixNano())
	t.Logf("seed %d", seed)
	rng := rand.New(rand.NewPCG(seed, 1))
	target, state := journalDaemon(t, true)
	dir := durableDir(t, daemonRecipe)
	o, killed := durableRun(t, dir, []string{"SOUS_FAULT_JOURNAL=4"}, append([]string{"run", "main.star", "-a", "dir=" + dir}, target...)...)
	if !killed {
		t.Fatalf("not killed: %d\n%s", o.code, o.stderr)
	}
	id := runIDOf(t, o)
	path := filepath.Join(state, "runs", id+".journal")
	waitRunState(t, target, id, "resumable") // the daemon let go of the file
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	last := lastFrameStart(t, data)
	cut := last + 1 + rng.IntN(len(data)-last-1) // within the last frame, never whole
	if err := os.WriteFile(path, data[:cut], 0o600); err != nil {
		t.Fatal(err)
	}
	o, _ = durableRun(t, t.TempDir(), nil, append([]string{"resume", id}, target...)...)
	o.expect(t, 0)
	if recipePrints(o) != "between done" {
		t.Errorf("the resume printed %q", recipePrints(o))
	}
	if got := counts(t, dir); got != eachOnce {
		t.Errorf("counters %s, want each once", got)
	}
	after, _ := os.ReadFile(path)
	recs, good, err := journal.Decode(after)
	if err != nil || good != len(after) || recs[len(recs)-1].Kind != journal.KindEnd {
		t.Errorf("the journal after the resume: %v, %d of %d bytes good", err, good, len(after))
	}
}

// lastFrameStart is the offset of the last frame of a journal file.
func lastFrameStart(t *testing.T, data []byte) int {
	t.Helper()
	pos, last := len("sousjnl1"), -1
	for pos+8 <= len(data) {
		last = pos
		pos += 8 + int(binary.LittleEndian.Uint32(data[pos:pos+4]))
	}
	if last < 0 || pos != len(data) {
		t.Fatalf("not a whole journal (%d of %d)", pos, len(data))
	}
	return last
}

// TestDurableOnDaemonWithoutTheFeature: a daemon with no state dir keeps
// no journals: a run there is not journaled and says nothing of it, and
// sous runs and sous resume fail naming the feature.
func TestDurableOnDaemonWithoutTheFeature(t *testing.T) {
	target, _ := journalDaemon(t, false)
	dir := durableDir(t, daemonRecipe)
	o, _ := durableRun(t, dir, nil, append([]string{"run", "main.star", "-a", "dir=" + dir}, target...)...)
	o.expect(t, 0)
	id := runIDOf(t, o)
	if strings.Contains(o.stderr, "journal") {
		t.Errorf("the run spoke of its journal:\n%s", o.stderr)
	}
	want := "the daemon at unix://" + target[1] + " keeps no journals (no run.journal feature: upgrade it, or run it with a --state-dir)"
	o, _ = durableRun(t, dir, nil, append([]string{"runs"}, target...)...)
	o.expect(t, 2, "sous: runs: "+want)
	o, _ = durableRun(t, dir, nil, append([]string{"resume", id}, target...)...)
	o.expect(t, 2, "sous: resume: "+want)
}

// TestRunSaysItsID: a journaled run says its id first on stderr, a plain
// run on the embedded daemon does not, and --json's start event carries
// it either way.
func TestRunSaysItsID(t *testing.T) {
	dir := t.TempDir()
	recipe := filepath.Join(dir, "main.star")
	if err := os.WriteFile(recipe, []byte("print('hi')\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	idLine := regexp.MustCompile(`^sous: run ([0-9a-f]{16})\n`)
	for _, tc := range []struct {
		name  string
		args  []string
		wants bool
	}{
		{"plain", []string{"run", "--json", recipe}, false},
		{"journaled", []string{"run", "--json", "--journal", filepath.Join(dir, "j"), recipe}, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var stdout, stderr strings.Builder
			if code := Main(tc.args, strings.NewReader(""), &stdout, &stderr); code != 0 {
				t.Fatalf("exit %d: %s", code, stderr.String())
			}
			start := regexp.MustCompile(`"event":"start".*"run":"([0-9a-f]{16})"`).FindStringSubmatch(stdout.String())
			if start == nil {
				t.Fatalf("the start event carries no run id:\n%s", stdout.String())
			}
			m := idLine.FindStringSubmatch(stderr.String())
			switch {
			case tc.wants && (m == nil || m[1] != start[1]):
				t.Errorf("stderr does not start with run %s:\n%s", start[1], stderr.String())
			case !tc.wants && m != nil:
				t.Errorf("a plain run said its id:\n%s", stderr.String())
			}
		})
	}
}

// TestDurableOverWebSocketResumedOnTheSocket: `sous daemon serve` (its
// default state dir) keeps the journal of a run made over WebSocket,
// where the runner waits for the daemon's answers; killed, the run is
// resumed by a client on the daemon's Unix socket.
func TestDurableOverWebSocketResumedOnTheSocket(t *testing.T) {
	const token = "tok"
	sock := filepath.Join(testutil.ShortTempDir(t), "d.sock")
	d := serveDaemonProc(t, token, 2, "--socket", sock, "--listen", "ws://127.0.0.1:0")
	ws := d.url(t, wsLine)
	tf := tokenFile(t, token)
	dir := durableDir(t, daemonRecipe)
	o, killed := durableRun(t, dir, []string{"SOUS_FAULT_JOURNAL=6"}, "run", "main.star", "-a", "dir="+dir, "--remote", ws, "--token-file", tf)
	if !killed {
		t.Fatalf("not killed: %d\n%s", o.code, o.stderr)
	}
	id := runIDOf(t, o)
	o, _ = durableRun(t, t.TempDir(), nil, "resume", id, "--socket", sock, "--token-file", tf)
	o.expect(t, 0, "sous: resuming run "+id)
	if recipePrints(o) != "done" {
		t.Errorf("the resume printed %q", recipePrints(o))
	}
	if got := counts(t, dir); got != eachOnce {
		t.Errorf("counters %s, want each once", got)
	}
}

// TestDurableOnDaemonEveryKillPoint kills the runner right after each
// record of daemonRecipe's journal reached the daemon's socket (the
// daemon applies it after the runner is gone), then resumes from another
// client: no command is ever done twice. Killed after a command's answer
// or a print, the resume finishes the run, every command done once;
// killed after a command's call record, the resume takes the command
// over (follows its process if the daemon started it, else starts it);
// killed after the end record, the run is finished.
func TestDurableOnDaemonEveryKillPoint(t *testing.T) {
	target, _ := journalDaemon(t, true)
	for point := 2; point <= 10; point++ {
		t.Run(fmt.Sprint(point), func(t *testing.T) {
			dir := durableDir(t, daemonRecipe)
			o, killed := durableRun(t, dir, []string{"SOUS_FAULT_JOURNAL=" + fmt.Sprint(point)},
				append([]string{"run", "main.star", "-a", "dir=" + dir}, target...)...)
			if !killed {
				t.Fatalf("not killed: %d\n%s", o.code, o.stderr)
			}
			id := runIDOf(t, o)
			state := "resumable"
			if point == 10 {
				state = "finished"
			}
			waitRunState(t, target, id, state) // the daemon saw the runner's connection close
			o, _ = durableRun(t, t.TempDir(), nil, append([]string{"resume", id}, target...)...)
			got := counts(t, dir)
			switch point {
			case 2, 5, 7:
				// A call record: its command may or may not have run on
				// the daemon; the resume follows it if it did (its id is
				// the call's), else starts it: once either way.
				o.expect(t, 0, "was under way when run "+id+"'s runner died: taking over what it started on")
				if got != eachOnce {
					t.Errorf("counters %s, want each once", got)
				}
			case 10:
				o.expect(t, 2, "finished (ok, exit code 0): there is nothing to resume")
				if got != eachOnce {
					t.Errorf("counters %s, want each once", got)
				}
			default:
				o.expect(t, 0, "sous: resuming run "+id)
				if got != eachOnce {
					t.Errorf("counters %s, want each once", got)
				}
			}
		})
	}
}

// runKilledAfter runs main.star in dir on target and SIGKILLs the runner
// from outside after delay (no fault hook, which sends every record at
// once); it returns the run's id.
func runKilledAfter(t *testing.T, dir string, target []string, delay time.Duration) string {
	t.Helper()
	cmd := exec.Command(sousBinary(t), append([]string{"run", "main.star", "-a", "dir=" + dir}, target...)...)
	cmd.Dir, cmd.Env = dir, gitTestEnv()
	var stderr strings.Builder
	cmd.Stderr = &stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	time.Sleep(delay)
	cmd.Process.Kill()
	cmd.Wait()
	return runIDOf(t, outcome{stderr: stderr.String()})
}

// runKilledAfterStart runs sous with args in dir and SIGKILLs it delay
// after it printed its run's id (its connection and journal are made by
// then: over ssh that takes longer than the commands after it); it
// returns the run's id. A run that ends first is not an error.
func runKilledAfterStart(t *testing.T, dir string, args, env []string, delay time.Duration) string {
	t.Helper()
	cmd := exec.Command(sousBinary(t), args...)
	cmd.Dir, cmd.Env = dir, env
	var stderr testutil.SyncBuffer
	cmd.Stderr = &stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	defer cmd.Wait()
	defer cmd.Process.Kill()
	for deadline := time.Now().Add(30 * time.Second); ; time.Sleep(time.Millisecond) {
		if m := runIDLine.FindStringSubmatch(stderr.String()); m != nil {
			time.Sleep(delay)
			return m[1]
		}
		if time.Now().After(deadline) {
			t.Fatalf("no run id in 30 s:\n%s", stderr.String())
		}
	}
}

// manyCommandsRecipe runs 120 commands, each appending to a counter file
// of its own.
const manyCommandsRecipe = `d = args["dir"]
for i in range(120):
    sh("echo x >> %s/count/n%d" % (d, i))
`

// TestDurableOnDaemonKilledAtAnyMoment: the runner SIGKILLed from outside
// at a random moment of a run on a socket daemon, where each command's
// record goes in the same write as the command's request (no fault hook,
// which sends records apart): the resume does every command the run had
// not done, and none twice.
func TestDurableOnDaemonKilledAtAnyMoment(t *testing.T) {
	target, _ := journalDaemon(t, true)
	killedAtAnyMoment(t, target, nil)
}

// TestDurableOverSSHKilledAtAnyMoment is the same over the ssh bridge,
// where too each command's records go in the write of its request, ahead
// of it on the same connection, without waiting for the daemon's answer:
// the daemon applies them before it reads the request, so no command is
// done without its record, however the runner's death cuts the stream.
func TestDurableOverSSHKilledAtAnyMoment(t *testing.T) {
	f := newSSHFixture(t)
	killedAtAnyMoment(t, []string{"--remote", f.remote}, append(gitTestEnv(), f.env...))
}

// TestDurableOverWebSocketKilledAtAnyMoment: over WebSocket, a link that
// cannot hold a request for the next write, the records go in a message
// of their own just before the command's, unanswered yet when the command
// is sent.
func TestDurableOverWebSocketKilledAtAnyMoment(t *testing.T) {
	const token = "tok"
	sock := filepath.Join(testutil.ShortTempDir(t), "d.sock")
	d := serveDaemonProc(t, token, 2, "--socket", sock, "--listen", "ws://127.0.0.1:0")
	killedAtAnyMoment(t, []string{"--remote", d.url(t, wsLine), "--token-file", tokenFile(t, token)}, nil)
}

// killedAtAnyMoment runs manyCommandsRecipe on target, SIGKILLs its runner
// from outside at a random moment of its commands (0-200 ms after it
// printed its run's id), resumes it, and checks that every command ran
// exactly once; six rounds. env is the runners' environment (nil:
// gitTestEnv's).
func killedAtAnyMoment(t *testing.T, target, env []string) {
	if env == nil {
		env = gitTestEnv()
	}
	rng := rand.New(rand.NewPCG(uint64(time.Now().UnixNano()), 29))
	for round := range 6 {
		delay := time.Duration(rng.IntN(200)) * time.Millisecond
		t.Run(fmt.Sprint(round), func(t *testing.T) {
			dir := durableDir(t, manyCommandsRecipe)
			id := runKilledAfterStart(t, dir, append([]string{"run", "main.star", "-a", "dir=" + dir}, target...), env, delay)
			before, _ := filepath.Glob(filepath.Join(dir, "count", "n*"))
			t.Logf("killed %v after the run started, %d of 120 commands done", delay, len(before))
			o, _ := retryWhileReleased([]string{"resume"}, func() (outcome, bool) {
				cmd := exec.Command(sousBinary(t), append([]string{"resume", id}, target...)...)
				cmd.Dir, cmd.Env = t.TempDir(), env
				return runKillable(t, cmd)
			})
			if o.code != 0 && !strings.Contains(o.stderr, "there is nothing to resume") {
				t.Fatalf("resume after %v: exit %d\n%s", delay, o.code, o.stderr)
			}
			for i := range 120 {
				data, _ := os.ReadFile(filepath.Join(dir, "count", fmt.Sprintf("n%d", i)))
				if string(data) != "x\n" {
					t.Fatalf("killed after %v: command %d ran %d times, want once", delay, i, strings.Count(string(data), "x"))
				}
			}
		})
	}
}

// TestDurableOnDaemonSleepWaitsWhatWasLeft: a run on a socket daemon
// killed from outside while it sleeps (no fault hook, which sends every
// record at once): sleep's record reached the daemon within milliseconds
// though nothing synced for it, so the resume sleeps only what was left.
func TestDurableOnDaemonSleepWaitsWhatWasLeft(t *testing.T) {
	target, _ := journalDaemon(t, true)
	dir := durableDir(t, "d = args[\"dir\"]\nsleep(4)\nsh(\"echo x >> %s/count/x\" % d)\n")
	id := runKilledAfter(t, dir, target, 1500*time.Millisecond)
	start := time.Now()
	o, _ := durableRun(t, t.TempDir(), nil, append([]string{"resume", id}, target...)...)
	took := time.Since(start)
	o.expect(t, 0)
	if took > 3500*time.Millisecond {
		t.Errorf("the resume took %s: it slept the whole 4 s again", took)
	}
	if data, _ := os.ReadFile(filepath.Join(dir, "count", "x")); string(data) != "x\n" {
		t.Errorf("count/x is %q", data)
	}
}
