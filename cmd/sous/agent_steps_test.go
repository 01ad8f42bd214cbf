package main

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/seed5ad92d46/sous/internal/claudecli"
	"github.com/seed5ad92d46/sous/runtime/agent/fakemodel"
)

// Agents as programmable steps, through sous run with the real CLI (both
// versions): hooks, output_schema and max_budget_usd. Everything the CLI
// asks of the recipe arrives while the recipe is blocked in send, and is
// answered there.

// TestAgentHooks: a PreToolUse hook denies a Bash (the model sees its
// reason) and replaces a Write's input (the file has the hook's content); a
// PostToolUse hook with the matcher "Write" adds context the next model
// request carries; UserPromptSubmit and Stop fire first and last; each
// hook answer is a line on stderr.
func TestAgentHooks(t *testing.T) {
	t.Parallel()
	for _, version := range []string{claudecli.WebSocket, claudecli.Latest} {
		t.Run(version, func(t *testing.T) {
			t.Parallel()
			var w *agentWorld
			w = newAgentWorld(t, version, fakemodel.Options{Func: func(req *fakemodel.Request, n int) fakemodel.Reply {
				switch n {
				case 0:
					return fakemodel.Reply{Blocks: []fakemodel.Block{{Type: "tool_use", ID: "toolu_bash", Name: "Bash",
						Input: map[string]any{"command": "rm -rf " + filepath.Join(w.dir, "precious")}}}}
				case 1:
					return fakemodel.Reply{Blocks: []fakemodel.Block{{Type: "tool_use", ID: "toolu_write", Name: "Write",
						Input: map[string]any{"file_path": filepath.Join(w.dir, "out.txt"), "content": "the model's\n"}}}}
				}
				return fakemodel.Text("all done")
			}})
			o := w.run(`
seen = []

def pre(input):
    seen.append("%s %s" % (input["hook_event_name"], input["tool_name"]))
    if input["tool_name"] == "Bash":
        return {"hookSpecificOutput": {"hookEventName": "PreToolUse", "permissionDecision": "deny",
                                       "permissionDecisionReason": "sous test: no shell for you"}}
    inp = dict(input["tool_input"])
    inp["content"] = "the hook's\n"
    return {"hookSpecificOutput": {"hookEventName": "PreToolUse", "permissionDecision": "allow", "updatedInput": inp}}

def post(input):
    sleep(0.05)  # a hook may wait too: the turn waits for it
    seen.append("%s %s" % (input["hook_event_name"], input["tool_name"]))
    return {"hookSpecificOutput": {"hookEventName": "PostToolUse", "additionalContext": "sous test: the hook was here"}}

def note(input):
    seen.append(input["hook_event_name"])
    if input["hook_event_name"] == "UserPromptSubmit":
        seen.append("prompt " + input["prompt"])

s = sdk.session(cwd = args["dir"], cli = json.decode(args["cli"]), hooks = {
    "PreToolUse": [hook(pre, timeout = 30)],
    "PostToolUse": [hook(post, matcher = "Write")],
    "UserPromptSubmit": [hook(note)],
    "Stop": [hook(note)],
})
t = s.send("tidy up")
print("turn:", t.ok, t.subtype, t.text, t.structured_output)
print("seen:", seen)
`)
			o.expect(t, 0,
				"turn: True success all done None",
				`seen: ["UserPromptSubmit", "prompt tidy up", "PreToolUse Bash", "PreToolUse Write", "PostToolUse Write", "Stop"]`,
				"hook: PreToolUse deny Bash rm -rf "+filepath.Join(w.dir, "precious")+" (sous test: no shell for you) [session ",
				"hook: PreToolUse allow Write "+filepath.Join(w.dir, "out.txt")+" (input replaced) [session ",
				"hook: PostToolUse context Write "+filepath.Join(w.dir, "out.txt")+" (context: sous test: the hook was here) [session ",
			)
			if n := len(o.stderrLines("hook: ")); n != 3 {
				t.Errorf("%d hook lines on stderr, want 3 (hooks without an opinion say nothing):\n%s", n, o.stderr)
			}
			if got := w.readFile(filepath.Join(w.dir, "out.txt")); got != "the hook's\n" {
				t.Errorf("out.txt = %q: the hook's updatedInput was not used", got)
			}
			if tr, ok := w.toolResult("toolu_bash"); !ok || !tr.IsError || !strings.Contains(tr.Content, "sous test: no shell for you") {
				t.Errorf("the model got %+v (found %v) for the denied Bash, want an error with the hook's reason", tr, ok)
			}
			reqs := w.api.Scripted()
			if len(reqs) != 3 {
				t.Fatalf("the model got %d requests, want 3", len(reqs))
			}
			if !strings.Contains(string(reqs[2].Body), "sous test: the hook was here") {
				t.Error("the request after the Write lacks the PostToolUse hook's additional context")
			}
		})
	}
}

// TestAgentHookFailures: a hook that raises, returns something that is not
// a dict, or waits for a turn, or changes its (frozen) input fails the
// recipe with its traceback, and the tool it guarded does not run.
func TestAgentHookFailures(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name, hook string
		want       []string
	}{
		{"raises", "def guard(input):\n    return check(input)\n\ndef check(input):\n    fail(\"guard exploded on \" + input[\"tool_name\"])\n",
			[]string{"main.star:8:7: in <toplevel>", "main.star:2:17: in guard", "main.star:5:9: in check",
				"Error in fail: fail: guard exploded on Write"}},
		{"mutates its frozen input", "def guard(input):\n    input[\"tool_name\"] = \"Read\"\n\n\n\n",
			[]string{"main.star:8:7: in <toplevel>", "main.star:2:10: in guard", "cannot insert into frozen hash table"}},
		{"returns no dict", "def guard(input):\n    return \"deny\"\n\n\n\n",
			[]string{"main.star:8:7: in <toplevel>", "Error in Session.send: hook guard (", "main.star:1:1) returned string: want a dict (the hook's JSON output) or None"}},
		{"returns no JSON", "def guard(input):\n    return {\"reason\": guard}\n\n\n\n",
			[]string{"hook guard (", `returned a dict that is not JSON: ["reason"]: want a JSON value (dict, list, string, number, bool or None), got function`}},
		{"waits for a turn", "def guard(input):\n    return s.send(\"nested\")\n\n\n\n",
			[]string{"main.star:8:7: in <toplevel>", "main.star:2:18: in guard",
				"Error in Session.send: Session.send: a policy or hook cannot wait for an agent's turn"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			var w *agentWorld
			w = newAgentWorld(t, claudecli.Latest, fakemodel.Options{Func: func(req *fakemodel.Request, n int) fakemodel.Reply {
				if toolTurn(req) == 0 {
					return fakemodel.ToolUse("Write", map[string]any{"file_path": filepath.Join(w.dir, "out.txt"), "content": "x\n"})
				}
				return fakemodel.Text("done")
			}})
			// Lines 1-5 are the hook; the send is on line 8.
			o := w.run(tt.hook + `
s = sdk.session(cwd = args["dir"], cli = json.decode(args["cli"]), hooks = {"PreToolUse": [hook(guard)]}, policy = lambda req: approve())
s.send("write it")
print("not reached")
`)
			o.expect(t, 1, tt.want...)
			if strings.Contains(o.stderr, "not reached") {
				t.Error("the recipe went on")
			}
			if _, err := os.Stat(filepath.Join(w.dir, "out.txt")); err == nil {
				t.Error("the Write ran although its hook failed")
			}
		})
	}
}

// TestAgentStructuredOutput: output_schema through sdk.send, on both
// versions: the model's first payload breaks the schema and comes back to
// it as an error tool result; the retry is the turn's structured_output.
func TestAgentStructuredOutput(t *testing.T) {
	t.Parallel()
	for _, version := range []string{claudecli.WebSocket, claudecli.Latest} {
		t.Run(version, func(t *testing.T) {
			t.Parallel()
			w := newAgentWorld(t, version, fakemodel.Options{Func: func(req *fakemodel.Request, n int) fakemodel.Reply {
				switch n {
				case 0:
					return fakemodel.Reply{Blocks: []fakemodel.Block{{Type: "tool_use", ID: "toolu_bad", Name: "StructuredOutput",
						Input: map[string]any{"verdict": "maybe", "score": 3}}}}
				case 1:
					return fakemodel.ToolUse("StructuredOutput", map[string]any{"verdict": "pass", "score": 7, "notes": []any{"fast", "clean"}})
				}
				return fakemodel.Text("reported")
			}})
			o := w.run(`
schema = {
    "type": "object",
    "properties": {
        "verdict": {"enum": ["pass", "fail"]},
        "score": {"type": "integer"},
        "notes": {"type": "array", "items": {"type": "string"}},
    },
    "required": ["verdict", "score"],
}
t = sdk.send("review it", cwd = args["dir"], cli = json.decode(args["cli"]), output_schema = schema)
out = t.structured_output
print("turn:", t.ok, t.subtype, type(out), out["verdict"], out["score"] + 1, out["notes"])
out["verdict"] = "fail"
`)
			o.expect(t, 1, `turn: True success dict pass 8 ["fast", "clean"]`, "cannot insert into frozen hash table")
			tr, ok := w.toolResult("toolu_bad")
			if !ok || !tr.IsError || !strings.Contains(tr.Content, "schema") {
				t.Errorf("the model got %+v (found %v) for the invalid payload, want an error naming the schema", tr, ok)
			}
		})
	}
}

// TestAgentBudget: max_budget_usd below two model requests' cost ends the
// turn after the second with error_max_budget_usd, not ok on both versions
// (2.1.81 says is_error false). The CLI prices the scripted usage: 1000
// input and 5 output tokens of claude-sonnet-4-6 are $0.003075 a request.
// The budget stops the turn while the recipe waits in send.
func TestAgentBudget(t *testing.T) {
	t.Parallel()
	for _, version := range []string{claudecli.WebSocket, claudecli.Latest} {
		t.Run(version, func(t *testing.T) {
			t.Parallel()
			w := newAgentWorld(t, version, fakemodel.Options{Func: func(req *fakemodel.Request, n int) fakemodel.Reply {
				r := fakemodel.ToolUse("Bash", map[string]any{"command": fmt.Sprintf("echo round %d", n)})
				r.InputTokens = 1000
				return r
			}})
			o := w.run(`
s = sdk.session(cwd = args["dir"], cli = json.decode(args["cli"]), model = "claude-sonnet-4-6",
                max_budget_usd = 0.0045, policy = lambda req: approve())
t = s.send("spend it all")
print("turn:", t.ok, t.subtype, t.cost_usd > 0.0045, t.num_turns)
`)
			o.expect(t, 0, "turn: False error_max_budget_usd True 2")
			if n := len(w.api.Scripted()); n != 2 {
				t.Errorf("the model got %d requests, want 2", n)
			}
		})
	}
}

// TestAgentHookEvents: with --json every hook call is a hook event (output
// null when the hook had no opinion), and nothing reaches stderr.
func TestAgentHookEvents(t *testing.T) {
	t.Parallel()
	var w *agentWorld
	w = newAgentWorld(t, claudecli.Latest, fakemodel.Options{Func: func(req *fakemodel.Request, n int) fakemodel.Reply {
		if n == 0 {
			return fakemodel.Reply{Blocks: []fakemodel.Block{{Type: "tool_use", ID: "toolu_rm", Name: "Bash",
				Input: map[string]any{"command": "rm -rf " + filepath.Join(w.dir, "x")}}}}
		}
		return fakemodel.Text("ok")
	}})
	o := w.run(`
def deny_shell(input):
    return {"hookSpecificOutput": {"hookEventName": "PreToolUse", "permissionDecision": "deny", "permissionDecisionReason": "no"}}
t = sdk.send("go", cwd = args["dir"], cli = json.decode(args["cli"]),
             hooks = {"PreToolUse": [hook(deny_shell, matcher = "Bash")], "Stop": [hook(lambda input: None)]})
print("session:", t.session_id)
`, "--json")
	o.expect(t, 0)
	var session string
	var hooks []string
	for _, e := range o.events(t) {
		switch e["event"] {
		case "log":
			if text, _ := e["text"].(string); strings.HasPrefix(text, "session: ") {
				session = strings.TrimPrefix(text, "session: ")
			}
		case "hook":
			out := "null"
			if m, ok := e["output"].(map[string]any); ok {
				spec, _ := m["hookSpecificOutput"].(map[string]any)
				out = fmt.Sprint(spec["permissionDecision"])
			}
			hooks = append(hooks, fmt.Sprintf("%v %v %v %v %v", e["session"], e["hook_event"], e["tool"], e["tool_use_id"], out))
		}
	}
	want := []string{session + " PreToolUse Bash toolu_rm deny", session + " Stop <nil> <nil> null"}
	if session == "" || strings.Join(hooks, "\n") != strings.Join(want, "\n") {
		t.Errorf("hook events:\n%s\nwant:\n%s", strings.Join(hooks, "\n"), strings.Join(want, "\n"))
	}
	if o.stderr != "" {
		t.Errorf("stderr in --json mode:\n%s", o.stderr)
	}
}
