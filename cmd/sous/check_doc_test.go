package main

import (
	"io"

	"github.com/spf13/cobra"

	"path/filepath"
	"strings"
	"testing"

	"github.com/seed5ad92d46/sous/builtins"
	"github.com/seed5ad92d46/sous/internal/testutil"
)

func TestCheck(t *testing.T) {
	t.Parallel()
	dir := testutil.WriteTree(t, map[string]string{
		"good.star":  "load(\"lib.star\", \"f\")\nf()\n",
		"lib.star":   "def f():\n    return spawn\n",
		"bad.star":   "print(x)\nrun(\n",
		"undef.star": "def g():\n    return y\nz = w\n",
	})
	good, bad, undef := filepath.Join(dir, "good.star"), filepath.Join(dir, "bad.star"), filepath.Join(dir, "undef.star")
	o := sous(t, "check", good, bad, undef)
	o.expect(t, 2, bad+":3:1: got end of file, want ')'", undef+":2:12: undefined: y", undef+":3:5: undefined: w")
	if o.stdout != "ok "+good+"\n" {
		t.Errorf("stdout %q", o.stdout)
	}
	if o = sous(t, "check", good); o.code != 0 || o.stderr != "" {
		t.Errorf("a good recipe: %+v", o)
	}
	sous(t, "check").expect(t, 2, "needs at least one recipe")
}

// TestCheckKeywordArguments: a keyword argument that the builtin called
// does not take is an error of sous check, where the callee is statically
// that builtin: a global or module member nobody rebound, a method of a
// value only ever assigned a builtin's result (h = host(...), p =
// spawn(...)), or the function given to defer.
func TestCheckKeywordArguments(t *testing.T) {
	t.Parallel()
	dir := testutil.WriteTree(t, map[string]string{
		"bad.star": `spawn("true", cwdd="/")
git.worktree_create("b", "p", sourc="main", repo=".")
h = host("embedded")
h.spawn("true", cwdd="/")
h.git.info(pth=".")
p = spawn("sleep")
p.wait(timout=1)
s = sdk.session(cwd=".")
s.start("x").wait(timeot=1)
run("true", bogus=1)
defer(git.worktree_remove, "p", rpo=".")
sp = spawn
def f():
    return sp("x", cwdd="/")
fmt_float(1.5, digit=3)
host("embedded").files.read("x", max_byte=1)
`,
		"good.star": `load("lib.star", "files")
files.read("x", anything=1)
def f(spawn, h):
    spawn("x", cwdd=1)
    h.spawn("x", cwdd=1)
sh = lambda script, **kw: None
sh("x", anything=1)
q = spawn("x")
q = 3
q.wait(timout=1)
sdk.send("x", cwd=".", anything=1)
opts = {"cwd": "/"}
spawn("true", echo=False, **opts)
defer(print, "x", sep="-")
print("x", sep="-")
`,
		"lib.star": "files = struct(read = lambda path, **kw: kw)\n",
		// An undefined name does not hide the file's other errors.
		"undef.star": "nope()\nspawn(\"x\", cwdd=1)\n",
	})
	bad, good, undef := filepath.Join(dir, "bad.star"), filepath.Join(dir, "good.star"), filepath.Join(dir, "undef.star")
	o := sous(t, "check", bad, good, undef)
	want := []string{
		bad + `:1:15: spawn: unexpected keyword argument "cwdd" (did you mean "cwd"?)`,
		bad + `:2:31: git.worktree_create: unexpected keyword argument "sourc" (did you mean "source"?)`,
		bad + `:4:17: spawn: unexpected keyword argument "cwdd" (did you mean "cwd"?)`,
		bad + `:5:12: git.info: unexpected keyword argument "pth" (did you mean "path"?)`,
		bad + `:7:8: Process.wait: unexpected keyword argument "timout" (did you mean "timeout"?)`,
		bad + `:9:19: Pending.wait: unexpected keyword argument "timeot" (did you mean "timeout"?)`,
		bad + `:10:13: run: unexpected keyword argument "bogus"`,
		bad + `:11:33: git.worktree_remove: unexpected keyword argument "rpo" (did you mean "repo"?)`,
		bad + `:14:20: spawn: unexpected keyword argument "cwdd" (did you mean "cwd"?)`,
		bad + `:15:16: fmt_float: unexpected keyword argument "digit" (did you mean "digits"?)`,
		bad + `:16:34: files.read: unexpected keyword argument "max_byte" (did you mean "max_bytes"?)`,
		undef + ":1:1: undefined: nope",
		undef + `:2:12: spawn: unexpected keyword argument "cwdd" (did you mean "cwd"?)`,
	}
	o.expect(t, 2, want...)
	if got := strings.Count(o.stderr, "unexpected keyword argument"); got != len(want)-1 {
		t.Errorf("%d errors, want %d:\n%s", got, len(want), o.stderr)
	}
	if strings.Contains(o.stderr, `"bogus" (did you mean`) {
		t.Errorf("a suggestion for a name like no parameter:\n%s", o.stderr)
	}
	if o.stdout != "ok "+good+"\n" {
		t.Errorf("stdout %q", o.stdout)
	}
}

func TestDocListsTheWholeTable(t *testing.T) {
	t.Parallel()
	o := sous(t, "doc")
	o.expect(t, 0)
	for _, e := range builtins.DefaultTable().Entries() {
		if !strings.Contains(o.stdout, e.Sig) && !strings.Contains(o.stdout, "\n"+e.Name+":\n") {
			t.Errorf("sous doc does not list %s", e.Name)
		}
	}
}

func TestDocOfOneName(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name string
		want []string
	}{
		{"spawn", []string{"spawn(cmd, args=[], *, id=None, cwd=None, env=None, tty=False, size=None, sandbox=None, echo=True, want_pid=True, replace=False) -> Process", "Starts a process", "with replace=True the daemon kills that process", "h.spawn acts on the Host h"}},
		{"files", []string{"files.read(path, *, max_bytes=None) -> string or None", "files.stat(path)"}},
		{"Process", []string{"Process.wait(timeout=None) -> Result", "Process.stop(grace=3, escalate=True)"}},
		{"Process.lines", []string{"each lines() call iterates from the first", "use read_line()"}},
		// A method by the name a recipe calls it with, when only one type
		// or module has a member so named (issue 35 ran sous doc lines).
		{"lines", []string{"lines: Process.lines\n", "each lines() call iterates from the first", "use read_line()"}},
		{"read", []string{"read: files.read\n", "files.read(path, *, max_bytes=None) -> string or None"}},
		{"Process.read_line", []string{`Process.read_line(stream="stdout", timeout=None) -> string or None`, "passes before a whole line arrives, read_line fails"}},
		{"Result.stages", []string{"Result.stages -> list of struct(exit_code, stderr)"}},
		{"Host", []string{"Methods and modules: dotenv, extract_tar, files, git, pipeline, reattach, run, sdk, sh, spawn"}},
		{"Host.run", []string{"Host.run: run, acting on the host.", "run(cmd, args=[], *, cwd=None"}},
		{"sdk", []string{`sdk.session(*, cwd=None, model=None, permission_mode=None, system_prompt=None, append_system_prompt=None, allowed_tools=[], disallowed_tools=[], max_turns=None, policy=None, transport="stdio", cli="claude", env=None, resume=None, fork=False, timeout=None, tools=[], output_schema=None, hooks=None, max_budget_usd=None, agents=None, mcp_servers=None, strict_mcp_config=False, add_dirs=[], settings=None, setting_sources=None, fallback_model=None, continue_conversation=False, checkpoints=False, on_message=None, extra_args=None) -> Session`, "sdk.send(prompt, **session_kwargs) -> Turn", "--max-turns 1"}},
		{"agent", []string{"agent(description, prompt, *, tools=None, model=None) -> AgentDef", "subagent_type"}},
		{"AgentDef", []string{"AgentDef.prompt -> string", "AgentDef.tools -> list of strings or None"}},
		{"Session", []string{"Session.info -> dict", "Session.control(subtype, **fields) -> dict", "Session.rewind_files(turn, *, dry_run=False) -> list"}},
		{"Request", []string{"Request.suggestions -> list of dicts or None", "Request.blocked_path -> string or None", "Request.decision_reason -> string or None", "Request.agent_id -> string or None"}},
		{"approve", []string{"approve(*, input=None, remember=None, updates=None) -> Decision", "updatedPermissions"}},
		{"Turn.user_message_id", []string{"Turn.user_message_id -> string", "rewind_files"}},
		{"tool", []string{"tool(name, description, schema, fn) -> Tool", "mcp__sous__NAME", "error result carrying its message"}},
		{"Tool", []string{"Tool.name -> string", "Tool.description -> string", "Tool.schema -> dict"}},
		{"Turn", []string{"Turn.denials -> list of struct(tool, tool_use_id, input)", "Turn.messages -> list of dicts"}},
		{"approvals", []string{"approvals(policy)", "Sets the recipe-wide approver"}},
		{"Request.kind", []string{"Request.kind -> string", `"privileged"`}},
		{"defer", []string{"defer(fn, *args, **kwargs)", "newest first"}},
		{"hosts", []string{"hosts(targets, *, slots=4, token=None) -> Pool", "at most slots at once on each host", "lost for good"}},
		{"Pool", []string{"Pool.hosts -> list of Host", "Pool.lost -> list of string", "Pool.slots -> int", "Pool.targets -> list of string"}},
		{"parallel", []string{"hosts=None) -> list", "fn(item, host)"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			o := sous(t, "doc", tt.name)
			o.expect(t, 0)
			for _, w := range tt.want {
				if !strings.Contains(o.stdout, w) {
					t.Errorf("sous doc %s lacks %q:\n%s", tt.name, w, o.stdout)
				}
			}
		})
	}
	sous(t, "doc", "wiat").expect(t, 2, `no builtin named "wiat"`)
	sous(t, "doc", "Process.wai").expect(t, 2, "did you mean wait_all, Process.wait, Pending.wait?")
	// Two types have a wait: the name alone is no one member.
	sous(t, "doc", "wait").expect(t, 2, `no builtin named "wait"; did you mean wait_all, Process.wait, Pending.wait?`)
	// Shell completion of NAME (what the completion scripts ask for).
	o := sous(t, "__complete", "doc", "files.re")
	if o.code != 0 || !strings.HasPrefix(o.stdout, "files.read\n:4\n") {
		t.Errorf("completion of sous doc files.re: exit %d, %q", o.code, o.stdout)
	}
}

func TestEveryCommandHasHelpWithAnExample(t *testing.T) {
	t.Parallel()
	root := newCmdRoot(newTestFactory(strings.NewReader(""), io.Discard, io.Discard, nil))
	for _, name := range []string{"run", "check", "doc"} {
		if cmd, _, err := root.Find([]string{name}); err != nil || cmd.Name() != name {
			t.Fatalf("command %s is not registered: %v", name, err)
		}
	}
	// Every command a user can see, subcommands included (cobra's help
	// and completion too), shows an example of itself.
	var walk func(cmd *cobra.Command)
	walk = func(cmd *cobra.Command) {
		for _, sub := range cmd.Commands() {
			if sub.Hidden || sub.Name() == "help" {
				continue
			}
			path := sub.CommandPath()
			if !strings.Contains(sub.Example, path) {
				t.Errorf("%s --help has no example of itself", path)
			}
			walk(sub)
		}
	}
	walk(root)
	o := sous(t, "run", "--help")
	if o.code != 0 || !strings.Contains(o.stdout, "Examples:") {
		t.Errorf("sous run --help: %+v", o)
	}
}
