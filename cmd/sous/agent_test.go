package main

import (
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/seed5ad92d46/sous/daemon"
	"github.com/seed5ad92d46/sous/internal/claudecli"
	"github.com/seed5ad92d46/sous/runtime"
	"github.com/seed5ad92d46/sous/runtime/agent/fakemodel"
)

// The agent tests run recipes through sous run, in process, with the real
// Claude Code CLI (installed from npm by internal/claudecli; skipped where
// npm is missing) talking to a scripted Messages API. Each CLI start costs
// a second or more, so every test runs in parallel and packs several
// checks into one session where they do not interfere.

// TestAgentToolPermissions drives one session in a git worktree through
// three turns, with a session policy: an approved Write lands in the
// worktree; a denied Bash reaches the model as an error tool_result with
// the policy's message; approve(input=...) rewrites what is written. The
// turns share the session and its history, and every decision is logged.
func TestAgentToolPermissions(t *testing.T) {
	t.Parallel()
	repo := makeRepo(t)
	var w *agentWorld
	wt := func() string { return filepath.Join(w.dir, "wt") }
	w = newAgentWorld(t, claudecli.Latest, fakemodel.Options{Func: func(req *fakemodel.Request, n int) fakemodel.Reply {
		switch n {
		case 0:
			return fakemodel.Reply{Blocks: []fakemodel.Block{{Type: "tool_use", ID: "toolu_write_hello", Name: "Write",
				Input: map[string]any{"file_path": filepath.Join(wt(), "hello.txt"), "content": "hello from the model\n"}}}}
		case 1:
			return fakemodel.Text("I wrote hello.txt")
		case 2:
			return fakemodel.Reply{Blocks: []fakemodel.Block{{Type: "tool_use", ID: "toolu_bash_rm", Name: "Bash",
				Input: map[string]any{"command": "rm -rf " + filepath.Join(wt(), "README"), "description": "delete the readme"}}}}
		case 3:
			return fakemodel.Text("understood, nothing deleted")
		case 4:
			return fakemodel.ToolUse("Write", map[string]any{"file_path": filepath.Join(wt(), "secret.txt"), "content": "the model's version\n"})
		case 5:
			return fakemodel.Text("saved")
		case 6:
			return fakemodel.Text("forked")
		}
		return fakemodel.Text("unexpected request")
	}})
	o := w.run(`
cli = json.decode(args["cli"])
wt = args["dir"] + "/wt"
git.worktree_create("agent/wt", wt, repo=args["repo"])
seen = []

def policy(req):
    seen.append("%s %s %s" % (req.kind, req.tool, req.session_id == s.id))
    if req.tool == "Bash":
        return deny("sous test: no shell here")
    if req.input["file_path"].endswith("/secret.txt"):
        inp = dict(req.input)
        inp["content"] = "rewritten by the policy\n"
        return approve(input = inp)
    return permissions(allow = ["Write(%s/**)" % wt])(req)

s = sdk.session(cwd = wt, cli = cli, policy = policy, model = "claude-first-model")
t1 = s.send("write hello.txt")
print("t1:", t1.ok, t1.subtype, t1.text, t1.num_turns >= 2, t1.cost_usd > 0, t1.session_id == s.id,
      t1.messages[-1]["type"], t1.usage["output_tokens"] > 0, t1.duration_ms >= 0, t1.denials)
t2 = s.send("clean up")
print("t2:", t2.text, [(d.tool, d.tool_use_id, d.input["command"].startswith("rm -rf")) for d in t2.denials])
s.set_model("claude-second-model")
s.set_permission_mode("default")
t3 = s.send("save the secret")
print("t3:", t3.text, t3.session_id == t1.session_id)
print("policy saw:", seen)
s.close()
s.close()
print("status:", git.status(wt).changes)

f = sdk.session(cwd = wt, cli = cli, resume = t3.session_id, fork = True)
t4 = f.send("and now?")
print("fork:", t4.text, f.id != None and f.id != t3.session_id, t4.session_id == f.id)
`, "-a", "repo="+repo)
	o.expect(t, 0,
		"t1: True success I wrote hello.txt True True True result True True []",
		`t2: understood, nothing deleted [("Bash", "toolu_bash_rm", True)]`,
		"t3: saved True",
		"fork: forked True True",
		`policy saw: ["tool Write True", "tool Bash True", "tool Write True"]`,
		"approval: allow Write "+filepath.Join(w.dir, "wt", "hello.txt")+" (by session) [session ",
		"approval: deny Bash rm -rf "+filepath.Join(w.dir, "wt", "README")+" (by session: sous test: no shell here) [session ",
	)
	if got := w.readFile(filepath.Join(w.dir, "wt", "hello.txt")); got != "hello from the model\n" {
		t.Errorf("hello.txt = %q", got)
	}
	if got := w.readFile(filepath.Join(w.dir, "wt", "secret.txt")); got != "rewritten by the policy\n" {
		t.Errorf("secret.txt = %q: approve(input=...) was not applied", got)
	}
	if _, err := os.Stat(filepath.Join(w.dir, "wt", "README")); err != nil {
		t.Errorf("the denied rm ran: %v", err)
	}
	tr, ok := w.toolResult("toolu_bash_rm")
	if !ok || !tr.IsError || !strings.Contains(tr.Content, "sous test: no shell here") {
		t.Errorf("the model got %+v (found %v) for the denied Bash, want an error carrying the deny message", tr, ok)
	}
	reqs := w.api.Scripted()
	if len(reqs) != 7 {
		t.Fatalf("the model got %d requests, want 7", len(reqs))
	}
	if n := len(reqs[4].Parsed.Messages); n < 5 {
		t.Errorf("turn 3's first request holds %d messages: the session lost its history", n)
	}
	if m0, m4 := reqs[0].Parsed.Model, reqs[4].Parsed.Model; m0 != "claude-first-model" || m4 != "claude-second-model" {
		t.Errorf("models %q then %q: model= or set_model did not reach the CLI", m0, m4)
	}
	if n := len(reqs[6].Parsed.Messages); n < 7 {
		t.Errorf("the fork's request holds %d messages: it did not start from the session's history", n)
	}
}

// TestAgentConcurrentSessions runs two sessions at once with start() and
// wait_all. Their permission requests arrive while the recipe is busy in
// pure Starlark, and no policy runs until it waits; then the policies run
// on the recipe thread one at a time, even though each sleeps halfway.
func TestAgentConcurrentSessions(t *testing.T) {
	t.Parallel()
	var w *agentWorld
	w = newAgentWorld(t, claudecli.Latest, fakemodel.Options{Func: func(req *fakemodel.Request, n int) fakemodel.Reply {
		name := strings.TrimPrefix(firstPrompt(req), "write ")
		if toolTurn(req) == 0 {
			w.mark(name)
			return fakemodel.ToolUse("Write", map[string]any{"file_path": filepath.Join(w.dir, name, "out.txt"), "content": name + "\n"})
		}
		return fakemodel.Text("done " + name)
	}})
	for _, d := range []string{"a", "b"} {
		if err := os.Mkdir(filepath.Join(w.dir, d), 0o755); err != nil {
			t.Fatal(err)
		}
	}
	o := w.run(`
cli = json.decode(args["cli"])
events = []

def policy_for(name):
    def policy(req):
        events.append("begin " + name)
        sleep(0.3)  # the other session's request waits for this one
        events.append("end " + name)
        return approve()
    return policy

sessions = {n: sdk.session(cwd = args["dir"] + "/" + n, cli = cli, policy = policy_for(n)) for n in ["a", "b"]}
pending = [sessions[n].start("write " + n) for n in ["a", "b"]]

# Busy without waiting: the requests arrive, but no policy may run.
busy_until = time.now() + time.parse_duration("8s")
spins = 0
while time.now() < busy_until:
    spins += 1
print("busy ended:", time.now().unix_nano, "events during busy:", len(events))

turns = wait_all(pending)
print("texts:", [t.text for t in turns])
print("events:", events)
`)
	o.expect(t, 0, "events during busy: 0", `texts: ["done a", "done b"]`)
	var busyEnd int64
	for _, l := range o.stderrLines("busy ended:") {
		fmt.Sscanf(strings.TrimPrefix(l, "busy ended: "), "%d", &busyEnd)
	}
	late := ""
	for _, name := range []string{"a", "b"} {
		// The model's reply asks for the Write; the CLI's permission
		// request follows within milliseconds. A second's margin makes sure
		// it reached sous while the recipe was busy.
		at, ok := w.marked(name)
		if !ok {
			t.Errorf("session %s never asked for its Write", name)
		} else if at.Add(time.Second).UnixNano() >= busyEnd {
			late = fmt.Sprintf("session %s asked for its Write at %v, after the busy loop (ended %v)", name, at, time.Unix(0, busyEnd))
		}
		if got := w.readFile(filepath.Join(w.dir, name, "out.txt")); got != name+"\n" {
			t.Errorf("%s/out.txt = %q", name, got)
		}
	}
	ev := o.stderrLines("events: ")
	if len(ev) != 1 || (ev[0] != `events: ["begin a", "end a", "begin b", "end b"]` && ev[0] != `events: ["begin b", "end b", "begin a", "end a"]`) {
		t.Errorf("policies interleaved or did not run: %v", ev)
	}
	if late != "" && !t.Failed() {
		// On a machine too loaded to start two CLIs within the busy
		// window the run is still correct, but it does not prove that
		// policies wait for the recipe thread: say so rather than fail.
		t.Skipf("inconclusive on this loaded machine: %s", late)
	}
}

// TestAgentInterruptAndTimeout: interrupt() stops a turn the model holds,
// and the turn's wait returns a Turn that says so; the session goes on;
// then a send with a timeout is interrupted when it passes and fails the
// recipe saying so.
func TestAgentInterruptAndTimeout(t *testing.T) {
	t.Parallel()
	hold := make(chan struct{})
	defer close(hold)
	var w *agentWorld
	w = newAgentWorld(t, claudecli.Latest, fakemodel.Options{Func: func(req *fakemodel.Request, n int) fakemodel.Reply {
		switch firstPromptOfTurn(req) {
		case "take forever":
			// The recipe polls for this file to know the turn is under way.
			os.WriteFile(filepath.Join(w.dir, "held"), nil, 0o644)
			return fakemodel.Reply{Blocks: []fakemodel.Block{fakemodel.TextBlock("never")}, Hold: hold}
		case "quick one":
			return fakemodel.Text("fast")
		}
		return fakemodel.Reply{Blocks: []fakemodel.Block{fakemodel.TextBlock("never either")}, Hold: hold}
	}})
	o := w.run(`
cli = json.decode(args["cli"])
s = sdk.session(cwd = args["dir"], cli = cli)
p = s.start("take forever")
while not files.stat(args["dir"] + "/held").exists:
    sleep(0.05)
s.interrupt()
t = p.wait(timeout = 60)
print("interrupted:", t.subtype, t.session_id == s.id, t.messages[-1]["type"])
print("next:", s.send("quick one").text)
s.send("slow again", timeout = 1.5)
print("not reached")
`)
	o.expect(t, 1, "interrupted: error_during_execution True result", "next: fast",
		"main.star:11:7: in <toplevel>", "Error in Session.send: Session.send: the turn ran past its timeout of 1.5s and was interrupted")
	if strings.Contains(o.stderr, "not reached") {
		t.Error("the recipe went on after the timeout")
	}
}

// firstPromptOfTurn is the text of the last user message that is a prompt
// (not tool results): which turn of a session a request belongs to.
// A tool result message has no text, so the search goes on backwards.
func firstPromptOfTurn(r *fakemodel.Request) string {
	for i := len(r.Parsed.Messages) - 1; i >= 0; i-- {
		m := r.Parsed.Messages[i]
		if m.Role != "user" {
			continue
		}
		// The CLI may merge the user messages of an interrupted turn
		// with the next prompt: the prompt is the last text.
		bs := m.Blocks()
		for j := len(bs) - 1; j >= 0; j-- {
			b := bs[j]
			if b.Type == "text" && !strings.HasPrefix(strings.TrimSpace(b.Text), "<system-reminder>") && !strings.HasPrefix(b.Text, "[Request interrupted") {
				return b.Text
			}
		}
	}
	return ""
}

// TestAgentApprovalFlags: with no policy, sous run's --allow and --deny
// decide, deny winning over an allow of the whole tool.
func TestAgentApprovalFlags(t *testing.T) {
	t.Parallel()
	var w *agentWorld
	w = newAgentWorld(t, claudecli.Latest, fakemodel.Options{Func: func(req *fakemodel.Request, n int) fakemodel.Reply {
		switch n {
		case 0:
			return fakemodel.Reply{Blocks: []fakemodel.Block{{Type: "tool_use", ID: "toolu_write", Name: "Write",
				Input: map[string]any{"file_path": filepath.Join(w.dir, "out.txt"), "content": "flagged\n"}}}}
		case 1:
			return fakemodel.Reply{Blocks: []fakemodel.Block{{Type: "tool_use", ID: "toolu_touch", Name: "Bash",
				Input: map[string]any{"command": "touch made-by-bash"}}}}
		}
		return fakemodel.Text("done")
	}})
	o := w.run(`
t = sdk.send("go", cwd = args["dir"], cli = json.decode(args["cli"]))
print("denials:", [d.tool for d in t.denials], t.text)
`, "--allow", "Write("+w.dir+"/**)", "--allow", "Bash", "--deny", "Bash(touch:*)")
	o.expect(t, 0, "denials: [\"Bash\"] done",
		"approval: allow Write "+filepath.Join(w.dir, "out.txt")+" (by flag)",
		`approval: deny Bash touch made-by-bash (by flag: denied by sous run --deny "Bash(touch:*)")`)
	if got := w.readFile(filepath.Join(w.dir, "out.txt")); got != "flagged\n" {
		t.Errorf("out.txt = %q", got)
	}
	if _, err := os.Stat(filepath.Join(w.dir, "made-by-bash")); err == nil {
		t.Error("the denied touch ran")
	}
	if tr, ok := w.toolResult("toolu_touch"); !ok || !tr.IsError || !strings.Contains(tr.Content, `denied by sous run --deny "Bash(touch:*)"`) {
		t.Errorf("the model got %+v for the denied touch", tr)
	}
}

// TestAgentRelativeRules: a relative path rule is relative to where the
// CLI runs, also when cwd= is relative (the daemon resolves it against its
// own directory): the rules learn the CLI's directory from its
// system/init message. A deny on "secrets/**" used to miss the absolute
// path the CLI writes to, and the write went through.
func TestAgentRelativeRules(t *testing.T) {
	t.Parallel()
	var w *agentWorld
	wd := func() string { return filepath.Join(w.dir, "wd") }
	w = newAgentWorld(t, claudecli.Latest, fakemodel.Options{Func: func(req *fakemodel.Request, n int) fakemodel.Reply {
		switch n {
		case 0:
			return fakemodel.Reply{Blocks: []fakemodel.Block{{Type: "tool_use", ID: "toolu_secret", Name: "Write",
				Input: map[string]any{"file_path": filepath.Join(wd(), "secrets", "key"), "content": "leaked\n"}}}}
		case 1:
			return fakemodel.Reply{Blocks: []fakemodel.Block{{Type: "tool_use", ID: "toolu_plain", Name: "Write",
				Input: map[string]any{"file_path": filepath.Join(wd(), "notes.txt"), "content": "fine\n"}}}}
		}
		return fakemodel.Text("done")
	}})
	if err := os.MkdirAll(filepath.Join(wd(), "secrets"), 0o755); err != nil {
		t.Fatal(err)
	}
	here, err := os.Getwd()
	if err != nil {
		t.Fatal(err)
	}
	rel, err := filepath.Rel(here, wd())
	if err != nil || filepath.IsAbs(rel) {
		t.Fatalf("no relative path from %s to %s: %v", here, wd(), err)
	}
	o := w.run(`
t = sdk.send("go", cwd = args["wd"], cli = json.decode(args["cli"]))
print("denials:", [d.input["file_path"].endswith("/secrets/key") for d in t.denials], t.text)
`, "-a", "wd="+rel, "--allow", "Write", "--deny", "Write(secrets/**)")
	o.expect(t, 0, "denials: [True] done",
		"approval: deny Write "+filepath.Join(wd(), "secrets", "key")+` (by flag: denied by sous run --deny "Write(secrets/**)")`,
		"approval: allow Write "+filepath.Join(wd(), "notes.txt")+" (by flag)")
	if _, err := os.Stat(filepath.Join(wd(), "secrets", "key")); err == nil {
		t.Error("the denied write went through")
	}
	if got := w.readFile(filepath.Join(wd(), "notes.txt")); got != "fine\n" {
		t.Errorf("notes.txt = %q", got)
	}
}

// TestAgentPermissionsResolveSymlinksAndGuardGit: on the embedded
// (local) host, permissions() matches the path a write really lands on: a
// symlink committed in the tree (docs -> a directory outside) does not let
// the allowed Write(wt/**) out, and a write into .git, which would run
// code at the recipe's next git command, is denied by default.
func TestAgentPermissionsResolveSymlinksAndGuardGit(t *testing.T) {
	t.Parallel()
	var w *agentWorld
	wt := func() string { return filepath.Join(w.dir, "wt") }
	outside := func() string { return filepath.Join(w.dir, "outside") }
	w = newAgentWorld(t, claudecli.Latest, fakemodel.Options{Func: func(req *fakemodel.Request, n int) fakemodel.Reply {
		write := func(id, path string) fakemodel.Reply {
			return fakemodel.Reply{Blocks: []fakemodel.Block{{Type: "tool_use", ID: id, Name: "Write",
				Input: map[string]any{"file_path": path, "content": "from the agent\n"}}}}
		}
		switch n {
		case 0:
			return write("toolu_link", filepath.Join(wt(), "docs", "escaped.txt"))
		case 1:
			return write("toolu_git", filepath.Join(wt(), ".git", "config"))
		case 2:
			return write("toolu_ok", filepath.Join(wt(), "ok.txt"))
		}
		return fakemodel.Text("done")
	}})
	for _, d := range []string{filepath.Join(wt(), ".git"), outside()} {
		if err := os.MkdirAll(d, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	if err := os.Symlink(outside(), filepath.Join(wt(), "docs")); err != nil {
		t.Fatal(err)
	}
	o := w.run(`
approvals(permissions(allow = ["Write(" + args["dir"] + "/wt/**)"]))
t = sdk.send("go", cwd = args["dir"] + "/wt", cli = json.decode(args["cli"]))
print("denials:", len(t.denials), t.text)
`)
	o.expect(t, 0, "denials: 2 done",
		"approval: deny Write "+filepath.Join(wt(), "docs", "escaped.txt")+" (by default: "+runtime.DefaultDenyMessage+")",
		"approval: deny Write "+filepath.Join(wt(), ".git", "config")+" (by recipe: denied: permissions() denies writes inside .git by default",
		"approval: allow Write "+filepath.Join(wt(), "ok.txt")+" (by recipe)")
	for _, p := range []string{filepath.Join(outside(), "escaped.txt"), filepath.Join(wt(), ".git", "config")} {
		if _, err := os.Stat(p); err == nil {
			t.Errorf("the denied write to %s went through", p)
		}
	}
	if got := w.readFile(filepath.Join(wt(), "ok.txt")); got != "from the agent\n" {
		t.Errorf("ok.txt = %q", got)
	}
}

// TestApprovalFlagsAreChecked: a malformed rule is a usage error before
// anything runs.
func TestApprovalFlagsAreChecked(t *testing.T) {
	t.Parallel()
	o, _ := runStar(t, "print(\"ran\")\n", "--allow", "Read", "--deny", "Bash(rm")
	o.expect(t, 2, `sous: --deny[0]: rule "Bash(rm": want Tool or Tool(content)`)
	if strings.Contains(o.stderr, "ran") {
		t.Error("the recipe ran")
	}
}

// TestAgentJSONEventsDefaultDenyAndRecipeApprovals runs with --json: a
// request nobody decides is denied by default (stdin is no terminal); after
// approvals(policy) the recipe-wide policy decides. stdout carries agent
// events with the protocol messages and approval events with who decided.
func TestAgentJSONEventsDefaultDenyAndRecipeApprovals(t *testing.T) {
	t.Parallel()
	var w *agentWorld
	w = newAgentWorld(t, claudecli.Latest, fakemodel.Options{Func: func(req *fakemodel.Request, n int) fakemodel.Reply {
		if toolTurn(req) == 0 || n == 2 {
			return fakemodel.Reply{Blocks: []fakemodel.Block{{Type: "tool_use", ID: fmt.Sprintf("toolu_%d", n), Name: "Write",
				Input: map[string]any{"file_path": filepath.Join(w.dir, fmt.Sprintf("f%d.txt", n)), "content": "x\n"}}}}
		}
		return fakemodel.Text(fmt.Sprintf("reply %d", n))
	}})
	o := w.run(`
s = sdk.session(cwd = args["dir"], cli = json.decode(args["cli"]))
t1 = s.send("first")
print("t1 denials:", len(t1.denials))
approvals(lambda req: approve() if req.tool == "Write" else None)
t2 = s.send("second")
print("t2 denials:", len(t2.denials), "session:", s.id)
`, "--json")
	o.expect(t, 0)
	if tr, ok := w.toolResult("toolu_0"); !ok || !tr.IsError || !strings.Contains(tr.Content, "no approver allowed this request") {
		t.Errorf("the model got %+v for the undecided Write", tr)
	}
	if _, err := os.Stat(filepath.Join(w.dir, "f0.txt")); err == nil {
		t.Error("the Write nobody allowed ran")
	}
	if got := w.readFile(filepath.Join(w.dir, "f2.txt")); got != "x\n" {
		t.Errorf("f2.txt = %q", got)
	}
	events := o.events(t)
	if len(events) == 0 || events[0]["event"] != "start" || events[len(events)-1]["event"] != "end" {
		t.Fatalf("events do not run from start to end: %v", events)
	}
	var session string
	var approvalsSeen []string
	types := map[string]bool{}
	for _, e := range events {
		switch e["event"] {
		case "log":
			if text, _ := e["text"].(string); strings.HasPrefix(text, "t2 denials: 0 session: ") {
				session = strings.TrimPrefix(text, "t2 denials: 0 session: ")
			}
		case "approval":
			approvalsSeen = append(approvalsSeen, fmt.Sprintf("%v %v %v %v %v", e["session"], e["tool"], e["decision"], e["by"], e["message"]))
		case "agent":
			msg, _ := e["message"].(map[string]any)
			types[fmt.Sprintf("%v:%v", e["dir"], msg["type"])] = true
			if e["session"] == "" || e["session"] == nil {
				t.Errorf("agent event without a session: %v", e)
			}
		}
	}
	if session == "" {
		t.Fatalf("the recipe's log events are missing:\n%s", o.stdout)
	}
	want := []string{
		session + " Write deny default no approver allowed this request",
		session + " Write allow recipe <nil>",
	}
	if strings.Join(approvalsSeen, "\n") != strings.Join(want, "\n") {
		t.Errorf("approval events:\n%s\nwant:\n%s", strings.Join(approvalsSeen, "\n"), strings.Join(want, "\n"))
	}
	for _, typ := range []string{"out:user", "out:control_request", "in:control_request", "in:assistant", "in:result", "in:system"} {
		if !types[typ] {
			t.Errorf("no agent event for a %s message; saw %v", typ, types)
		}
	}
	if o.stderr != "" {
		t.Errorf("stderr in --json mode:\n%s", o.stderr)
	}
}

// TestAgentPolicyErrors: a policy that raises, or returns something that is
// no decision, denies the request and fails the recipe with the policy's
// traceback. The sessions run on a socket daemon, whose processes outlive
// their clients: the CLI must still be gone when sous returns.
func TestAgentPolicyErrors(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name, policy string
		want         []string
	}{
		{"raises", "def policy(req):\n    return check(req)\n\ndef check(req):\n    fail(\"policy exploded on \" + req.tool)\n",
			[]string{"main.star:9:7: in <toplevel>", "main.star:2:17: in policy", "main.star:5:9: in check",
				"Error in fail: fail: policy exploded on Write", "approval: deny Write"}},
		{"returns no decision", "def policy(req):\n    return 42\n\n\n\n",
			[]string{"main.star:9:7: in <toplevel>", "Error in Session.send: policy policy (", "main.star:1:1) returned int: want approve(...), deny(...) or None"}},
		{"waits for a turn", "def policy(req):\n    return s.send(\"nested\")\n\n\n\n",
			[]string{"main.star:9:7: in <toplevel>", "main.star:2:18: in policy",
				"Error in Session.send: Session.send: a policy or hook cannot wait for an agent's turn: no permission request or hook could be answered meanwhile"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			sock, srv := socketDaemon(t, "tok", daemonConfig(t))
			var w *agentWorld
			w = newAgentWorld(t, claudecli.Latest, fakemodel.Options{Func: func(req *fakemodel.Request, n int) fakemodel.Reply {
				if toolTurn(req) == 0 {
					return fakemodel.ToolUse("Write", map[string]any{"file_path": filepath.Join(w.dir, "out.txt"), "content": "x\n"})
				}
				return fakemodel.Text("done")
			}})
			var env strings.Builder
			for _, kv := range w.env {
				k, v, _ := strings.Cut(kv, "=")
				fmt.Fprintf(&env, "%q: %q, ", k, v)
			}
			// Lines 1-5 are the policy; the send is on line 9.
			o := w.run(tt.policy+`
s = sdk.session(cwd = args["dir"], cli = json.decode(args["cli"]), policy = policy,
                env = {`+env.String()+`})
s.send("write it")
print("not reached")
`, "--socket", sock, "--token-file", tokenFile(t, "tok"))
			o.expect(t, 1, tt.want...)
			if strings.Contains(o.stderr, "not reached") {
				t.Error("the recipe went on")
			}
			if _, err := os.Stat(filepath.Join(w.dir, "out.txt")); err == nil {
				t.Error("the Write ran although its policy failed")
			}
			procs := srv.Registry().List()
			if len(procs) == 0 {
				t.Fatal("no CLI ever ran on the socket daemon")
			}
			for _, p := range procs {
				if p.Running() {
					t.Errorf("process %s (the CLI) still runs after sous returned", p.ID)
				}
			}
		})
	}
}

// TestAgentWebSocketAndSocketHost: Claude Code 2.1.81 over the WebSocket
// transport on the embedded daemon, and over stdio on a Host for a socket
// daemon (h.sdk), with env= merged over that daemon's environment. The
// recipe never closes the second session: the run does, and the CLI is gone
// when sous returns although the daemon keeps running.
func TestAgentWebSocketAndSocketHost(t *testing.T) {
	t.Parallel()
	sock, srv := socketDaemon(t, "tok", daemon.Config{ShutdownGrace: time.Second, Env: []string{"PATH=" + os.Getenv("PATH")}})
	w := newAgentWorld(t, claudecli.WebSocket, fakemodel.Options{Func: func(req *fakemodel.Request, n int) fakemodel.Reply {
		if toolTurn(req) == 0 {
			return fakemodel.ToolUse("Bash", map[string]any{"command": "printf '%s' \"$SOUS_TEST_VAR\" > var.txt"})
		}
		return fakemodel.Text("via " + firstPrompt(req))
	}})
	var env strings.Builder
	for _, kv := range w.env {
		k, v, _ := strings.Cut(kv, "=")
		fmt.Fprintf(&env, "%q: %q, ", k, v)
	}
	if err := os.Mkdir(filepath.Join(w.dir, "remote"), 0o755); err != nil {
		t.Fatal(err)
	}
	o := w.run(`
cli = json.decode(args["cli"])
allow_all = lambda req: approve()
ws = sdk.session(cwd = args["dir"], cli = cli, transport = "websocket", policy = allow_all, env = {"SOUS_TEST_VAR": "embedded"})
print(ws.send("websocket").text)
ws.close()

h = host("unix://` + sock + `", token = "tok")
env = {` + env.String() + `"SOUS_TEST_VAR": "socket"}
s = h.sdk.session(cwd = args["dir"] + "/remote", cli = cli, policy = allow_all, env = env)
print(s.send("socket host").text)
`)
	o.expect(t, 0, "via websocket", "via socket host")
	if got := w.readFile(filepath.Join(w.dir, "var.txt")); got != "embedded" {
		t.Errorf("var.txt = %q: env= did not reach the CLI's tools", got)
	}
	if got := w.readFile(filepath.Join(w.dir, "remote", "var.txt")); got != "socket" {
		t.Errorf("remote/var.txt = %q: env= did not reach the CLI's tools", got)
	}
	procs := srv.Registry().List()
	if len(procs) != 1 {
		t.Fatalf("%d processes on the socket daemon, want the one CLI", len(procs))
	}
	if procs[0].Running() {
		t.Errorf("the CLI %s still runs on the socket daemon after the run", procs[0].ID)
	}
}

// TestAgentArguments: the agent builtins check their arguments before
// starting anything, with messages naming the builtin and the argument.
func TestAgentArguments(t *testing.T) {
	t.Parallel()
	tests := []struct{ src, want string }{
		{`sdk.session(cwd = 1)`, "sdk.session: cwd: want string, got int"},
		{`sdk.session("x")`, "sdk.session: got 1 positional arguments, want at most 0"},
		{`sdk.session(transport = "tcp")`, `sdk.session: transport: want "stdio" or "websocket", got "tcp"`},
		{`sdk.session(cli = [])`, "sdk.session: cli: empty command"},
		{`sdk.session(cli = 1)`, "sdk.session: cli: want string or list of strings, got int"},
		{`sdk.session(fork = True)`, "sdk.session: fork: needs resume (the id of the session to fork)"},
		{`sdk.session(max_turns = 0)`, "sdk.session: max_turns: want at least 1, got 0"},
		{`sdk.session(timeout = 0)`, "sdk.session: timeout: want more than 0 seconds"},
		{`sdk.session(env = {"A": None})`, `sdk.session: env["A"]: want string, got NoneType`},
		{`sdk.session(policy = "allow")`, "sdk.session: policy: want function or None, got string"},
		{`sdk.session(allowed_tools = "Read")`, "sdk.session: allowed_tools: want list of strings, got string"},
		{`sdk.session(cwdd = "/")`, `sdk.session: unexpected keyword argument "cwdd" (did you mean cwd?)`},
		{`sdk.send()`, "sdk.send: missing argument for prompt"},
		{`sdk.send("hi", transport = "x")`, `sdk.send: transport: want "stdio" or "websocket", got "x"`},
		{`approve(input = 1)`, "approve: input: want dict or None, got int"},
		{`approve(input = {"f": lambda: 1})`, `approve: input["f"]: want a JSON value (dict, list, string, number, bool or None), got function`},
		{`approve(input = {"l": range(10 * 1000 * 1000 * 1000 * 1000)})`, `approve: input["l"]: want a JSON value (dict, list, string, number, bool or None), got range`},
		{`wait_all(range(10 * 1000 * 1000 * 1000 * 1000))`, "wait_all: pendings[0]: want Process or Pending, got int"},
		{`approve(remember = "Bash(")`, `approve: remember: rule "Bash(": want Tool or Tool(content)`},
		{`approve("x")`, "approve: got 1 positional arguments, want at most 0"},
		{`approve(updates = {"type": "setMode"})`, "approve: updates: want list of permission updates (dicts) or None, got dict"},
		{`approve(updates = ["Bash"])`, "approve: updates[0]: want dict (a permission update), got string"},
		{`approve(updates = [{"type": "addRule", "destination": "session"}])`,
			"approve: updates[0]: type \"addRule\": want one of addDirectories, addRules, removeDirectories, removeRules, replaceRules, setMode"},
		{`approve(updates = [{"type": "addRules", "rules": ["Bash(git:*)"], "behavior": "allow"}])`,
			"approve: updates[0]: addRules: destination missing: want one of session, localSettings, projectSettings, userSettings, cliArg"},
		{`approve(updates = [{"type": "setMode", "mode": "plan", "destination": "session", "rules": []}])`,
			"approve: updates[0]: setMode: unknown field \"rules\" (a setMode update takes type, destination, mode)"},
		{`sdk.session(checkpoints = 1)`, "sdk.session: checkpoints: want bool, got int"},
		{`sdk.session(on_message = "print")`, "sdk.session: on_message: want function or None, got string"},
		{`deny()`, "deny: missing argument for message"},
		{`deny(" ")`, "deny: message: empty; say why, the agent reads it"},
		{`deny("no", interrupt = 1)`, "deny: interrupt: want bool, got int"},
		{`permissions(allow = ["Bash(ls"])`, `permissions: allow[0]: rule "Bash(ls": want Tool or Tool(content)`},
		{`permissions(deny = "Bash")`, "permissions: deny: want list of strings, got string"},
		{`permissions(ask = ["Read", "x y"])`, `permissions: ask[1]: rule "x y": tool name "x y"`},
		{`approvals(1)`, "approvals: policy: want function or None, got int"},
		{`approvals()`, "approvals: missing argument for policy"},
		{`permissions(allow = ["Read"])(1)`, "permissions policy: want a Request, got int"},
		{`wait_all([1])`, "wait_all: pendings[0]: want Process or Pending, got int"},
		{`sdk.session(cli = "sous-no-such-claude")`,
			"sdk.session: cli: spawn sous-no-such-claude: executable file not found in $PATH"},
		{`sdk.session(cli = ["sh", "-c", "echo unknown option >&2; exit 3"])`, "exited with code 3; stderr: unknown option"},
	}
	for _, tt := range tests {
		t.Run(tt.src, func(t *testing.T) {
			t.Parallel()
			o, _ := runStar(t, tt.src+"\n")
			o.expect(t, 1, tt.want)
		})
	}
}

// TestAgentDecisionValues: what approve(), deny() and permissions() give,
// as recipes can inspect them.
func TestAgentDecisionValues(t *testing.T) {
	t.Parallel()
	o, _ := runStar(t, `
a = approve(input = {"command": "ls", "n": 3, "l": [1.5, None, True]}, remember = " Bash(git:*) ")
d = deny("not here", interrupt = True)
print(a, a.behavior, a.input, a.remember, a.message, a.interrupt)
print(d, d.behavior, d.input, d.remember, d.message, d.interrupt)
print(approve().input, approve().remember, type(a), type(permissions()))
print(permissions(allow = ["Read"], deny = ["Bash(rm:*)"], ask = ["Write"]))
print(sorted(dir(a)))
ups = [{"type": "addRules", "rules": ["Bash(git:*)", {"toolName": "Read"}], "behavior": "allow", "destination": "session"}]
u = approve(updates = ups)
ups.append("still the recipe's")
print(u.updates, d.updates, a.updates)
`)
	o.expect(t, 0, `<approve> allow {"command": "ls", "n": 3, "l": [1.5, None, True]} Bash(git:*)  False`,
		`<deny "not here"> deny None None not here True`,
		"None None Decision policy",
		`<permissions allow=["Read"] deny=["Bash(rm:*)"] ask=["Write"]>`,
		`["behavior", "input", "interrupt", "message", "remember", "updates"]`,
		`[{"behavior": "allow", "destination": "session", "rules": ["Bash(git:*)", {"toolName": "Read"}], "type": "addRules"}] None None`)
}

// gitInit makes dir a git repository with everything in it committed.
func gitInit(t *testing.T, dir string) {
	t.Helper()
	if _, err := exec.LookPath("git"); err != nil {
		t.Skip("git is not installed")
	}
	for _, args := range [][]string{{"init", "-q", "-b", "main"}, {"add", "."}, {"commit", "-q", "-m", "first"}} {
		cmd := exec.Command("git", args...)
		cmd.Dir = dir
		cmd.Env = append(os.Environ(), "GIT_AUTHOR_NAME=t", "GIT_AUTHOR_EMAIL=t@e", "GIT_COMMITTER_NAME=t",
			"GIT_COMMITTER_EMAIL=t@e", "GIT_CONFIG_GLOBAL=/dev/null", "GIT_CONFIG_NOSYSTEM=1")
		if out, err := cmd.CombinedOutput(); err != nil {
			t.Fatalf("git %v: %v\n%s", args, err, out)
		}
	}
}

// TestRecipeAgentFix runs recipes/agent-fix.star on a module whose test
// fails: the scripted agent fixes the code in its worktree, runs go test
// (allowed), tries curl (denied), and the recipe's own test run passes.
func TestRecipeAgentFix(t *testing.T) {
	t.Parallel()
	repo := goModule(t, false)
	gitInit(t, repo)
	var w *agentWorld
	wt := func() string { return filepath.Join(w.dir, "trees", "task-1") }
	w = newAgentWorld(t, claudecli.Latest, fakemodel.Options{Func: func(req *fakemodel.Request, n int) fakemodel.Reply {
		switch toolTurn(req) {
		case 0:
			return fakemodel.ToolUse("Write", map[string]any{"file_path": filepath.Join(wt(), "add.go"),
				"content": "package tiny\n\n// Add adds, the way the test wants.\nfunc Add(a, b int) int { return a + b + 1 }\n"})
		case 1:
			return fakemodel.ToolUse("Bash", map[string]any{"command": "go test ./...", "description": "run the tests"})
		case 2:
			return fakemodel.ToolUse("Bash", map[string]any{"command": "curl -s https://example.com/upload"})
		}
		return fakemodel.Text("Fixed Add.\nDetails follow.")
	}})
	w.shareGoCache()
	o := w.sous("run", recipe("agent-fix.star"), "-a", "repo="+repo, "-a", "task=make TestAdd pass",
		"-a", "into="+filepath.Join(w.dir, "trees"), "-a", "cli="+w.cliArg(), "-a", "timeout=120")
	o.expect(t, 0, "task 1: make TestAdd pass (worktree "+wt()+")",
		"approval: allow Write "+filepath.Join(wt(), "add.go")+" (by session)",
		"approval: deny Bash curl -s https://example.com/upload (by session: agent-fix allows reading, editing inside "+wt(),
		"task 1: tests ok, $", "4 turns, 1 denial (Bash curl -s https://example.com/upload), agent: Fixed Add.",
		"all 1 task: tests pass")
	// Costs are shown to the hundredth of a cent, not as a float's repr
	// ($0.0005600000000000001).
	if !regexp.MustCompile(`task 1: tests ok, \$\d+\.\d{4}, 4 turns`).MatchString(o.stderr) {
		t.Errorf("the cost is not shown with 4 digits:\n%s", o.stderr)
	}
	if got := w.readFile(filepath.Join(wt(), "add.go")); !strings.Contains(got, "a + b + 1") {
		t.Errorf("the fix is not in the worktree: %q", got)
	}
	if got, _ := os.ReadFile(filepath.Join(repo, "add.go")); strings.Contains(string(got), "a + b + 1") {
		t.Error("the agent's edit reached the main checkout")
	}
	var goTest string
	for _, r := range w.api.Scripted() {
		for _, tr := range r.ToolResults() {
			if strings.Contains(tr.Content, "ok") && strings.Contains(tr.Content, "example.com/tiny") {
				goTest = tr.Content
			}
		}
	}
	if goTest == "" {
		t.Error("the agent's go test never reported ok to the model")
	}
}

// TestRecipeAgentFanout runs recipes/agent-fanout.star with two prompts:
// two sessions work at once in their own worktrees; what a session's policy
// leaves undecided (a push, an edit in the other agent's worktree) the
// recipe-wide approver denies; one report covers both.
func TestRecipeAgentFanout(t *testing.T) {
	t.Parallel()
	repo := makeRepo(t)
	var w *agentWorld
	tree := func(n int) string { return filepath.Join(w.dir, "trees", fmt.Sprintf("agent-%d", n)) }
	// The first agent's turn cannot end before the second agent's turn has
	// begun: proof that they run at once (in turn, they would deadlock).
	secondBegan := make(chan struct{})
	var once sync.Once
	var late atomic.Bool // set by the model's handler goroutine
	w = newAgentWorld(t, claudecli.Latest, fakemodel.Options{Func: func(req *fakemodel.Request, n int) fakemodel.Reply {
		prompt := firstPrompt(req)
		if strings.HasPrefix(prompt, "edit") {
			once.Do(func() { close(secondBegan) })
		}
		if strings.HasPrefix(prompt, "write notes") && toolTurn(req) == 2 {
			select {
			case <-secondBegan:
			case <-time.After(60 * time.Second):
				late.Store(true)
			}
		}
		switch {
		case strings.HasPrefix(prompt, "write notes") && toolTurn(req) == 0:
			return fakemodel.ToolUse("Write", map[string]any{"file_path": filepath.Join(tree(1), "NOTES.md"), "content": "notes\n"})
		case strings.HasPrefix(prompt, "write notes") && toolTurn(req) == 1:
			return fakemodel.ToolUse("Write", map[string]any{"file_path": filepath.Join(tree(2), "INTRUDER.md"), "content": "mine now\n"})
		case strings.HasPrefix(prompt, "write notes"):
			return fakemodel.Text("notes written")
		case toolTurn(req) == 0:
			return fakemodel.ToolUse("Edit", map[string]any{"file_path": filepath.Join(tree(2), "README"), "old_string": "hello", "new_string": "hello, agents"})
		case toolTurn(req) == 1:
			return fakemodel.ToolUse("Bash", map[string]any{"command": "git push origin HEAD"})
		}
		return fakemodel.Text("readme edited")
	}})
	prompts := filepath.Join(w.dir, "prompts.txt")
	if err := os.WriteFile(prompts, []byte("# one per line\nwrite notes\n\nedit the readme\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	o := w.sous("run", recipe("agent-fanout.star"), "-a", "repo="+repo, "-a", "prompts="+prompts,
		"-a", "into="+filepath.Join(w.dir, "trees"), "-a", "cli="+w.cliArg(), "-a", "timeout=120", "-a", "cleanup=1")
	o.expect(t, 0, "agent 1: write notes", "agent 2: edit the readme",
		"approval: allow Write "+filepath.Join(tree(1), "NOTES.md")+" (by session)",
		"approval: deny Write "+filepath.Join(tree(2), "INTRUDER.md")+" (by recipe: agent-fanout allows reading and editing inside your own worktree only; Write was not allowed)",
		"approval: deny Bash git push origin HEAD (by recipe: ",
		"agent 1: ok, $", ", 3 turns, 1 denials, 1 changed: NOTES.md | notes written",
		", 3 turns, 1 denials, 1 changed: README | readme edited",
		"total cost $")
	for _, re := range []string{`agent 1: ok, \$\d+\.\d{4}, 3 turns`, `agent 2: ok, \$\d+\.\d{4}, 3 turns`, `total cost \$\d+\.\d{4} for 2 agents\n`} {
		if !regexp.MustCompile(re).MatchString(o.stderr) {
			t.Errorf("stderr does not match %s:\n%s", re, o.stderr)
		}
	}
	if fileExists(filepath.Join(w.dir, "trees")) {
		t.Error("cleanup=1 left the worktrees")
	}
	if late.Load() {
		t.Error("the second agent's turn did not begin while the first one's ran")
	}
	if n := len(w.api.Scripted()); n != 6 {
		t.Errorf("the model got %d requests, want 3 per agent", n)
	}
}

// TestSSHAgentSession: over ssh a session must use stdio (the CLI on the
// far side could not reach a loopback WebSocket here) and works with it:
// the CLI runs as a process of the remote daemon, its messages travel
// through the bridge, and env= points it at the scripted model.
func TestSSHAgentSession(t *testing.T) {
	f := newSSHFixture(t)
	cli := claudecli.Find(t, claudecli.Latest)
	api, err := fakemodel.Start(fakemodel.Options{Script: []fakemodel.Reply{fakemodel.Text("hello over ssh")}})
	if err != nil {
		t.Fatal(err)
	}
	defer api.Close()
	env, _ := json.Marshal(claudecli.Env(t.TempDir(), api.URL()))
	cliJSON, _ := json.Marshal(cli)
	dir := t.TempDir()
	recipe := filepath.Join(dir, "agent.star")
	os.WriteFile(recipe, []byte(`
s = sdk.session(cwd = args["dir"], cli = json.decode(args["cli"]), env = json.decode(args["env"]), transport = args["transport"])
print("turn:", s.send("hi").text, s.id != None)
`), 0o644)
	run := func(transport string) (string, int) {
		_, errOut, code := f.sous(t, "", "run", "--remote", f.remote, recipe, "-a", "dir="+dir, "-a", "cli="+string(cliJSON),
			"-a", "env="+string(env), "-a", "transport="+transport)
		return errOut, code
	}
	errOut, code := run("websocket")
	if code != 1 || !strings.Contains(errOut, `sdk.session: transport: "websocket" needs the CLI on this machine, and ssh://`) {
		t.Errorf("websocket over ssh: code %d\n%s", code, errOut)
	}
	errOut, code = run("stdio")
	if code != 0 || !strings.Contains(errOut, "turn: hello over ssh True") {
		t.Errorf("stdio over ssh: code %d\n%s", code, errOut)
	}
}
