package builtins

import (
	"strconv"
	"strings"
	"testing"

	"go.starlark.net/starlark"

	"github.com/seed5ad92d46/sous/runtime"
	"github.com/seed5ad92d46/sous/runtime/event"
)

// TestDefaultTableIsConsistent checks the invariants `sous doc` and the
// runtime rely on, for every entry of this build.
func TestDefaultTableIsConsistent(t *testing.T) {
	t.Parallel()
	tab := DefaultTable()
	for _, e := range tab.Entries() {
		owner, short := e.Owner()
		if !strings.HasPrefix(e.Sig, e.Name) {
			t.Errorf("%s: signature %q does not start with the name", e.Name, e.Sig)
		}
		switch {
		case owner != "" && runtime.IsType(owner):
			if e.Fn == nil && e.Attr == nil {
				t.Errorf("%s: a type member needs Fn or Attr", e.Name)
			}
		case owner != "":
			if e.Fn == nil {
				t.Errorf("%s: a module member needs Fn", e.Name)
			}
		case runtime.IsType(e.Name), len(tab.Members(e.Name)) > 0, e.Fn != nil, e.Value != nil:
		default:
			// Documentation only: it must be Starlark's own.
			if !starlark.Universe.Has(short) && short != "load" {
				t.Errorf("%s: documented but neither registered nor Starlark's own", e.Name)
			}
		}
		if e.Host && owner == "" && !tab.IsPredeclared(e.Name) {
			t.Errorf("%s: host-bound but not a global", e.Name)
		}
	}
}

// TestContractNames pins the names RECIPES.md promises for this build.
func TestContractNames(t *testing.T) {
	t.Parallel()
	tab := DefaultTable()
	for _, name := range []string{
		"args", "getenv", "sleep", "json", "time", "struct", "spawn", "reattach", "run", "sh", "pipeline",
		"wait_all", "host", "files", "git", "extract_tar", "sdk", "approve", "deny", "permissions", "approvals",
		"hook", "agent",
	} {
		if !tab.IsPredeclared(name) {
			t.Errorf("%s is not predeclared", name)
		}
	}
	for _, name := range []string{
		"files.stat", "files.list", "files.read", "files.validate",
		"git.info", "git.status", "git.branches", "git.worktree_create", "git.worktree_remove",
		"Process.id", "Process.pid", "Process.running", "Process.exit_code", "Process.write", "Process.close_stdin",
		"Process.wait", "Process.kill", "Process.pause", "Process.resume", "Process.stop", "Process.lines",
		"Process.output", "Process.resize",
		"Result.status", "Result.exit_code", "Result.ok", "Result.stdout", "Result.stderr", "Result.stdout_truncated",
		"Result.stderr_truncated", "Result.stages", "Result.duration",
		"sdk.session", "sdk.send",
		"Session.id", "Session.send", "Session.start", "Session.interrupt", "Session.set_model",
		"Session.set_permission_mode", "Session.close", "Pending.wait",
		"Turn.text", "Turn.ok", "Turn.subtype", "Turn.cost_usd", "Turn.num_turns", "Turn.duration_ms", "Turn.session_id",
		"Turn.usage", "Turn.denials", "Turn.messages", "Turn.structured_output",
		"Request.kind", "Request.tool", "Request.input", "Request.tool_use_id", "Request.description", "Request.session_id",
	} {
		if _, ok := tab.Lookup(name); !ok {
			t.Errorf("%s is missing", name)
		}
	}
	want := "dotenv extract_tar files git pipeline reattach run sdk sh spawn"
	if got := strings.Join(tab.HostNames(), " "); got != want {
		t.Errorf("Host attributes = %s, want %s", got, want)
	}
}

// TestSecretsDocFigures: the figures written out in secretsDoc and
// redact's Doc are event.MinSecret's.
func TestSecretsDocFigures(t *testing.T) {
	if minSecretText != strconv.Itoa(event.MinSecret) || maxShortSecretText != strconv.Itoa(event.MinSecret-1) {
		t.Errorf("minSecretText %q, maxShortSecretText %q; event.MinSecret is %d", minSecretText, maxShortSecretText, event.MinSecret)
	}
	e, ok := DefaultTable().Lookup("redact")
	if !ok || !strings.Contains(e.Doc, "shorter than "+strconv.Itoa(event.MinSecret)+" bytes") ||
		!strings.Contains(e.Doc, "1 to "+strconv.Itoa(event.MinSecret-1)+" bytes fails") {
		t.Errorf("redact's Doc: %q", e.Doc)
	}
}
