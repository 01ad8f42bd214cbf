package main

import (
	"fmt"
	"math/rand/v2"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/seed5ad92d46/sous/daemon"
	"github.com/seed5ad92d46/sous/internal/claudecli"
	"github.com/seed5ad92d46/sous/internal/faultproxy"
	"github.com/seed5ad92d46/sous/internal/testutil"
	"github.com/seed5ad92d46/sous/runtime/agent/fakemodel"
)

// durableAgent is an agent world whose sessions run on a socket daemon,
// which outlives the runner, with a scripted model that answers "reply to
// PROMPT", counts the requests of each prompt, and can hold one prompt's
// request until the test lets it go.
type durableAgent struct {
	*agentWorld
	target []string       // where runs go: socket, or nil for the embedded daemon
	socket []string       // the socket daemon's flags
	srv    *daemon.Server // the socket daemon

	mu       sync.Mutex
	requests map[string]int
	tool     string        // the prompt whose turn first asks to write a file (toolPrompt)
	slow     string        // the prompt whose requests take slowFor
	hold     string        // the prompt whose requests wait for release
	arrived  chan struct{} // closed when the first came
	release  chan struct{}
}

func newDurableAgent(t *testing.T) *durableAgent {
	t.Helper()
	a := &durableAgent{requests: make(map[string]int)}
	a.agentWorld = newAgentWorld(t, claudecli.Latest, fakemodel.Options{Func: func(req *fakemodel.Request, _ int) fakemodel.Reply {
		prompt := req.Prompt()
		a.mu.Lock()
		a.requests[prompt]++
		if prompt == a.tool && len(req.ToolResults()) == 0 {
			a.mu.Unlock()
			return fakemodel.ToolUse("Write", map[string]any{"file_path": filepath.Join(a.dir, prompt+".txt"), "content": "x\n"})
		}
		slow := prompt == a.slow
		var arrived, release chan struct{}
		if prompt == a.hold {
			// Every request of the prompt waits; the first says it came.
			arrived, release = a.arrived, a.release
			a.arrived = nil
		}
		a.mu.Unlock()
		if arrived != nil {
			close(arrived)
		}
		if release != nil {
			<-release
		}
		if slow {
			time.Sleep(slowFor)
		}
		return fakemodel.Text("reply to " + prompt)
	}})
	// With a state dir: a run without --journal has its journal kept by
	// the daemon (the fault test uses both).
	sock, srv := socketDaemon(t, "tok", daemon.Config{Env: a.env, StateDir: t.TempDir()})
	a.srv = srv
	a.socket = []string{"--socket", sock, "--token-file", tokenFile(t, "tok")}
	a.target = a.socket
	return a
}

// slowFor is how long a request of durableAgent.slow takes.
const slowFor = 1500 * time.Millisecond

// embedded makes the runs that follow use the embedded daemon, whose
// CLIs die with the runner.
func (a *durableAgent) embedded() { a.target = nil }

// holdPrompt makes the request of prompt wait until release is closed.
func (a *durableAgent) holdPrompt(prompt string) (arrived, release chan struct{}) {
	a.mu.Lock()
	defer a.mu.Unlock()
	a.hold, a.arrived, a.release = prompt, make(chan struct{}), make(chan struct{})
	return a.arrived, a.release
}

func (a *durableAgent) reset() {
	a.mu.Lock()
	defer a.mu.Unlock()
	a.requests = make(map[string]int)
}

func (a *durableAgent) count(prompt string) int {
	a.mu.Lock()
	defer a.mu.Unlock()
	return a.requests[prompt]
}

// sous runs the sous binary in dir with the world's environment and
// extra, and says whether SIGKILL ended it.
func (a *durableAgent) sousIn(t *testing.T, dir string, extra []string, args ...string) (outcome, bool) {
	t.Helper()
	return retryWhileReleased(args, func() (outcome, bool) {
		cmd := exec.Command(sousBinary(t), append(args, a.target...)...)
		cmd.Dir, cmd.Env = dir, append(append([]string(nil), a.env...), extra...)
		return runKillable(t, cmd)
	})
}

// sessionRecipe makes two turns of one session, with a command after
// each that appends the turn's text to a counter file.
const sessionRecipe = `d = args["dir"]
cli = json.decode(args["cli"])
s = sdk.session(cli = cli, cwd = d)
t1 = s.send("first")
sh("echo '%s' >> %s/count/t1" % (t1.text, d))
t2 = s.send("second")
sh("echo '%s' >> %s/count/t2" % (t2.text, d))
s.close()
print("finished")
`

// agentDir makes a directory for sessionRecipe.
func (a *durableAgent) agentDir(t *testing.T, name string) string {
	t.Helper()
	dir := filepath.Join(a.dir, name)
	if err := os.MkdirAll(filepath.Join(dir, "count"), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "main.star"), []byte(sessionRecipe), 0o644); err != nil {
		t.Fatal(err)
	}
	return dir
}

func (a *durableAgent) runArgs(dir string) []string {
	return []string{"run", "--journal", "j", "main.star", "-a", "dir=" + dir, "-a", "cli=" + a.cliArg()}
}

// checkTurns: each turn's command ran once with the model's reply.
func checkTurns(t *testing.T, dir string) {
	t.Helper()
	for name, want := range map[string]string{"t1": "reply to first\n", "t2": "reply to second\n"} {
		if data, _ := os.ReadFile(filepath.Join(dir, "count", name)); string(data) != want {
			t.Errorf("count/%s is %q, want %q", name, data, want)
		}
	}
}

// TestDurableSessionResumes kills the runner of a two-turn session on a
// socket daemon between the turns, before the first, as the second
// turn's prompt is on its way, and while the model answers it; each resume exits 0 and the
// scripted model saw each prompt once. Between turns the session's CLI
// is replaced by one that resumes it by its id: the second request
// carries the first turn.
func TestDurableSessionResumes(t *testing.T) {
	a := newDurableAgent(t)
	t.Run("between turns", func(t *testing.T) {
		dir := a.agentDir(t, "between")
		// 1 run, 2-3 sdk.session, 4-5 send, 6-7 sh: killed once the sh
		// answered.
		o, killed := a.sousIn(t, dir, []string{"SOUS_FAULT_JOURNAL=7"}, a.runArgs(dir)...)
		if !killed {
			t.Fatalf("not killed: %d\n%s", o.code, o.stderr)
		}
		id := runIDOf(t, o)
		o, _ = a.sousIn(t, dir, nil, "resume", "--journal", "j", id)
		o.expect(t, 0, "sous: resuming run "+id)
		checkTurns(t, dir)
		if a.count("first") != 1 || a.count("second") != 1 {
			t.Errorf("the model saw first %d times, second %d times", a.count("first"), a.count("second"))
		}
		var second *fakemodel.Request
		for _, r := range a.api.Scripted() {
			if r.Prompt() == "second" {
				second = r
			}
		}
		if second == nil || !strings.Contains(string(second.Body), "reply to first") {
			t.Errorf("the second turn's request lacks the first turn: the session was not resumed by its id")
		}
		if n := strings.Count(o.stdout+o.stderr, "finished"); n != 1 {
			t.Errorf("finished shown %d times", n)
		}
	})
	a.reset()
	t.Run("killed as the resume resumes the session", func(t *testing.T) {
		// The first resume dies once its Session.resume step is recorded;
		// the second replays that step's record (it runs again).
		dir := a.agentDir(t, "twice")
		o, killed := a.sousIn(t, dir, []string{"SOUS_FAULT_JOURNAL=7"}, a.runArgs(dir)...)
		if !killed {
			t.Fatalf("not killed: %d\n%s", o.code, o.stderr)
		}
		id := runIDOf(t, o)
		o, killed = a.sousIn(t, dir, []string{"SOUS_FAULT_JOURNAL=1"}, "resume", "--journal", "j", id)
		if !killed {
			t.Fatalf("resume not killed: %d\n%s", o.code, o.stderr)
		}
		o, _ = a.sousIn(t, dir, nil, "resume", "--journal", "j", id)
		o.expect(t, 0, "sous: Session.resume at line 6 was under way when run "+id+"'s runner died: it runs again")
		checkTurns(t, dir)
		if a.count("first") != 1 || a.count("second") != 1 {
			t.Errorf("the model saw first %d times, second %d times", a.count("first"), a.count("second"))
		}
	})
	a.reset()
	t.Run("before the first turn", func(t *testing.T) {
		// A session with no turn has no conversation to --resume: the
		// new CLI starts it afresh under its id.
		dir := a.agentDir(t, "fresh")
		o, killed := a.sousIn(t, dir, []string{"SOUS_FAULT_JOURNAL=3"}, a.runArgs(dir)...)
		if !killed {
			t.Fatalf("not killed: %d\n%s", o.code, o.stderr)
		}
		id := runIDOf(t, o)
		o, _ = a.sousIn(t, dir, nil, "resume", "--journal", "j", id)
		o.expect(t, 0, "sous: resuming run "+id)
		checkTurns(t, dir)
		if a.count("first") != 1 || a.count("second") != 1 {
			t.Errorf("the model saw first %d times, second %d times", a.count("first"), a.count("second"))
		}
	})
	a.reset()
	t.Run("before the prompt reached the CLI", func(t *testing.T) {
		dir := a.agentDir(t, "before")
		// Killed once the second send is recorded, before it writes.
		o, killed := a.sousIn(t, dir, []string{"SOUS_FAULT_JOURNAL=8"}, a.runArgs(dir)...)
		if !killed {
			t.Fatalf("not killed: %d\n%s", o.code, o.stderr)
		}
		id := runIDOf(t, o)
		o, _ = a.sousIn(t, dir, nil, "resume", "--journal", "j", id)
		o.expect(t, 0, "no CLI of session ")
		checkTurns(t, dir)
		if a.count("first") != 1 || a.count("second") != 1 {
			t.Errorf("the model saw first %d times, second %d times", a.count("first"), a.count("second"))
		}
	})
	a.reset()
	t.Run("on the embedded daemon", func(t *testing.T) {
		// The CLI died with the runner: between the turns a new one
		// resumes the session by its id; a turn the runner died in
		// after its prompt was recorded is sent again, with a notice.
		socket := a.target
		a.embedded()
		defer func() { a.target = socket }()
		dir := a.agentDir(t, "embedded")
		o, killed := a.sousIn(t, dir, []string{"SOUS_FAULT_JOURNAL=8"}, a.runArgs(dir)...)
		if !killed {
			t.Fatalf("not killed: %d\n%s", o.code, o.stderr)
		}
		id := runIDOf(t, o)
		o, _ = a.sousIn(t, dir, nil, "resume", "--journal", "j", id)
		o.expect(t, 0, "sous: Session.send at line 6 was under way when run "+id+"'s runner died: it runs again")
		checkTurns(t, dir)
		if a.count("first") != 1 || a.count("second") != 1 {
			t.Errorf("the model saw first %d times, second %d times", a.count("first"), a.count("second"))
		}
	})
	// During the first turn too: the resume's second send then resumes
	// the session in a new CLI, which must take it over by its id
	// (--resume), the session having a turn now, not start it afresh
	// under that id, which the CLI refuses as in use.
	for _, prompt := range []string{"second", "first"} {
		a.reset()
		duringTurn(t, a, prompt)
	}
}

// duringTurn kills the runner of sessionRecipe while the model answers
// prompt, lets the CLI on the daemon finish the turn, and resumes.
func duringTurn(t *testing.T, a *durableAgent, prompt string) {
	duringTurnOf(t, a, prompt, a.agentDir, "CLI finished the turn the runner died in")
}

// duringTurnOf is duringTurn for the recipe dirFor writes; the resume's
// stderr has notice.
func duringTurnOf(t *testing.T, a *durableAgent, prompt string, dirFor func(*testing.T, string) string, notice string) {
	t.Run("during the turn "+prompt, func(t *testing.T) {
		dir := dirFor(t, "during-"+prompt)
		arrived, release := a.holdPrompt(prompt)
		cmd := exec.Command(sousBinary(t), append(a.runArgs(dir), a.target...)...)
		cmd.Dir, cmd.Env = dir, a.env
		var stderr testutil.SyncBuffer
		cmd.Stderr = &stderr
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		select {
		case <-arrived:
		case <-time.After(60 * time.Second):
			cmd.Process.Kill()
			t.Fatalf("the prompt %q never reached the model:\n%s", prompt, stderr.String())
		}
		cmd.Process.Kill()
		cmd.Wait()
		close(release) // the CLI on the daemon finishes the turn
		id := runIDOf(t, outcome{stderr: stderr.String()})
		o, _ := a.sousIn(t, dir, nil, "resume", "--journal", "j", id)
		o.expect(t, 0, notice)
		checkTurns(t, dir)
		if a.count("first") != 1 || a.count("second") != 1 {
			t.Errorf("the model saw first %d times, second %d times", a.count("first"), a.count("second"))
		}
	})
}

// faultRecipe is the fault test: spawns, stdin writes with
// offsets, lines(), a worktree, an extract_tar and two agent turns (one
// sent, one started and waited for with wait_all), on a socket daemon.
// Every command appends to a counter file of its own.
const faultRecipe = `d = args["dir"]
cli = json.decode(args["cli"])
def step(name):
    sh("echo %s >> %s/count/%s" % (name, d, name))
step("a")
wt = git.worktree_create("durable/wt", d + "/wt", repo = d + "/repo")
n = extract_tar(d + "/a.tar", d + "/out", keep_archive = True)
p = spawn("sh", ["-c", "echo p >> %s/count/p; while read l; do echo got:$l; done" % d])
p.write("one\n", offset = 0)
p.write("two\n", offset = 4)
p.close_stdin()
got = [l for l in p.lines()]
p.wait()
s = sdk.session(cli = cli, cwd = d)
t1 = s.send("first")
step("b")
q = spawn("sh", ["-c", "echo q >> %s/count/q; echo x; echo y" % d], echo = False)
for l in q.lines():
    sh("echo %s >> %s/count/line-%s" % (l, d, l))
t2 = wait_all([s.start("second")])[0]
s.close()
sh("echo '%s|%s|%s|%d|%s' > %s/final" % (",".join(got), t1.text, t2.text, n, wt.branch, d))
print("finished")
`

// faultState is what faultRecipe leaves that a killed and resumed run
// must leave the same.
func faultState(t *testing.T, dir string) string {
	t.Helper()
	var b strings.Builder
	for _, name := range []string{"a", "b", "p", "q", "line-x", "line-y"} {
		data, err := os.ReadFile(filepath.Join(dir, "count", name))
		fmt.Fprintf(&b, "count/%s: %q %v\n", name, data, err)
	}
	for _, name := range []string{"out/x.txt", "out/y.txt", "a.tar.exists", "final"} {
		if name == "a.tar.exists" {
			_, err := os.Stat(filepath.Join(dir, "a.tar"))
			fmt.Fprintf(&b, "a.tar kept: %v\n", err == nil)
			continue
		}
		data, err := os.ReadFile(filepath.Join(dir, name))
		fmt.Fprintf(&b, "%s: %q %v\n", name, data, err)
	}
	cmd := exec.Command("git", "branch", "--show-current")
	cmd.Dir, cmd.Env = filepath.Join(dir, "wt"), gitTestEnv()
	branch, err := cmd.Output()
	fmt.Fprintf(&b, "worktree on: %q %v\n", branch, err)
	return b.String()
}

// TestDurableFaultsAcrossEverything kills the runner of faultRecipe at 20
// seeded points of its journal (SOUS_FAULT_SEED=N replays one set of
// points: go test -run TestDurableFaultsAcrossEverything ./cmd/sous with
// it set), sometimes the first resume too, and resumes until the run
// ends: every command and process ran once, the scripted model saw each
// prompt once, the files are an uninterrupted run's, the last resume
// exits 0 and "finished" was printed once.
func TestDurableFaultsAcrossEverything(t *testing.T) {
	a := newDurableAgent(t)
	base := durableDir(t, faultRecipe)
	o, _ := a.sousIn(t, base, nil, a.runArgs(base)...)
	o.expect(t, 0)
	want := faultState(t, base)
	if !strings.Contains(want, `final: "got:one,got:two|reply to first|reply to second|2|durable/wt\n"`) {
		t.Fatalf("the run never killed:\n%s\n%s", want, o.stderr)
	}
	total := len(journalRecords(t, filepath.Join(base, "j"), runIDOf(t, o)))
	seed := faultproxy.Seed(t)
	rng := rand.New(rand.NewPCG(seed, seed^0xfa17))
	for i := range 20 {
		point := 2 + rng.IntN(total-2)
		resumeFault := 0
		if rng.IntN(3) == 0 {
			resumeFault = 1 + rng.IntN(6)
		}
		// Every other kill with the journal the daemon keeps (no
		// --journal): where the journal lives changes nothing.
		inDaemon := i%2 == 1
		t.Run(fmt.Sprintf("kill%d_at%d_then%d_daemon%t", i, point, resumeFault, inDaemon), func(t *testing.T) {
			a.reset()
			dir := durableDir(t, faultRecipe)
			args, resume := a.runArgs(dir), []string{"resume", "--journal", "j"}
			if inDaemon {
				args, resume = slices.DeleteFunc(args, func(s string) bool { return s == "--journal" || s == "j" }), []string{"resume"}
			}
			o, killed := a.sousIn(t, dir, []string{fmt.Sprintf("SOUS_FAULT_JOURNAL=%d", point)}, args...)
			if !killed {
				t.Fatalf("not killed at %d: %d\n%s", point, o.code, o.stderr)
			}
			id := runIDOf(t, o)
			shown := o.stdout + o.stderr
			for round := 0; ; round++ {
				var extra []string
				if round == 0 && resumeFault > 0 {
					extra = []string{fmt.Sprintf("SOUS_FAULT_JOURNAL=%d", resumeFault)}
				}
				o, killed = a.sousIn(t, dir, extra, append(resume, id)...)
				shown += o.stdout + o.stderr
				if killed {
					continue
				}
				if o.code == 2 && strings.Contains(o.stderr, "finished (ok") {
					break // the resume before was killed right after the end
				}
				o.expect(t, 0, "sous: resuming run "+id)
				break
			}
			if got := faultState(t, dir); got != want {
				t.Errorf("after the resumes:\n%s\nwant (a run never killed):\n%s\nshown:\n%s", got, want, shown)
			}
			if a.count("first") != 1 || a.count("second") != 1 {
				t.Errorf("the model saw first %d times, second %d times\n%s", a.count("first"), a.count("second"), shown)
			}
			if n := strings.Count(shown, "finished\n"); n != 1 {
				t.Errorf("finished shown %d times:\n%s", n, shown)
			}
		})
	}
}

// TestDurableKilledAtAnyMomentAcrossEverything is the fault test with the
// runner SIGKILLed from outside at a random moment of the run instead of
// right after a record (the fault hook sends every record apart from its
// effect and waits for it): with the journal the daemon keeps, each
// effect's records go just ahead of its request, as in any run, so the
// kill may find a command, a worktree, an archive or a turn sent with its
// record and not answered yet. Every other run's first resume is killed
// as well. SOUS_FAULT_SEED replays one seed.
func TestDurableKilledAtAnyMomentAcrossEverything(t *testing.T) {
	a := newDurableAgent(t)
	daemonKept := func(dir string) []string {
		return slices.DeleteFunc(a.runArgs(dir), func(s string) bool { return s == "--journal" || s == "j" })
	}
	// The run uninterrupted, timed from its id's line (what the kills'
	// delays count from) to its end.
	base := durableDir(t, faultRecipe)
	cmd := exec.Command(sousBinary(t), append(daemonKept(base), a.target...)...)
	cmd.Dir, cmd.Env = base, a.env
	var stderr testutil.SyncBuffer
	cmd.Stderr = &stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	for deadline := time.Now().Add(30 * time.Second); runIDLine.FindString(stderr.String()) == ""; time.Sleep(time.Millisecond) {
		if time.Now().After(deadline) {
			cmd.Process.Kill()
			t.Fatalf("no run id in 30 s:\n%s", stderr.String())
		}
	}
	began := time.Now()
	if err := cmd.Wait(); err != nil {
		t.Fatalf("the run: %v\n%s", err, stderr.String())
	}
	took := time.Since(began)
	want := faultState(t, base)
	seed := faultproxy.Seed(t)
	rng := rand.New(rand.NewPCG(seed, seed^0x5c1e))
	for i := range 8 {
		delay := time.Duration(rng.Int64N(int64(took)))
		// Every other run's first resume is killed too, at a moment of
		// its own (counted from its start, which replays first).
		var resumeDelay time.Duration
		if i%2 == 1 {
			resumeDelay = time.Duration(rng.Int64N(int64(took)))
		}
		t.Run(fmt.Sprintf("kill%d_after%v_then%v", i, delay.Round(time.Millisecond), resumeDelay.Round(time.Millisecond)), func(t *testing.T) {
			a.reset()
			dir := durableDir(t, faultRecipe)
			id := runKilledAfterStart(t, dir, append(daemonKept(dir), a.target...), a.env, delay)
			var shown strings.Builder
			if resumeDelay > 0 {
				resume := exec.Command(sousBinary(t), append([]string{"resume", id}, a.target...)...)
				resume.Dir, resume.Env = dir, a.env
				kill := time.AfterFunc(resumeDelay, func() { resume.Process.Kill() })
				out, _ := resume.CombinedOutput()
				kill.Stop()
				shown.Write(out)
			}
			for round := 0; ; round++ {
				o, killed := a.sousIn(t, dir, nil, "resume", id)
				shown.WriteString(o.stdout + o.stderr)
				if killed || round > 3 {
					t.Fatalf("resume %d: killed %v, exit %d\n%s", round, killed, o.code, o.stderr)
				}
				if o.code == 2 && strings.Contains(o.stderr, "finished (ok") {
					t.Logf("the run ended before the last kill")
					break
				}
				o.expect(t, 0, "sous: resuming run "+id)
				break
			}
			if got := faultState(t, dir); got != want {
				t.Errorf("after the resume:\n%s\nwant (a run never killed):\n%s\nshown:\n%s", got, want, shown.String())
			}
			if a.count("first") != 1 || a.count("second") != 1 {
				t.Errorf("the model saw first %d times, second %d times\n%s", a.count("first"), a.count("second"), shown.String())
			}
		})
	}
}

// TestDurableSessionPolicyCallsNotMadeAgain: a policy that runs a command
// while a send waits is journaled inside that send; a resume that answers
// the send from the journal neither asks the policy again nor matches its
// command against the recipe's own calls.
func TestDurableSessionPolicyCallsNotMadeAgain(t *testing.T) {
	a := newDurableAgent(t)
	a.mu.Lock()
	a.tool = "first"
	a.mu.Unlock()
	dir := a.agentDir(t, "policy")
	recipe := strings.Replace(sessionRecipe, "s = sdk.session(cli = cli, cwd = d)", `def policy(req):
    sh("echo %s >> %s/count/policy" % (req.tool, d))
    print("policy asked")
    return approve()
s = sdk.session(cli = cli, cwd = d, policy = policy)`, 1)
	if err := os.WriteFile(filepath.Join(dir, "main.star"), []byte(recipe), 0o644); err != nil {
		t.Fatal(err)
	}
	// 1 run, 2-3 sdk.session, 4 send, 5-6 the policy's sh, 7 its print,
	// 8 the send's answer, 9-10 the recipe's sh: killed there.
	o, killed := a.sousIn(t, dir, []string{"SOUS_FAULT_JOURNAL=10"}, a.runArgs(dir)...)
	if !killed {
		t.Fatalf("not killed: %d\n%s", o.code, o.stderr)
	}
	id := runIDOf(t, o)
	shown := o.stdout + o.stderr
	o, _ = a.sousIn(t, dir, nil, "resume", "--journal", "j", id)
	o.expect(t, 0, "sous: resuming run "+id)
	shown += o.stdout + o.stderr
	checkTurns(t, dir)
	if data, _ := os.ReadFile(filepath.Join(dir, "count", "policy")); string(data) != "Write\n" {
		t.Errorf("count/policy is %q: the policy was asked again", data)
	}
	if n := strings.Count(shown, "policy asked\n"); n != 1 {
		t.Errorf("the policy's print shown %d times:\n%s", n, shown)
	}
	if n := strings.Count(shown, "finished\n"); n != 1 {
		t.Errorf("finished shown %d times:\n%s", n, shown)
	}
	if a.count("first") != 2 || a.count("second") != 1 {
		t.Errorf("the model saw first %d times (a tool use and its result), second %d times", a.count("first"), a.count("second"))
	}
}

// sdkSendRecipe is sessionRecipe with sdk.send: a whole session per turn.
const sdkSendRecipe = `d = args["dir"]
cli = json.decode(args["cli"])
t1 = sdk.send("first", cli = cli, cwd = d)
sh("echo '%s' >> %s/count/t1" % (t1.text, d))
t2 = sdk.send("second", cli = cli, cwd = d)
sh("echo '%s' >> %s/count/t2" % (t2.text, d))
print("finished")
`

// TestDurableSdkSendResumes: sdk.send is kept as its Turn. Killed after
// the first turn, a resume answers it from the journal (the model sees
// each prompt once); killed in the second on the embedded daemon, whose
// CLI died with the runner, the resume sends it again with a notice; on
// a daemon that outlives the runner, whose CLI may still be answering,
// the resume stops (exit 2) rather than send it twice.
func TestDurableSdkSendResumes(t *testing.T) {
	a := newDurableAgent(t)
	socket := a.target
	dirFor := func(t *testing.T, name string) string {
		dir := a.agentDir(t, name)
		if err := os.WriteFile(filepath.Join(dir, "main.star"), []byte(sdkSendRecipe), 0o644); err != nil {
			t.Fatal(err)
		}
		return dir
	}
	// Records: 1 run, 2-3 sdk.send, 4-5 sh, 6-7 sdk.send, 8-9 sh.
	for _, tc := range []struct {
		name     string
		embedded bool
		killAt   string
	}{
		{"after the first turn, socket", false, "5"},
		{"after the first turn, embedded", true, "5"},
		{"in the second turn, embedded", true, "6"},
	} {
		a.reset()
		t.Run(tc.name, func(t *testing.T) {
			a.target = socket
			if tc.embedded {
				a.embedded()
			}
			dir := dirFor(t, strings.ReplaceAll(tc.name, " ", "-"))
			o, killed := a.sousIn(t, dir, []string{"SOUS_FAULT_JOURNAL=" + tc.killAt}, a.runArgs(dir)...)
			if !killed {
				t.Fatalf("not killed: %d\n%s", o.code, o.stderr)
			}
			id := runIDOf(t, o)
			o, _ = a.sousIn(t, dir, nil, "resume", "--journal", "j", id)
			o.expect(t, 0, "sous: resuming run "+id)
			if tc.killAt == "6" && !strings.Contains(o.stderr, "sdk.send at line 5 was under way when run "+id+"'s runner died: it runs again") {
				t.Errorf("no notice of the send done again:\n%s", o.stderr)
			}
			checkTurns(t, dir)
			if a.count("first") != 1 || a.count("second") != 1 {
				t.Errorf("the model saw first %d times, second %d times", a.count("first"), a.count("second"))
			}
		})
	}
	a.reset()
	t.Run("in the second turn, socket", func(t *testing.T) {
		a.target = socket
		dir := dirFor(t, "in-second-socket")
		o, killed := a.sousIn(t, dir, []string{"SOUS_FAULT_JOURNAL=6"}, a.runArgs(dir)...)
		if !killed {
			t.Fatalf("not killed: %d\n%s", o.code, o.stderr)
		}
		id := runIDOf(t, o)
		o, _ = a.sousIn(t, dir, nil, "resume", "--journal", "j", id)
		o.expect(t, 2, "run "+id+" died in sdk.send at line 5")
		if data, _ := os.ReadFile(filepath.Join(dir, "count", "t2")); len(data) != 0 {
			t.Errorf("the second turn's command ran: %q", data)
		}
	})
}
