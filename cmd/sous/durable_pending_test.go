package main

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/seed5ad92d46/sous/internal/testutil"
	"github.com/seed5ad92d46/sous/runtime/journal"
)

// pendingRecipe makes sessionRecipe's two turns with Session.start: the
// first waited for with Pending.wait, the second with wait_all.
const pendingRecipe = `d = args["dir"]
cli = json.decode(args["cli"])
s = sdk.session(cli = cli, cwd = d)
p1 = s.start("first")
t1 = p1.wait()
sh("echo '%s' >> %s/count/t1" % (t1.text, d))
p2 = s.start("second")
t2 = wait_all([p2])[0]
sh("echo '%s' >> %s/count/t2" % (t2.text, d))
s.close()
print("finished")
`

// pendingRecords is how many records pendingRecipe's run journals: 1 run,
// 2-3 sdk.session, 4-5 start, 6-7 wait, 8-9 sh, 10-11 start, 12-13 the
// wait wait_all makes, 14-15 sh, 16-17 close, 18 print, 19 end.
const pendingRecords = 19

func (a *durableAgent) pendingDir(t *testing.T, name string) string {
	t.Helper()
	return a.recipeDir(t, name, pendingRecipe)
}

// recipeDir is agentDir with recipe as its main.star.
func (a *durableAgent) recipeDir(t *testing.T, name, recipe string) string {
	t.Helper()
	dir := a.agentDir(t, name)
	if err := os.WriteFile(filepath.Join(dir, "main.star"), []byte(recipe), 0o644); err != nil {
		t.Fatal(err)
	}
	return dir
}

// killedAndResumed runs args in dir, killed once point records are in
// its journal, resumes the run and returns the resume, which exited 0.
func (a *durableAgent) killedAndResumed(t *testing.T, dir string, args []string, point int) outcome {
	t.Helper()
	o, killed := a.sousIn(t, dir, []string{fmt.Sprintf("SOUS_FAULT_JOURNAL=%d", point)}, args...)
	if !killed {
		t.Fatalf("not killed at %d: %d\n%s", point, o.code, o.stderr)
	}
	id := runIDOf(t, o)
	o, _ = a.sousIn(t, dir, nil, "resume", "--journal", "j", id)
	o.expect(t, 0, "sous: resuming run "+id)
	if testing.Verbose() {
		t.Logf("the resume said:\n%s", o.stderr)
	}
	return o
}

// killPoint is a run killed right after its journal's at-th record, on the
// socket daemon, whose CLIs outlive the runner, or on the embedded one.
type killPoint struct {
	at       int
	embedded bool
}

// everyKill is each record from..to-1 as a kill point, on the socket
// daemon and then on the embedded one.
func everyKill(from, to int) []killPoint {
	var ks []killPoint
	for _, embedded := range []bool{false, true} {
		for at := from; at < to; at++ {
			ks = append(ks, killPoint{at, embedded})
		}
	}
	return ks
}

// killedAt runs check as a subtest for each kill point, the model's counts
// reset and the runner on the daemon the point names; the socket daemon is
// the target again after.
func (a *durableAgent) killedAt(t *testing.T, points []killPoint, check func(t *testing.T, k killPoint)) {
	t.Helper()
	for _, k := range points {
		a.reset()
		t.Run(fmt.Sprintf("killed at record %d, embedded %t", k.at, k.embedded), func(t *testing.T) {
			a.target = a.socket
			if k.embedded {
				a.embedded()
			}
			check(t, k)
		})
	}
	a.target = a.socket
}

// TestDurablePendingTurnsResume kills the runner of a recipe whose turns
// are started with Session.start and waited for with Pending.wait and
// wait_all, right after each record of its journal, on a socket daemon
// (whose CLI outlives the runner) and on the embedded daemon (whose CLI
// dies with it); then while the model answers each turn. Every resume
// exits 0, each turn's command ran once with the model's reply, and on the
// socket daemon the model saw each prompt once: a turn the runner died in
// is taken from the CLI that went on with it, or sent again where its
// prompt never reached a CLI.
func TestDurablePendingTurnsResume(t *testing.T) {
	a := newDurableAgent(t)
	base := a.pendingDir(t, "base")
	o, _ := a.sousIn(t, base, nil, a.runArgs(base)...)
	o.expect(t, 0, "finished")
	checkTurns(t, base)
	if n := len(journalRecords(t, filepath.Join(base, "j"), runIDOf(t, o))); n != pendingRecords {
		t.Fatalf("the run journaled %d records, want %d: the kill points below are off", n, pendingRecords)
	}
	a.killedAt(t, everyKill(3, pendingRecords-1), func(t *testing.T, k killPoint) {
		dir := a.pendingDir(t, fmt.Sprintf("at%d-%t", k.at, k.embedded))
		o := a.killedAndResumed(t, dir, a.runArgs(dir), k.at)
		checkTurns(t, dir)
		first, second := a.count("first"), a.count("second")
		if !k.embedded && (first != 1 || second != 1) {
			t.Errorf("the model saw first %d times, second %d times\n%s", first, second, o.stderr)
		}
		// The embedded daemon's CLI died with the runner: a turn
		// it was answering is paid again, never more.
		if k.embedded && (first < 1 || first > 2 || second < 1 || second > 2) {
			t.Errorf("the model saw first %d times, second %d times\n%s", first, second, o.stderr)
		}
		if n := strings.Count(o.stdout+o.stderr, "finished\n"); n != 1 {
			t.Errorf("finished shown %d times in the resume:\n%s", n, o.stdout+o.stderr)
		}
		if testing.Verbose() {
			t.Logf("the resume said:\n%s", o.stderr)
		}
	})
	for _, prompt := range []string{"first", "second"} {
		a.reset()
		duringTurnOf(t, a, prompt, a.pendingDir, "CLI finished the turn the runner died in: its result is the wait's")
	}
}

// parallelTurnsRecipe starts a turn in each of two sessions through
// parallel() and writes each turn's text.
const parallelTurnsRecipe = `d = args["dir"]
cli = json.decode(args["cli"])
ss = {p: sdk.session(cli = cli, cwd = d) for p in ["first", "second"]}
turns = parallel(["first", "second"], lambda p: ss[p].start(p), limit = LIMIT)
sh("echo '%s' >> %s/count/t1" % (turns[0].text, d))
sh("echo '%s' >> %s/count/t2" % (turns[1].text, d))
for s in ss.values():
    s.close()
`

// TestDurableParallelTurnsResume kills the runner of a parallel() of two
// turns at once, the first slower than the second, after each record of
// its journal, on a socket daemon and on the embedded one: the turns are
// journaled when both ended, in item order (not the order they ended in,
// which a resume, whose replayed turns are all done at once, would not
// make again), as their own Pending.wait, so every resume exits 0, each turn's command ran once
// with the model's reply, and on the socket daemon the model saw each
// prompt once. With fail_fast, which task starts next depends on which
// ended first: such a run is refused at resume, naming the line.
func TestDurableParallelTurnsResume(t *testing.T) {
	a := newDurableAgent(t)
	a.slow = "first"
	write := func(t *testing.T, name, limit string) string {
		return a.recipeDir(t, name, strings.Replace(parallelTurnsRecipe, "LIMIT", limit, 1))
	}
	base := write(t, "parallel-base", "2")
	o, _ := a.sousIn(t, base, nil, a.runArgs(base)...)
	o.expect(t, 0)
	checkTurns(t, base)
	total := len(journalRecords(t, filepath.Join(base, "j"), runIDOf(t, o)))
	a.killedAt(t, everyKill(4, total-1), func(t *testing.T, k killPoint) {
		dir := write(t, fmt.Sprintf("parallel%d-%t", k.at, k.embedded), "2")
		o := a.killedAndResumed(t, dir, a.runArgs(dir), k.at)
		checkTurns(t, dir)
		first, second := a.count("first"), a.count("second")
		if !k.embedded && (first != 1 || second != 1) || first < 1 || first > 2 || second < 1 || second > 2 {
			t.Errorf("the model saw first %d times, second %d times\n%s", first, second, o.stderr)
		}
	})
	a.reset()
	t.Run("fail_fast is not resumed", func(t *testing.T) {
		recipe := strings.Replace(parallelTurnsRecipe, "limit = LIMIT", "fail_fast = True", 1)
		dir := a.recipeDir(t, "fail-fast", recipe)
		at := a.callPositions(t, dir, a.runArgs(dir))
		live := at["parallel (a task's turn)"]
		if live == 0 {
			t.Fatalf("no turn of parallel() journaled as a live call: %v", at)
		}
		a.reset()
		dir = a.recipeDir(t, "fail-fast-killed", recipe)
		o, killed := a.sousIn(t, dir, []string{fmt.Sprintf("SOUS_FAULT_JOURNAL=%d", live)}, a.runArgs(dir)...)
		if !killed {
			t.Fatalf("not killed: %d\n%s", o.code, o.stderr)
		}
		id := runIDOf(t, o)
		o, _ = a.sousIn(t, dir, nil, "resume", "--journal", "j", id)
		o.expect(t, 2, "cannot be resumed: line 4 called parallel (a task's turn)")
	})
}

// settingsRecipe changes the session's model and permission mode between
// its turns and reads its info.
const settingsRecipe = `d = args["dir"]
cli = json.decode(args["cli"])
s = sdk.session(cli = cli, cwd = d)
t1 = s.send("first")
s.set_model("claude-second-model")
s.set_permission_mode("acceptEdits")
sh("echo '%s %s' >> %s/count/t1" % (t1.text, type(s.info), d))
t2 = s.send("second")
modes = [m.get("permissionMode") for m in t2.messages if m.get("type") == "system" and m.get("subtype") == "init"]
sh("echo '%s %s' >> %s/count/t2" % (t2.text, modes, d))
s.close()
`

// TestDurableSessionSettingsResume kills the runner of settingsRecipe
// after set_model and set_permission_mode are recorded or answered: the
// CLI that takes the session over starts with the model and the mode set
// (the second turn's request names the model, its system/init the mode),
// Session.info reads as it did, and each turn is sent once.
func TestDurableSessionSettingsResume(t *testing.T) {
	a := newDurableAgent(t)
	base := a.recipeDir(t, "settings-base", settingsRecipe)
	at := a.callPositions(t, base, a.runArgs(base))
	model, mode := at["Session.set_model"], at["Session.set_permission_mode"]
	if model == 0 || mode == 0 {
		t.Fatalf("the journal lacks a setting: %v", at)
	}
	a.reset()
	a.killedAt(t, []killPoint{{model, false}, {model + 1, false}, {mode + 1, false}, {mode + 3, false}, {model, true}, {mode + 1, true}}, func(t *testing.T, k killPoint) {
		dir := a.recipeDir(t, fmt.Sprintf("settings%d-%t", k.at, k.embedded), settingsRecipe)
		a.killedAndResumed(t, dir, a.runArgs(dir), k.at)
		// The second turn's system/init says the mode the CLI runs in.
		want := map[string]string{"t1": "reply to first dict\n", "t2": "reply to second [\"acceptEdits\"]\n"}
		for name, w := range want {
			if data, _ := os.ReadFile(filepath.Join(dir, "count", name)); string(data) != w {
				t.Errorf("count/%s is %q, want %q", name, data, w)
			}
		}
		if a.count("first") != 1 || a.count("second") != 1 {
			t.Errorf("the model saw first %d times, second %d times", a.count("first"), a.count("second"))
		}
		for _, r := range a.api.Scripted() {
			if r.Prompt() == "second" && r.Parsed.Model != "claude-second-model" {
				t.Errorf("the second turn asked model %q: the CLI that took the session over lost set_model", r.Parsed.Model)
			}
		}
	})
}

// callPositions runs args in dir to its end and returns where each
// builtin's first call is in the run's journal (1: the first record): a
// kill right after that many records is a runner that died in the call,
// one record later (a call that makes none of its own) after its answer.
func (a *durableAgent) callPositions(t *testing.T, dir string, args []string) map[string]int {
	t.Helper()
	o, _ := a.sousIn(t, dir, nil, args...)
	o.expect(t, 0)
	at := map[string]int{}
	for i, r := range journalRecords(t, filepath.Join(dir, "j"), runIDOf(t, o)) {
		if r.Kind == journal.KindCall && at[r.Fn] == 0 {
			at[r.Fn] = i + 1
		}
	}
	return at
}

// controlRecipe sends a control request and rewinds the files of its
// first turn, which wrote one.
const controlRecipe = `d = args["dir"]
cli = json.decode(args["cli"])
path = args["file"]
s = sdk.session(cli = cli, cwd = d, policy = lambda req: approve(), checkpoints = True)
t1 = s.send("first")
sh("echo '%s %s' >> %s/count/t1" % (t1.text, files.read(path).strip(), d))
st = s.control("mcp_status")
changed = s.rewind_files(t1)
sh("echo '%s %s %s' >> %s/count/t2" % (type(st), changed == [path], files.read(path), d))
s.close()
`

// TestDurableControlAndRewindResume kills the runner of controlRecipe
// around its control request and its rewind_files: each runs again on
// the CLI that takes the session over when the runner died in it, and
// replays its answer when it was answered. The rewind restores the file
// the first turn wrote, with that CLI resumed from the session's
// checkpoints.
func TestDurableControlAndRewindResume(t *testing.T) {
	a := newDurableAgent(t)
	file := filepath.Join(a.dir, "first.txt")
	a.mu.Lock()
	a.tool = "first"
	a.mu.Unlock()
	write := func(t *testing.T, name string) (string, []string) {
		dir := a.recipeDir(t, name, controlRecipe)
		return dir, append(a.runArgs(dir), "-a", "file="+file)
	}
	base, args := write(t, "base")
	at := a.callPositions(t, base, args)
	ctl, rew := at["Session.control"], at["Session.rewind_files"]
	if ctl == 0 || rew == 0 {
		t.Fatalf("the journal has no control or rewind_files call: %v", at)
	}
	a.killedAt(t, []killPoint{{ctl - 1, false}, {ctl, false}, {ctl + 1, false}, {rew, false}, {rew + 1, false}, {ctl, true}, {rew, true}}, func(t *testing.T, k killPoint) {
		os.Remove(file)
		dir, args := write(t, fmt.Sprintf("control%d-%t", k.at, k.embedded))
		o := a.killedAndResumed(t, dir, args, k.at)
		for name, want := range map[string]string{"t1": "reply to first x\n", "t2": "dict True None\n"} {
			if data, _ := os.ReadFile(filepath.Join(dir, "count", name)); string(data) != want {
				t.Errorf("count/%s is %q, want %q\n%s", name, data, want, o.stderr)
			}
		}
		if _, err := os.Stat(file); !os.IsNotExist(err) {
			t.Errorf("the file the first turn wrote is still there: %v", err)
		}
		if n := a.count("first"); n != 2 { // the tool use, then its result
			t.Errorf("the model saw first in %d requests, want 2", n)
		}
	})
}

// TestDurableResumeDiedStartingACLI: a resume that sends again a turn no
// CLI had (its prompt never left the runner) starts a CLI for it, and
// dies before the prompt reaches that CLI. The next resume finds the CLI
// alive and idle, with no mark of the prompt: it waits a bounded time for
// the turn to begin (it waited forever), ends that CLI, sends the prompt
// once and exits 0.
func TestDurableResumeDiedStartingACLI(t *testing.T) {
	a := newDurableAgent(t)
	dir := a.agentDir(t, "fresh-cli")
	// Killed once the second send is recorded, before it writes.
	o, killed := a.sousIn(t, dir, []string{"SOUS_FAULT_JOURNAL=8"}, a.runArgs(dir)...)
	if !killed {
		t.Fatalf("not killed: %d\n%s", o.code, o.stderr)
	}
	id := runIDOf(t, o)
	before := map[string]bool{}
	for _, p := range a.srv.Registry().List() {
		before[p.ID] = true
	}
	resume := exec.Command(sousBinary(t), append([]string{"resume", "--journal", "j", id}, a.target...)...)
	resume.Dir, resume.Env = dir, a.env
	var stderr testutil.SyncBuffer
	resume.Stderr = &stderr
	if err := resume.Start(); err != nil {
		t.Fatal(err)
	}
	// The CLI the resume starts for the turn appears on the daemon well
	// before it has started up and been sent anything.
	started := ""
	for deadline := time.Now().Add(60 * time.Second); started == ""; time.Sleep(2 * time.Millisecond) {
		for _, p := range a.srv.Registry().List() {
			if !before[p.ID] && strings.HasPrefix(p.ID, "sous-"+id+"-") {
				started = p.ID
			}
		}
		if time.Now().After(deadline) {
			resume.Process.Kill()
			t.Fatalf("the resume started no CLI:\n%s", stderr.String())
		}
	}
	resume.Process.Kill()
	resume.Wait()
	if a.count("second") != 0 {
		t.Fatalf("the prompt reached the model before the kill: the test did not kill where it meant to")
	}
	began := time.Now()
	o, _ = a.sousIn(t, dir, nil, "resume", "--journal", "j", id)
	o.expect(t, 0, "sous: resuming run "+id)
	checkTurns(t, dir)
	if a.count("first") != 1 || a.count("second") != 1 {
		t.Errorf("the model saw first %d times, second %d times\n%s", a.count("first"), a.count("second"), o.stderr)
	}
	t.Logf("the second resume took %v (the CLI %s left idle by the first)", time.Since(began).Round(time.Millisecond), started)
}

// interruptRecipe interrupts a turn the model holds, then sends another.
const interruptRecipe = `d = args["dir"]
cli = json.decode(args["cli"])
s = sdk.session(cli = cli, cwd = d)
p = s.start("first")
sleep(1)
s.interrupt()
t1 = p.wait()
sh("echo '%s' >> %s/count/t1" % (t1.subtype, d))
t2 = s.send("second")
sh("echo '%s' >> %s/count/t2" % (t2.text, d))
s.close()
`

// TestDurableInterruptResumes kills the runner of interruptRecipe, whose
// first turn the model holds until the test ends, as Session.interrupt is
// recorded, once it is answered and as the wait is recorded; on a socket
// daemon and on the embedded one. On the socket daemon a resume that died
// in the interrupt sends it to the CLI that has the turn, and the wait
// takes that CLI's interrupted result; on the embedded daemon, whose CLI
// died with the runner, the turn is sent again and interrupted at once.
// Every resume exits 0 with the turn interrupted and the next turn sent
// once.
func TestDurableInterruptResumes(t *testing.T) {
	a := newDurableAgent(t)
	_, release := a.holdPrompt("first")
	defer close(release)
	base := a.recipeDir(t, "interrupt-base", interruptRecipe)
	at := a.callPositions(t, base, a.runArgs(base))
	in, wait := at["Session.interrupt"], at["Pending.wait"]
	if in == 0 || wait == 0 {
		t.Fatalf("the journal lacks the interrupt or the wait: %v", at)
	}
	a.killedAt(t, []killPoint{{in, false}, {in + 1, false}, {wait, false}, {in, true}, {in + 1, true}, {wait, true}}, func(t *testing.T, k killPoint) {
		dir := a.recipeDir(t, fmt.Sprintf("interrupt%d-%t", k.at, k.embedded), interruptRecipe)
		o := a.killedAndResumed(t, dir, a.runArgs(dir), k.at)
		for name, want := range map[string]string{"t1": "error_during_execution\n", "t2": "reply to second\n"} {
			if data, _ := os.ReadFile(filepath.Join(dir, "count", name)); string(data) != want {
				t.Errorf("count/%s is %q, want %q\n%s", name, data, want, o.stderr)
			}
		}
		if a.count("second") != 1 {
			t.Errorf("the model saw second %d times", a.count("second"))
		}
	})
}
