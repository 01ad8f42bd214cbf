package agent

import (
	"context"
	"encoding/json"
	"math"
	"strings"
	"testing"
	"time"
)

func TestStepOptionsChecked(t *testing.T) {
	nop := func(context.Context, HookCall) (map[string]any, error) { return nil, nil }
	for _, tc := range []struct {
		name string
		opt  Options
		err  string
	}{
		{"unknown event", Options{Hooks: map[string][]Hook{"PreToolUsed": {{Func: nop}}}},
			`agent: hooks: unknown event "PreToolUsed"; want one of PreToolUse, PostToolUse, UserPromptSubmit, Stop, SubagentStop, PreCompact, Notification`},
		{"session start", Options{Hooks: map[string][]Hook{"SessionStart": {{Func: nop}}}},
			`agent: hooks: "SessionStart" is not available to session hooks`},
		{"session end", Options{Hooks: map[string][]Hook{"SessionEnd": {{Func: nop}}}}, `agent: hooks: "SessionEnd" is not available`},
		{"no func", Options{Hooks: map[string][]Hook{"Stop": {{Func: nop}, {}}}}, "agent: hooks: Stop[1]: no function"},
		{"negative timeout", Options{Hooks: map[string][]Hook{"Stop": {{Func: nop, Timeout: -time.Second}}}}, "agent: hooks: Stop[0]: negative timeout -1s"},
		{"negative budget", Options{MaxBudgetUSD: -1}, "agent: max budget -1: want a positive number of dollars"},
		{"infinite budget", Options{MaxBudgetUSD: math.Inf(1)}, "agent: max budget +Inf"},
		{"schema not JSON", Options{OutputSchema: map[string]any{"x": func() {}}}, "agent: output schema: json: unsupported type"},
	} {
		_, err := tc.opt.prepare(true)
		if err == nil || !strings.HasPrefix(err.Error(), tc.err) {
			t.Errorf("%s: %v, want %s", tc.name, err, tc.err)
		}
	}
}

// The command line and initialize carry the steps' options as the CLI
// wants them, hooks in a stable order with one callback id each.
func TestStepOptionsOnTheWire(t *testing.T) {
	nop := func(context.Context, HookCall) (map[string]any, error) { return nil, nil }
	opt, err := Options{
		OutputSchema: map[string]any{"type": "object"},
		MaxBudgetUSD: 0.25,
		Hooks: map[string][]Hook{
			"Stop":       {{Func: nop}},
			"PreToolUse": {{Func: nop, Matcher: "Bash", Timeout: 1500 * time.Millisecond}, {Func: nop}},
		},
	}.prepare(true)
	if err != nil {
		t.Fatal(err)
	}
	args := strings.Join(buildArgs(opt), " ")
	if !strings.Contains(args, ` --json-schema {"type":"object"} `) || !strings.Contains(args, " --max-budget-usd 0.25 ") {
		t.Errorf("command line %s lacks the schema or the budget", args)
	}
	reg := registerHooks(opt.Hooks)
	b, _ := json.Marshal(initializeRequest(opt, reg.config))
	want := `{"hooks":{"PreToolUse":[{"hookCallbackIds":["hook_0"],"matcher":"Bash","timeout":1.5},{"hookCallbackIds":["hook_1"]}],` +
		`"Stop":[{"hookCallbackIds":["hook_2"]}]}}`
	if string(b) != want {
		t.Errorf("initialize %s, want %s", b, want)
	}
	if reg.byID["hook_2"].event != "Stop" || reg.byID["hook_0"].hook.Matcher != "Bash" {
		t.Errorf("callbacks by id: %+v", reg.byID)
	}
	if b, _ := json.Marshal(initializeRequest(opt, registerHooks(nil).config)); string(b) != "{}" {
		t.Errorf("initialize without hooks: %s", b)
	}
}
