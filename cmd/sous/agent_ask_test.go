package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/seed5ad92d46/sous/daemon/client"
	"github.com/seed5ad92d46/sous/daemon/wire"
	"github.com/seed5ad92d46/sous/internal/claudecli"
	"github.com/seed5ad92d46/sous/internal/faultproxy"
	"github.com/seed5ad92d46/sous/internal/testutil"
	"github.com/seed5ad92d46/sous/runtime/agent/fakemodel"
)

// Remote approvals: a request no policy or flag decided waits for a
// person, published under an id to the default daemon's queue, where
// another process answers it; the first answer wins.

// askRecipe starts one session per prompt "ask I" (I from 0 to n-1), all
// at once, and prints each turn's denials and text. The sessions get the
// world's environment through env=, as a socket daemon's processes have
// their own.
const askRecipe = `
cli = json.decode(args["cli"])
env = json.decode(args["env"])
n = int(args["n"])
sessions = [sdk.session(cwd = args["dir"], cli = cli, env = env) for i in range(n)]
turns = wait_all([s.start("ask %d" % i) for i, s in enumerate(sessions)])
for i, t in enumerate(turns):
    print("turn %d: denials %d: %s" % (i, len(t.denials), t.text))
`

// newAskWorld is a world whose model, for the prompt "ask I", runs Bash
// `touch got-I` (tool use toolu_I; a command the CLI does not allow on its
// own, as it does echo) and then says "done I".
func newAskWorld(t *testing.T) *agentWorld {
	return newAgentWorld(t, claudecli.Latest, fakemodel.Options{Func: func(req *fakemodel.Request, n int) fakemodel.Reply {
		k := strings.TrimPrefix(firstPrompt(req), "ask ")
		if toolTurn(req) == 0 {
			return fakemodel.Reply{Blocks: []fakemodel.Block{{Type: "tool_use", ID: "toolu_" + k, Name: "Bash",
				Input: map[string]any{"command": "touch got-" + k}}}}
		}
		return fakemodel.Text("done " + k)
	}})
}

// envArg is the world's environment for -a env=: a JSON object.
func (w *agentWorld) envArg() string {
	m := map[string]string{}
	for _, kv := range w.env {
		k, v, _ := strings.Cut(kv, "=")
		m[k] = v
	}
	b, _ := json.Marshal(m)
	return string(b)
}

// bgRun is `sous run` as a process of its own, running while the test
// answers its requests.
type bgRun struct {
	cmd            *exec.Cmd
	stdout, stderr *testutil.SyncBuffer
	done           chan struct{}
	err            error
}

// startRecipe writes src as main.star and starts the sous binary on it
// with -a dir, cli and env and flags; stdin is no terminal.
func (w *agentWorld) startRecipe(src string, flags ...string) *bgRun {
	w.t.Helper()
	p := filepath.Join(w.dir, "main.star")
	if err := os.WriteFile(p, []byte(src), 0o644); err != nil {
		w.t.Fatal(err)
	}
	args := append([]string{"run", p, "-a", "dir=" + w.dir, "-a", "cli=" + w.cliArg(), "-a", "env=" + w.envArg()}, flags...)
	r := &bgRun{cmd: exec.Command(sousBinary(w.t), args...), stdout: &testutil.SyncBuffer{}, stderr: &testutil.SyncBuffer{}, done: make(chan struct{})}
	r.cmd.Env, r.cmd.Stdout, r.cmd.Stderr = w.env, r.stdout, r.stderr
	if err := r.cmd.Start(); err != nil {
		w.t.Fatal(err)
	}
	go func() { r.err = r.cmd.Wait(); close(r.done) }()
	w.t.Cleanup(func() {
		select {
		case <-r.done:
		default:
			r.cmd.Process.Kill()
			<-r.done
		}
	})
	return r
}

// wait waits for the run to end and returns how it ended.
func (r *bgRun) wait(t *testing.T) outcome {
	t.Helper()
	select {
	case <-r.done:
	case <-time.After(120 * time.Second):
		r.cmd.Process.Kill()
		<-r.done
		t.Fatalf("sous run did not end\nstdout:\n%s\nstderr:\n%s", r.stdout, r.stderr)
	}
	code := 0
	var ee *exec.ExitError
	if errors.As(r.err, &ee) {
		code = ee.ExitCode()
	} else if r.err != nil {
		t.Fatal(r.err)
	}
	return outcome{code: code, stdout: r.stdout.String(), stderr: r.stderr.String()}
}

// waitPending polls the daemon's queue until at least n requests wait,
// and returns them (oldest first). It fails if the run ends first.
func waitPending(t *testing.T, c *client.Client, n int, r *bgRun) []wire.Ask {
	t.Helper()
	deadline := time.Now().Add(90 * time.Second)
	for {
		asks, err := c.PendingAsks(context.Background())
		if err != nil {
			t.Fatal(err)
		}
		if len(asks) >= n {
			return asks
		}
		if r != nil {
			select {
			case <-r.done:
				t.Fatalf("the run ended with %d pending, want %d\nstdout:\n%s\nstderr:\n%s", len(asks), n, r.stdout, r.stderr)
			default:
			}
		}
		if time.Now().After(deadline) {
			t.Fatalf("%d requests pending, want %d", len(asks), n)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// eventsOf returns the --json events named name.
func eventsOf(t *testing.T, o outcome, name string) []map[string]any {
	var out []map[string]any
	for _, e := range o.events(t) {
		if e["event"] == name {
			out = append(out, e)
		}
	}
	return out
}

// printed says whether the recipe printed text: a line on stderr, or a
// log event with --json.
func printed(t *testing.T, o outcome, text string) bool {
	if strings.Contains(o.stderr, text) {
		return true
	}
	for _, e := range eventsOf(t, o, "log") {
		if e["text"] == text {
			return true
		}
	}
	return false
}

func answerCode(err error) int {
	var we *wire.Error
	if errors.As(err, &we) {
		return we.Code
	}
	return 0
}

// TestAskRemoteDenyOnStandaloneDaemon: `sous run --socket S --ask` on a
// `sous daemon serve` publishes the session's Bash request to the daemon;
// a second process, `sous approvals deny ID`, denies it. The turn's
// denials hold it, the model reads the message, the --json events carry
// the id and say by "remote", a second answer is refused as decided, and
// nothing stays pending.
func TestAskRemoteDenyOnStandaloneDaemon(t *testing.T) {
	t.Parallel()
	w := newAskWorld(t)
	sock := filepath.Join(testutil.ShortTempDir(t), "d.sock")
	serveDaemonProc(t, "tok", 1, "--socket", sock)
	c := dialDaemon(t, sock, "tok")
	r := w.startRecipe(askRecipe, "-a", "n=1", "--socket", sock, "--token-file", tokenFile(t, "tok"), "--ask", "--json")
	asks := waitPending(t, c, 1, r)
	a := asks[0]
	if a.Tool != "Bash" || a.Kind != "tool" || a.Summary != "touch got-0" || a.Run == "" || a.Session == "" ||
		filepath.Base(a.Recipe) != "main.star" || a.Input["command"] != "touch got-0" || len(a.ID) != 8 {
		t.Errorf("the published request: %+v", a)
	}
	// A second process answers through the daemon, as a person in
	// another shell would.
	tok := tokenFile(t, "tok")
	approvals := func(args ...string) outcome {
		t.Helper()
		cmd := exec.Command(sousBinary(t), append(args, "--socket", sock, "--token-file", tok)...)
		cmd.Env = []string{"PATH=/usr/bin:/bin"}
		var stdout, stderr strings.Builder
		cmd.Stdout, cmd.Stderr = &stdout, &stderr
		code := 0
		if err := cmd.Run(); err != nil {
			var ee *exec.ExitError
			if !errors.As(err, &ee) {
				t.Fatal(err)
			}
			code = ee.ExitCode()
		}
		return outcome{code: code, stdout: stdout.String(), stderr: stderr.String()}
	}
	if o := approvals("approvals"); o.code != 0 || !strings.Contains(o.stdout, a.ID) || !strings.Contains(o.stdout, "touch got-0") {
		t.Errorf("sous approvals lists: %+v", o)
	}
	if o := approvals("approvals", "deny", a.ID, "--message", "not from here"); o.code != 0 || o.stdout != a.ID+" denied\n" {
		t.Fatalf("sous approvals deny: %+v", o)
	}
	if o := approvals("approvals", "allow", a.ID); o.code != 1 || o.stderr != "sous: request "+a.ID+" was decided already: denied by remote\n" {
		t.Errorf("a second answer: %+v, want refused as decided by remote", o)
	}
	o := r.wait(t)
	o.expect(t, 0)
	if !printed(t, o, "turn 0: denials 1: done 0") {
		t.Errorf("the turn's denials do not hold the request:\n%s", o.stdout)
	}
	if tr, ok := w.toolResult("toolu_0"); !ok || !tr.IsError || !strings.Contains(tr.Content, "not from here") {
		t.Errorf("the model got %+v", tr)
	}
	pend := eventsOf(t, o, "pending")
	if len(pend) != 1 || pend[0]["id"] != a.ID || pend[0]["tool"] != "Bash" || pend[0]["summary"] != "touch got-0" {
		t.Errorf("pending events: %v", pend)
	}
	appr := eventsOf(t, o, "approval")
	if len(appr) != 1 || appr[0]["id"] != a.ID || appr[0]["by"] != "remote" || appr[0]["decision"] != "deny" || appr[0]["message"] != "not from here" {
		t.Errorf("approval events: %v", appr)
	}
	if left, err := c.PendingAsks(context.Background()); err != nil || len(left) != 0 {
		t.Errorf("pending after the run: %v %v", left, err)
	}
}

// TestAskNobodyToAskDeniesAtOnce: without a terminal, --ask or --ui, a
// request nobody decided is denied by "default" at once, and nothing is
// published, also on a daemon with the queue.
func TestAskNobodyToAskDeniesAtOnce(t *testing.T) {
	t.Parallel()
	w := newAskWorld(t)
	sock, _ := socketDaemon(t, "tok", daemonConfig(t))
	c := dialDaemon(t, sock, "tok")
	stop := make(chan struct{})
	published := make(chan []wire.Ask, 1)
	go func() { // nothing may ever be pending
		for {
			select {
			case <-stop:
				close(published)
				return
			default:
			}
			if asks, _ := c.PendingAsks(context.Background()); len(asks) > 0 {
				published <- asks
				return
			}
			time.Sleep(20 * time.Millisecond)
		}
	}()
	o := w.run(askRecipe, "-a", "n=1", "-a", "env="+w.envArg(), "--socket", sock, "--token-file", tokenFile(t, "tok"), "--json")
	close(stop)
	o.expect(t, 0)
	if asks := <-published; len(asks) > 0 {
		t.Errorf("published without anyone to answer: %+v", asks)
	}
	appr := eventsOf(t, o, "approval")
	if len(appr) != 1 || appr[0]["by"] != "default" || appr[0]["message"] != "no approver allowed this request" || appr[0]["id"] != nil {
		t.Errorf("approval events: %v", appr)
	}
	if p := eventsOf(t, o, "pending"); len(p) != 0 {
		t.Errorf("pending events: %v", p)
	}
}

// TestAskTimeoutDeniesByDefault: --ask-timeout 300ms denies by "default"
// what nobody answered, about that long after it started waiting (the
// embedded daemon's queue).
func TestAskTimeoutDeniesByDefault(t *testing.T) {
	t.Parallel()
	w := newAskWorld(t)
	o := w.run(askRecipe, "-a", "n=1", "-a", "env="+w.envArg(), "--ask", "--ask-timeout", "300ms", "--json")
	o.expect(t, 0)
	if !printed(t, o, "turn 0: denials 1: done 0") {
		t.Errorf("the turn's denials do not hold the request:\n%s", o.stdout)
	}
	pend, appr := eventsOf(t, o, "pending"), eventsOf(t, o, "approval")
	if len(pend) != 1 || len(appr) != 1 {
		t.Fatalf("pending %v, approval %v", pend, appr)
	}
	if appr[0]["by"] != "default" || appr[0]["id"] != pend[0]["id"] ||
		appr[0]["message"] != "no answer within 300ms (--ask-timeout): no approver allowed this request" {
		t.Errorf("approval: %v", appr[0])
	}
	at := func(e map[string]any) time.Time {
		tm, err := time.Parse(time.RFC3339Nano, e["time"].(string))
		if err != nil {
			t.Fatal(err)
		}
		return tm
	}
	if d := at(appr[0]).Sub(at(pend[0])); d < 280*time.Millisecond || d > 5*time.Second {
		t.Errorf("denied %s after it started waiting, want about 300ms", d)
	}
}

// TestAskManyPendingAtOnce: ten sessions ask at once; all ten wait on the
// daemon at the same moment (none holds the recipe thread), and answered
// in the reverse order, each session gets its own answer: the even ones
// allowed (their command runs), the odd ones denied with their own
// message.
func TestAskManyPendingAtOnce(t *testing.T) {
	t.Parallel()
	const n = 10
	w := newAskWorld(t)
	sock, _ := socketDaemon(t, "tok", daemonConfig(t))
	c := dialDaemon(t, sock, "tok")
	r := w.startRecipe(askRecipe, "-a", fmt.Sprint("n=", n), "--socket", sock, "--token-file", tokenFile(t, "tok"), "--ask", "--json")
	asks := waitPending(t, c, n, r)
	if len(asks) != n {
		t.Fatalf("%d pending, want %d", len(asks), n)
	}
	for i := len(asks) - 1; i >= 0; i-- {
		a := asks[i]
		k := strings.TrimPrefix(a.Summary, "touch got-")
		ans := wire.AskAnswer{ID: a.ID, Decision: "deny", Message: "no for " + k}
		if k[0]%2 == 0 {
			ans = wire.AskAnswer{ID: a.ID, Decision: "allow"}
		}
		if err := c.AnswerAsk(context.Background(), ans); err != nil {
			t.Fatal(err)
		}
	}
	o := r.wait(t)
	o.expect(t, 0)
	for k := range n {
		tr, ok := w.toolResult(fmt.Sprint("toolu_", k))
		switch {
		case !ok:
			t.Errorf("session %d: no tool result", k)
		case k%2 == 0 && tr.IsError:
			t.Errorf("session %d: allowed, but the model got %+v", k, tr)
		case k%2 == 1 && (!tr.IsError || !strings.Contains(tr.Content, fmt.Sprint("no for ", k))):
			t.Errorf("session %d: denied, but the model got %+v", k, tr)
		}
		_, err := os.Stat(filepath.Join(w.dir, fmt.Sprint("got-", k)))
		if ran := err == nil; ran != (k%2 == 0) {
			t.Errorf("session %d: the command ran: %v", k, ran)
		}
		want := fmt.Sprintf("turn %d: denials %d: done %d", k, k%2, k)
		if !printed(t, o, want) {
			t.Errorf("the recipe did not print %q", want)
		}
	}
	var ids []string
	for _, e := range eventsOf(t, o, "approval") {
		if e["by"] != "remote" {
			t.Errorf("approval not by remote: %v", e)
		}
		ids = append(ids, e["id"].(string))
	}
	var want []string
	for _, a := range asks {
		want = append(want, a.ID)
	}
	sort.Strings(ids)
	sort.Strings(want)
	if strings.Join(ids, " ") != strings.Join(want, " ") {
		t.Errorf("approval ids %v, want %v", ids, want)
	}
	if left, _ := c.PendingAsks(context.Background()); len(left) != 0 {
		t.Errorf("pending after the run: %v", left)
	}
}

// TestAskInterruptWithdraws: SIGINT while three requests wait ends the
// run with 130, and none of them stays pending on the daemon.
func TestAskInterruptWithdraws(t *testing.T) {
	t.Parallel()
	w := newAskWorld(t)
	sock, _ := socketDaemon(t, "tok", daemonConfig(t))
	c := dialDaemon(t, sock, "tok")
	r := w.startRecipe(askRecipe, "-a", "n=3", "--socket", sock, "--token-file", tokenFile(t, "tok"), "--ask")
	waitPending(t, c, 3, r)
	r.cmd.Process.Signal(syscall.SIGINT)
	o := r.wait(t)
	o.expect(t, 130, "sous: interrupted")
	if left, err := c.PendingAsks(context.Background()); err != nil || len(left) != 0 {
		t.Errorf("pending after the interrupted run: %+v %v", left, err)
	}
}

// TestAskPromptRacesRemoteAnswer: on a terminal the prompt asks; a remote
// deny arrives first; the prompt says it was decided elsewhere and the run
// goes on to its end.
func TestAskPromptRacesRemoteAnswer(t *testing.T) {
	t.Parallel()
	w := newAskWorld(t)
	sock, _ := socketDaemon(t, "tok", daemonConfig(t))
	c := dialDaemon(t, sock, "tok")
	p := filepath.Join(w.dir, "main.star")
	if err := os.WriteFile(p, []byte(askRecipe), 0o644); err != nil {
		t.Fatal(err)
	}
	run := startPTY(t, 200, 50, w.env, "run", p, "-a", "dir="+w.dir, "-a", "cli="+w.cliArg(), "-a", "env="+w.envArg(), "-a", "n=1",
		"--socket", sock, "--token-file", tokenFile(t, "tok"))
	run.waitScreen("the prompt", func(s string) bool { return strings.Contains(s, "allow? [y]es, [n]o") })
	asks := waitPending(t, c, 1, nil)
	if err := c.AnswerAsk(context.Background(), wire.AskAnswer{ID: asks[0].ID, Decision: "deny", Message: "decided remotely"}); err != nil {
		t.Fatal(err)
	}
	screen := run.waitScreen("the end of the run", func(s string) bool { return strings.Contains(s, "turn 0: denials 1: done 0") })
	if code := run.wait(); code != 0 {
		t.Fatalf("exit %d; the screen:\n%s", code, screen)
	}
	raw := normalize(run.rawOutput())
	for _, want := range []string{"decided elsewhere: denied by remote", "approval: deny Bash touch got-0 (by remote: decided remotely)"} {
		if !strings.Contains(raw, want) {
			t.Errorf("the terminal lacks %q:\n%s", want, raw)
		}
	}
	if tr, ok := w.toolResult("toolu_0"); !ok || !strings.Contains(tr.Content, "decided remotely") {
		t.Errorf("the model got %+v", tr)
	}
}

// TestAskSurvivesReconnects: the run's connection to the daemon is cut
// again and again while its request waits; the calls in flight are resent
// (approval.wait keeps the request alive), and the remote answer given
// after several cuts still reaches the session.
func TestAskSurvivesReconnects(t *testing.T) {
	t.Parallel()
	w := newAskWorld(t)
	cfg := daemonConfig(t)
	cfg.StateDir = t.TempDir() // exact replay of the CLI's output across the cuts
	sock, _ := socketDaemon(t, "tok", cfg)
	proxy := faultproxy.Start(t, sock, faultproxy.Options{MinLife: 200 * time.Millisecond, MaxLife: 600 * time.Millisecond})
	// The cuts start once the request waits: what is tested is the wait
	// (spawns across cuts are daemon/client's spawn_once_test.go).
	proxy.Pause()
	c := dialDaemon(t, sock, "tok")
	r := w.startRecipe(askRecipe, "-a", "n=1", "--socket", proxy.Path(), "--token-file", tokenFile(t, "tok"), "--ask", "--json")
	asks := waitPending(t, c, 1, r)
	proxy.Resume()
	cuts := proxy.Cuts()
	deadline := time.Now().Add(30 * time.Second)
	for proxy.Cuts() < cuts+3 {
		if time.Now().After(deadline) {
			t.Fatalf("only %d cuts", proxy.Cuts()-cuts)
		}
		time.Sleep(50 * time.Millisecond)
	}
	if p, _ := c.PendingAsks(context.Background()); len(p) != 1 || p[0].ID != asks[0].ID {
		t.Fatalf("after the cuts, pending: %+v", p)
	}
	if err := c.AnswerAsk(context.Background(), wire.AskAnswer{ID: asks[0].ID, Decision: "deny", Message: "through the cuts"}); err != nil {
		t.Fatal(err)
	}
	o := r.wait(t)
	proxy.Pause()
	o.expect(t, 0)
	appr := eventsOf(t, o, "approval")
	if len(appr) != 1 || appr[0]["by"] != "remote" || appr[0]["message"] != "through the cuts" || appr[0]["id"] != asks[0].ID {
		t.Errorf("approval events: %v (seed %d)", appr, proxy.Seed())
	}
	if left, _ := c.PendingAsks(context.Background()); len(left) != 0 {
		t.Errorf("pending after the run: %v", left)
	}
}

// TestAskNotifies: a request that starts waiting for a person is a
// --notify "approval" message naming its id, and the run it names is the
// run the daemon lists the request under.
func TestAskNotifies(t *testing.T) {
	t.Parallel()
	w := newAskWorld(t)
	hook := newHookServer(t, false)
	sock, _ := socketDaemon(t, "tok", daemonConfig(t))
	c := dialDaemon(t, sock, "tok")
	r := w.startRecipe(askRecipe, "-a", "n=1", "--socket", sock, "--token-file", tokenFile(t, "tok"), "--ask", "--notify", hook.URL)
	a := waitPending(t, c, 1, r)[0]
	if err := c.AnswerAsk(context.Background(), wire.AskAnswer{ID: a.ID, Decision: "allow"}); err != nil {
		t.Fatal(err)
	}
	r.wait(t).expect(t, 0, "turn 0: denials 0: done 0", "approval: allow Bash touch got-0 (by remote)")
	var approvalsSeen []map[string]any
	for _, p := range hook.Payloads() {
		if p["event"] == "approval" {
			approvalsSeen = append(approvalsSeen, p)
		}
	}
	if len(approvalsSeen) != 1 {
		t.Fatalf("approval notifications: %v", hook.Payloads())
	}
	p := approvalsSeen[0]
	if ap, _ := p["approval"].(map[string]any); ap["id"] != a.ID || ap["tool"] != "Bash" {
		t.Errorf("the notification's approval: %v", p["approval"])
	}
	if run, _ := p["run"].(map[string]any); run["id"] != a.Run {
		t.Errorf("the notification names run %v, the daemon %q", run["id"], a.Run)
	}
}
