package builtins

// Privileged commands: run(..., privileged=True, reason=...) asks the
// approvers (a Request of kind "privileged", tool "Sudo") before anything
// starts. Approved, the command runs under `sudo -n`, or directly where the
// host's user is already root; denied, it never starts and its Result has
// status "denied".

import (
	"encoding/json"
	"fmt"

	"github.com/seed5ad92d46/sous/runtime"
	"github.com/seed5ad92d46/sous/runtime/rules"
)

// authorize asks the approvers about a privileged command. It returns a
// "denied" Result when they refuse; otherwise the command to run: argv, or
// what an approver put in its place (approve(input={"command": [...]})).
// A command that is not privileged is not asked about. A policy that fails
// aborts the recipe with its error.
func (o *runOptions) authorize(c *runtime.Call, argv []string) ([]string, *Result, error) {
	if !o.privileged {
		return argv, nil, nil
	}
	ans, err := approvePrivileged(c.Env, c.Thread, argv, o.reason)
	if err != nil {
		return nil, nil, err
	}
	if ans.Allow {
		if ans.Input == nil {
			return argv, nil, nil
		}
		// RECIPES.md: approve(input=...) replaces the tool input, here
		// {"command": [...], "reason": ...}.
		repl, ok := rules.Argv(ans.Input)
		if !ok || len(repl) == 0 || repl[0] == "" {
			return nil, nil, c.Errorf("the approver's input: command: want a non-empty list of strings, got %s", describeInput(ans.Input["command"]))
		}
		return repl, nil, nil
	}
	// The command never ran: no exit code of its own. -1 keeps exit_code
	// an int (as for a signal) while status says what happened.
	msg := ans.Message + "\n"
	return argv, &Result{env: c.Env, status: StatusDenied, exitCode: -1, stderr: msg,
		stages: []Stage{{ExitCode: -1, Stderr: msg}}}, nil
}

// describeInput names a value of an approver's input for a message.
func describeInput(v any) string {
	if v == nil {
		return "nothing"
	}
	b, err := json.Marshal(v)
	if err != nil {
		return fmt.Sprintf("%T", v)
	}
	return string(b)
}

// asRoot wraps argv so the host decides how to gain root: directly when its
// user already is root, else through `sudo -n` (never prompting: a sudo that
// needs a password fails at once with its own message). The check runs on
// the daemon's host, which is where the command runs.
func asRoot(argv []string) []string {
	script := `if [ "$(id -u)" = 0 ]; then exec "$@"; fi; exec sudo -n -- "$@"`
	return append([]string{"sh", "-c", script, "sous-privileged"}, argv...)
}
