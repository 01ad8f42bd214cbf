package main

import (
	"github.com/spf13/cobra"

	"path/filepath"
	"strings"
	"testing"

	"github.com/seed5ad92d46/sous/builtins"
)

func TestCheck(t *testing.T) {
	t.Parallel()
	dir := writeTree(t, map[string]string{
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
		{"Process.read_line", []string{`Process.read_line(stream="stdout", timeout=None) -> string or None`, "passes before a whole line arrives, read_line fails"}},
		{"Result.stages", []string{"Result.stages -> list of struct(exit_code, stderr)"}},
		{"Host", []string{"Methods and modules: extract_tar, files, git, pipeline, reattach, run, sdk, sh, spawn"}},
		{"Host.run", []string{"Host.run: run, acting on the host.", "run(cmd, args=[], *, cwd=None"}},
		{"sdk", []string{`sdk.session(*, cwd=None, model=None, permission_mode=None, system_prompt=None, append_system_prompt=None, allowed_tools=[], disallowed_tools=[], max_turns=None, policy=None, transport="stdio", cli="claude", env=None, resume=None, fork=False, timeout=None) -> Session`, "sdk.send(prompt, **session_kwargs) -> Turn"}},
		{"Turn", []string{"Turn.denials -> list of struct(tool, tool_use_id, input)", "Turn.messages -> list of dicts"}},
		{"approvals", []string{"approvals(policy)", "Sets the recipe-wide approver"}},
		{"Request.kind", []string{"Request.kind -> string", `"privileged"`}},
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
	// Shell completion of NAME (what the completion scripts ask for).
	o := sous(t, "__complete", "doc", "files.re")
	if o.code != 0 || !strings.HasPrefix(o.stdout, "files.read\n:4\n") {
		t.Errorf("completion of sous doc files.re: exit %d, %q", o.code, o.stdout)
	}
}

func TestEveryCommandHasHelpWithAnExample(t *testing.T) {
	t.Parallel()
	root := newRootCmd(&IO{})
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
