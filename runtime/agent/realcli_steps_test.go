package agent

import (
	"context"
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/seed5ad92d46/sous/internal/claudecli"
	"github.com/seed5ad92d46/sous/runtime/agent/fakemodel"
)

// The tests of a session as a programmable step: structured output, hooks
// and a budget, with the real CLI (both versions) against the scripted
// model.

// TestStructuredOutput: with an output schema the CLI offers the model a
// StructuredOutput tool; an invalid payload comes back to the model as an
// error tool result (the CLI validates it), the retry is accepted, and the
// value reaches Turn.StructuredOutput.
func TestStructuredOutput(t *testing.T) {
	for _, version := range []string{claudecli.WebSocket, claudecli.Latest} {
		t.Run(version, func(t *testing.T) {
			t.Parallel()
			w := newWorld(t, version, fakemodel.Options{Func: func(req *fakemodel.Request, n int) fakemodel.Reply {
				switch n {
				case 0:
					return fakemodel.ToolUse("StructuredOutput", map[string]any{"name": 3})
				case 1:
					return fakemodel.ToolUse("StructuredOutput", map[string]any{"name": "bob", "tags": []any{"a", "b"}})
				}
				return fakemodel.Text("done")
			}})
			schema := map[string]any{
				"type":       "object",
				"properties": map[string]any{"name": map[string]any{"type": "string"}, "tags": map[string]any{"type": "array", "items": map[string]any{"type": "string"}}},
				"required":   []any{"name"},
			}
			s := w.start(embedded(t), TransportStdio, Options{OutputSchema: schema})
			turn := send(t, s, "describe bob")
			if !turn.OK() || turn.Subtype != "success" {
				t.Errorf("turn %s (is_error %v), want success", turn.Subtype, turn.IsError)
			}
			var got map[string]any
			if err := json.Unmarshal(turn.StructuredOutput, &got); err != nil || got["name"] != "bob" || len(got["tags"].([]any)) != 2 {
				t.Errorf("structured output %s (%v), want bob with two tags", turn.StructuredOutput, err)
			}
			reqs := w.api.Scripted()
			if len(reqs) < 2 {
				t.Fatalf("the model got %d requests, want at least 2", len(reqs))
			}
			if !strings.Contains(string(reqs[0].Body), `"name":"StructuredOutput"`) {
				t.Error("the model was not offered the StructuredOutput tool")
			}
			trs := reqs[1].ToolResults()
			if len(trs) != 1 || !trs[0].IsError || !strings.Contains(trs[0].Content, "schema") {
				t.Errorf("the invalid payload came back to the model as %+v, want an error naming the schema", trs)
			}
		})
	}
}

// TestNoStructuredOutput: without a schema a turn has none.
func TestNoStructuredOutput(t *testing.T) {
	t.Parallel()
	w := newWorld(t, claudecli.Latest, fakemodel.Options{Script: []fakemodel.Reply{fakemodel.Text("plain")}})
	s := w.start(embedded(t), TransportStdio, Options{})
	if turn := send(t, s, "hi"); turn.StructuredOutput != nil || turn.Text != "plain" {
		t.Errorf("turn text %q structured %s, want plain text and no structured output", turn.Text, turn.StructuredOutput)
	}
}

// hookLog records hook calls in the order they ran.
type hookLog struct {
	mu    sync.Mutex
	calls []HookCall
}

func (l *hookLog) add(c HookCall) {
	l.mu.Lock()
	l.calls = append(l.calls, c)
	l.mu.Unlock()
}

func (l *hookLog) events() []string {
	l.mu.Lock()
	defer l.mu.Unlock()
	var out []string
	for _, c := range l.calls {
		var in struct {
			Event string `json:"hook_event_name"`
			Tool  string `json:"tool_name"`
		}
		json.Unmarshal(c.Input, &in)
		if in.Event != c.Event {
			out = append(out, "MISMATCH "+c.Event+"/"+in.Event)
		}
		out = append(out, strings.TrimSuffix(c.Event+" "+in.Tool, " "))
	}
	return out
}

// hookInput decodes the fields of a hook input the tests look at.
func hookInput(c HookCall) (tool string, input map[string]any) {
	var in struct {
		Tool  string         `json:"tool_name"`
		Input map[string]any `json:"tool_input"`
	}
	json.Unmarshal(c.Input, &in)
	return in.Tool, in.Input
}

// TestHooks drives a session whose hooks decide instead of the permission
// callback, over two turns (the CLI's stdin stays open, so the second
// turn's hooks are answered as the first's): a PreToolUse hook denies a
// Bash (the model sees its reason) and rewrites a Write's input (the file
// has the hook's content); a PostToolUse hook with the matcher "Write"
// adds context the next model request carries, and is not called for the
// second turn's Read; UserPromptSubmit and Stop fire first and last.
func TestHooks(t *testing.T) {
	for _, tc := range cliCases {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			var w *world
			out := func() string { return filepath.Join(w.work, "out.txt") }
			w = newWorld(t, tc.version, fakemodel.Options{Func: func(req *fakemodel.Request, n int) fakemodel.Reply {
				switch n {
				case 0:
					return fakemodel.ToolUse("Bash", map[string]any{"command": "rm -rf " + filepath.Join(w.work, "precious")})
				case 1:
					return fakemodel.ToolUse("Write", map[string]any{"file_path": out(), "content": "the model's\n"})
				case 2:
					return fakemodel.Text("first done")
				case 3:
					return fakemodel.ToolUse("Read", map[string]any{"file_path": out()})
				}
				return fakemodel.Text("second done")
			}})
			all, writes := &hookLog{}, &hookLog{}
			record := func(reply func(HookCall) map[string]any) Hook {
				return Hook{Func: func(ctx context.Context, c HookCall) (map[string]any, error) {
					all.add(c)
					if reply == nil {
						return nil, nil
					}
					return reply(c), nil
				}}
			}
			pre := record(func(c HookCall) map[string]any {
				tool, in := hookInput(c)
				switch tool {
				case "Bash":
					return map[string]any{"hookSpecificOutput": map[string]any{
						"hookEventName": "PreToolUse", "permissionDecision": "deny", "permissionDecisionReason": "sous test: the hook says no"}}
				case "Write":
					in["content"] = "the hook's\n"
					return map[string]any{"hookSpecificOutput": map[string]any{
						"hookEventName": "PreToolUse", "permissionDecision": "allow", "updatedInput": in}}
				}
				return nil
			})
			// Only one PreToolUse hook: with two on one tool use, 2.1.81
			// drops the reason of a deny and the updatedInput of an allow
			// when the other answers {}.
			onlyWrites := Hook{Matcher: "Write", Func: func(ctx context.Context, c HookCall) (map[string]any, error) {
				writes.add(c)
				return map[string]any{"hookSpecificOutput": map[string]any{
					"hookEventName": "PostToolUse", "additionalContext": "sous test: context from the hook"}}, nil
			}}
			var initMsg string
			s := w.start(embedded(t), tc.transport, Options{
				Hooks: map[string][]Hook{
					"PreToolUse":       {pre},
					"PostToolUse":      {record(nil), onlyWrites},
					"UserPromptSubmit": {record(nil)},
					"Stop":             {record(nil)},
				},
				Permission: func(context.Context, Request) (Decision, error) { return Allow(nil), nil },
				Observer: func(e Event) {
					if e.Dir == Out && initMsg == "" && strings.Contains(string(e.Message), `"initialize"`) {
						initMsg = string(e.Message)
					}
				},
			})
			first := send(t, s, "do things")
			second := send(t, s, "again")
			if first.Text != "first done" || second.Text != "second done" {
				t.Errorf("turn texts %q, %q", first.Text, second.Text)
			}
			if got := readFile(t, out()); got != "the hook's\n" {
				t.Errorf("out.txt = %q: the hook's updatedInput was not used", got)
			}
			reqs := w.api.Scripted()
			if len(reqs) != 5 {
				t.Fatalf("the model got %d requests, want 5", len(reqs))
			}
			if trs := reqs[1].ToolResults(); len(trs) != 1 || !trs[0].IsError || !strings.Contains(trs[0].Content, "sous test: the hook says no") {
				t.Errorf("the denied Bash came back to the model as %+v, want an error with the hook's reason", trs)
			}
			if !strings.Contains(string(reqs[2].Body), "sous test: context from the hook") {
				t.Error("the request after the Write lacks the PostToolUse hook's additional context")
			}
			want := "UserPromptSubmit,PreToolUse Bash,PreToolUse Write,PostToolUse Write,Stop," +
				"UserPromptSubmit,PreToolUse Read,PostToolUse Read,Stop"
			if got := strings.Join(all.events(), ","); got != want {
				t.Errorf("hooks ran as %s, want %s", got, want)
			}
			if got := strings.Join(writes.events(), ","); got != "PostToolUse Write" {
				t.Errorf("the hook with matcher Write ran for %s", got)
			}
			for i, c := range all.calls {
				if c.Seq == 0 || c.SessionID != s.ID() || c.RequestID == "" {
					t.Errorf("hook call %d: %+v lacks a seq, the session id or the request id", i, c)
				}
				if tool, _ := hookInput(c); tool != "" && !strings.HasPrefix(c.ToolUseID, "toolu_") {
					t.Errorf("hook call %d for %s has tool use id %q", i, tool, c.ToolUseID)
				}
			}
			if !strings.Contains(initMsg, `"matcher":"Write"`) || !strings.Contains(initMsg, `"hookCallbackIds"`) {
				t.Errorf("initialize %s does not register the hooks", initMsg)
			}
		})
	}
}

// TestSubagentStop: a Task tool use runs a subagent; its end fires
// SubagentStop before the main turn's Stop, on both versions. The current
// CLI runs subagents in the background unless the tool use says
// run_in_background false (2.1.81 has no such field), so the script asks
// for a foreground one there, as a model whose next step needs the
// subagent's answer does.
func TestSubagentStop(t *testing.T) {
	for _, version := range []string{claudecli.WebSocket, claudecli.Latest} {
		t.Run(version, func(t *testing.T) {
			t.Parallel()
			task := map[string]any{"description": "look around", "prompt": "look around", "subagent_type": "general-purpose"}
			if version == claudecli.Latest {
				task["run_in_background"] = false
			}
			w := newWorld(t, version, fakemodel.Options{Script: []fakemodel.Reply{
				fakemodel.ToolUse("Task", task),
				fakemodel.Text("the subagent is done"),
				fakemodel.Text("all done"),
			}})
			log := &hookLog{}
			rec := Hook{Func: func(ctx context.Context, c HookCall) (map[string]any, error) {
				log.add(c)
				return nil, nil
			}}
			s := w.start(embedded(t), TransportStdio, Options{Hooks: map[string][]Hook{"SubagentStop": {rec}, "Stop": {rec}}})
			if turn := send(t, s, "delegate"); turn.Text != "all done" {
				t.Errorf("turn text %q", turn.Text)
			}
			if got := strings.Join(log.events(), ","); got != "SubagentStop,Stop" {
				t.Errorf("hooks ran as %s, want SubagentStop,Stop", got)
			}
			if tr := w.api.Scripted()[2].ToolResults(); len(tr) != 1 || !strings.Contains(tr[0].Content, "the subagent is done") {
				t.Errorf("the main agent got %+v for the Task, want the subagent's answer", tr)
			}
		})
	}
}

// TestHookFailure: a hook whose callback fails denies the tool (the model
// sees why), and Send returns the error with the Turn; the session goes on.
func TestHookFailure(t *testing.T) {
	t.Parallel()
	var w *world
	w = newWorld(t, claudecli.Latest, fakemodel.Options{Func: func(req *fakemodel.Request, n int) fakemodel.Reply {
		if n == 0 {
			return fakemodel.ToolUse("Write", map[string]any{"file_path": filepath.Join(w.work, "x.txt"), "content": "x"})
		}
		return fakemodel.Text("gave up")
	}})
	boom := errors.New("sous test: the hook exploded")
	s := w.start(embedded(t), TransportStdio, Options{
		Hooks:      map[string][]Hook{"PreToolUse": {{Func: func(context.Context, HookCall) (map[string]any, error) { return nil, boom }}}},
		Permission: func(context.Context, Request) (Decision, error) { return Allow(nil), nil },
	})
	ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
	defer cancel()
	turn, err := s.Send(ctx, "write x")
	if !errors.Is(err, boom) || !strings.Contains(err.Error(), "PreToolUse hook") {
		t.Fatalf("send: %v, want the hook's error naming the event", err)
	}
	if turn == nil {
		t.Fatal("no turn with the error")
	}
	trs := w.api.Scripted()
	found := false
	for _, m := range turn.Messages {
		if strings.Contains(string(m), `"tool_result"`) && strings.Contains(string(m), "sous test: the hook exploded") {
			found = true
		}
	}
	if !found {
		t.Errorf("no tool result carrying the hook's error among the turn's %d messages (%d model requests)", len(turn.Messages), len(trs))
	}
	if _, err := os.Stat(filepath.Join(w.work, "x.txt")); err == nil {
		t.Error("the Write ran although its hook failed")
	}
	if next := send(t, s, "again"); next.Text != "gave up" {
		t.Errorf("after the failure: %q", next.Text)
	}
}

// TestHookTimeout: a hook that takes longer than its timeout is withdrawn
// by the CLI (control_cancel_request): its ctx ends, its late answer is
// never sent, and the turn goes on.
func TestHookTimeout(t *testing.T) {
	t.Parallel()
	w := newWorld(t, claudecli.WebSocket, fakemodel.Options{Script: []fakemodel.Reply{fakemodel.Text("went on")}})
	cancelled := make(chan time.Duration, 1)
	s := w.start(embedded(t), TransportStdio, Options{Hooks: map[string][]Hook{"UserPromptSubmit": {{
		Timeout: time.Second,
		Func: func(ctx context.Context, c HookCall) (map[string]any, error) {
			start := time.Now()
			select {
			case <-ctx.Done():
				cancelled <- time.Since(start)
			case <-time.After(30 * time.Second):
				cancelled <- -1
			}
			return map[string]any{"decision": "block", "reason": "too late to count"}, nil
		},
	}}}})
	turn := send(t, s, "hi")
	if d := <-cancelled; d < 0 || d > 15*time.Second {
		t.Errorf("the hook's ctx ended after %s, want about its 1 s timeout", d)
	}
	if turn.Text != "went on" {
		t.Errorf("turn text %q: the late block answer was sent or the turn stopped", turn.Text)
	}
}

// TestMaxBudget: with a budget below two model requests' cost the turn
// stops after the second with error_max_budget_usd, and is not OK on
// either version (2.1.81 sends is_error false). The CLI prices the
// scripted usage: 1000 input and 5 output tokens of claude-sonnet-4-6 cost
// $0.003075 a request.
func TestMaxBudget(t *testing.T) {
	for _, version := range []string{claudecli.WebSocket, claudecli.Latest} {
		t.Run(version, func(t *testing.T) {
			t.Parallel()
			w := newWorld(t, version, fakemodel.Options{Func: func(req *fakemodel.Request, n int) fakemodel.Reply {
				r := fakemodel.ToolUse("Bash", map[string]any{"command": "echo round " + string(rune('0'+n))})
				r.InputTokens = 1000
				return r
			}})
			s := w.start(embedded(t), TransportStdio, Options{
				Model: "claude-sonnet-4-6", MaxBudgetUSD: 0.0045,
				Permission: func(context.Context, Request) (Decision, error) { return Allow(nil), nil },
			})
			turn := send(t, s, "spend")
			if turn.Subtype != "error_max_budget_usd" || turn.OK() {
				t.Errorf("turn %s ok %v (is_error %v), want error_max_budget_usd and not ok", turn.Subtype, turn.OK(), turn.IsError)
			}
			if n := len(w.api.Scripted()); n != 2 {
				t.Errorf("the model got %d requests, want 2", n)
			}
			if turn.CostUSD < 0.0045 {
				t.Errorf("cost %v, want past the budget", turn.CostUSD)
			}
		})
	}
}
