package builtins

import (
	"strings"
	"testing"
)

// TestStepArgumentsChecked: hook() and the sdk.session keywords output_schema,
// hooks and max_budget_usd refuse what they cannot use with an error naming
// the argument, before anything reaches the daemon (no CLI starts).
func TestStepArgumentsChecked(t *testing.T) {
	t.Parallel()
	events := "want one of PreToolUse, PostToolUse, UserPromptSubmit, Stop, SubagentStop, PreCompact, Notification"
	tests := []struct{ src, want string }{
		{`hook(1)`, "hook: fn: want a function, got int"},
		{`hook(print, matcher=1)`, "hook: matcher: want string, got int"},
		{`hook(print, timeout="5")`, "hook: timeout: want seconds (int or float), got string"},
		{`hook(print, timeout=0)`, "hook: timeout: want more than 0 seconds"},
		{`hook(print, 1)`, "hook: got 2 positional arguments, want at most 1"},
		{`sdk.session(hooks=[hook(print)])`, "sdk.session: hooks: want dict (event name: list of hook(...)) or None, got list"},
		{`sdk.session(hooks={"SessionStart": [hook(print)]})`,
			`sdk.session: hooks: "SessionStart" is not available to session hooks (they see the turns, not the CLI's start and end); ` + events},
		{`sdk.session(hooks={"SessionEnd": [hook(print)]})`, `sdk.session: hooks: "SessionEnd" is not available to session hooks`},
		{`sdk.session(hooks={"PreToolUsed": [hook(print)]})`, `sdk.session: hooks: unknown event "PreToolUsed"; ` + events},
		{`sdk.session(hooks={1: [hook(print)]})`, "sdk.session: hooks key 1: want string (an event name), got int"},
		{`sdk.session(hooks={"Stop": hook(print)})`, `sdk.session: hooks["Stop"]: want list of hook(...), got HookDef`},
		{`sdk.session(hooks={"Stop": [print]})`, `sdk.session: hooks["Stop"][0]: want hook(...), got builtin_function_or_method`},
		{`sdk.send("hi", hooks={"Stop": [hook(print), 2]})`, `sdk.send: hooks["Stop"][1]: want hook(...), got int`},
		{`sdk.session(output_schema="object")`, "sdk.session: output_schema: want dict (a JSON Schema) or None, got string"},
		{`sdk.session(output_schema={"type": "object", "properties": {"x": print}})`,
			`sdk.session: output_schema["properties"]["x"]: want a JSON value (dict, list, string, number, bool or None), got builtin_function_or_method`},
		{`sdk.session(max_budget_usd=0)`, "sdk.session: max_budget_usd: want more than 0 dollars, got 0"},
		{`sdk.session(max_budget_usd=-0.5)`, "sdk.session: max_budget_usd: want more than 0 dollars, got -0.5"},
		{`sdk.session(max_budget_usd="1")`, "sdk.session: max_budget_usd: want dollars (int or float) or None, got string"},
	}
	for _, tt := range tests {
		t.Run(tt.src, func(t *testing.T) {
			t.Parallel()
			f := newFixture(t)
			f.run(tt.src+"\n").expect(t, 1, "main.star:1:", "Error in "+strings.SplitN(tt.src, "(", 2)[0]+": "+tt.want)
			if sent := f.daemon.sent(); len(sent) > 0 {
				t.Errorf("reached the daemon: %q", sent)
			}
		})
	}
}

// TestHookDefValue: hook() values print what they hold and cannot be
// dict keys.
func TestHookDefValue(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	r := f.run(`
def guard(input):
    return None
print(hook(guard), hook(guard, matcher="Write|Edit", timeout=2.5), type(hook(guard)))
{hook(guard): 1}
`)
	r.expect(t, 1, `<hook guard> <hook guard matcher="Write|Edit" timeout=2.5s> HookDef`, "unhashable type: HookDef")
}
