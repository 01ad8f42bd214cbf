package main

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/seed5ad92d46/sous/internal/claudecli"
	"github.com/seed5ad92d46/sous/runtime/agent/fakemodel"
)

// toolsRecipe serves five tools to a session and runs three turns. Every
// call arrives while the recipe is blocked in send, and each fn runs on
// the recipe thread: add returns a string, fail raises, shell calls run()
// and files.read(), data returns a dict (sent as JSON), and nested tries
// to wait for a turn from inside a tool, which must fail that call only.
const toolsRecipe = `
cli = json.decode(args["cli"])
calls = []

def add(args):
    calls.append("add %d %d" % (args["a"], args["b"]))
    return str(args["a"] + args["b"])

def fail_tool(args):
    calls.append("fail")
    fail("sous test: no luck for " + args["who"])

def shell(args):
    calls.append("shell")
    out = run(["echo", "from run:", args["word"]]).stdout.strip()
    return out + " / " + files.read(args["dir"] + "/note.txt").strip()

def data(args):
    calls.append("data")
    return {"answer": 42, "items": ["a", None]}

def nested(args):
    calls.append("nested")
    s.send("from inside a tool")
    return "unreachable"

tools = [
    tool("add", "Adds a and b.", {"properties": {"a": {"type": "integer"}, "b": {"type": "integer"}}, "required": ["a", "b"]}, add),
    tool("fail", "Always fails.", {"properties": {"who": {"type": "string"}}}, fail_tool),
    tool("shell", "Runs echo.", {"properties": {"word": {"type": "string"}, "dir": {"type": "string"}}}, shell),
    tool("data", "Returns data.", {}, data),
    tool("nested", "Waits for a turn.", {}, nested),
]
s = sdk.session(cwd = args["dir"], cli = cli, tools = tools)
t1 = s.send("add 40 and 2")
init = [m for m in t1.messages if m["type"] == "system" and m.get("subtype") == "init"][0]
print("servers:", [(m["name"], m["status"]) for m in init["mcp_servers"]])
print("listed:", sorted([n for n in init["tools"] if n.startswith("mcp__")]))
print("t1:", t1.ok, t1.text)
t2 = s.send("fail now")
print("t2:", t2.ok, t2.subtype, t2.text)
t3 = s.send("the rest")
print("t3:", t3.ok, t3.text)
print("calls:", calls)
`

// toolsScript is the model's side of toolsRecipe.
func toolsScript(dir string) func(req *fakemodel.Request, n int) fakemodel.Reply {
	return func(req *fakemodel.Request, n int) fakemodel.Reply {
		use := func(id, name string, input map[string]any) fakemodel.Block {
			return fakemodel.Block{Type: "tool_use", ID: id, Name: name, Input: input}
		}
		switch n {
		case 0:
			return fakemodel.Blocks(use("toolu_add", "mcp__sous__add", map[string]any{"a": 40, "b": 2}))
		case 1:
			return fakemodel.Text("the sum is in")
		case 2:
			return fakemodel.Blocks(use("toolu_fail", "mcp__sous__fail", map[string]any{"who": "me"}))
		case 3:
			return fakemodel.Text("it failed")
		case 4:
			return fakemodel.Blocks(
				use("toolu_shell", "mcp__sous__shell", map[string]any{"word": "hello", "dir": dir}),
				use("toolu_data", "mcp__sous__data", map[string]any{}),
				use("toolu_nested", "mcp__sous__nested", map[string]any{}))
		case 5:
			return fakemodel.Text("all done")
		}
		return fakemodel.Text("unexpected request")
	}
}

// TestAgentTools runs toolsRecipe on the real CLI, the latest with the
// human output and 2.1.81 with --json: the model gets "42" for
// mcp__sous__add {"a": 40, "b": 2}, the failing tool's message as an error
// result while the recipe goes on, run()'s and files.read()'s output, the
// dict as JSON; the nested wait fails its call only. The server is
// connected, no call asked for permission, and each call is a line on
// stderr (a tool event with --json).
func TestAgentTools(t *testing.T) {
	for _, version := range []string{claudecli.Latest, claudecli.WebSocket} {
		t.Run(version, func(t *testing.T) {
			t.Parallel()
			var w *agentWorld
			w = newAgentWorld(t, version, fakemodel.Options{Func: func(req *fakemodel.Request, n int) fakemodel.Reply {
				return toolsScript(w.dir)(req, n)
			}})
			if err := os.WriteFile(filepath.Join(w.dir, "note.txt"), []byte("a note\n"), 0o644); err != nil {
				t.Fatal(err)
			}
			jsonMode := version == claudecli.WebSocket
			var flags []string
			if jsonMode {
				flags = append(flags, "--json")
			}
			o := w.run(toolsRecipe, flags...)
			want := []string{
				`servers: [("sous", "connected")]`,
				`listed: ["mcp__sous__add", "mcp__sous__data", "mcp__sous__fail", "mcp__sous__nested", "mcp__sous__shell"]`,
				"t1: True the sum is in",
				"t2: True success it failed",
				"t3: True all done",
				`calls: ["add 40 2", "fail", "shell", "data", "nested"]`,
			}
			var toolLines []string
			if jsonMode {
				o.expect(t, 0)
				var logs []string
				for _, e := range o.events(t) {
					switch e["event"] {
					case "log":
						logs = append(logs, fmt.Sprint(e["text"]))
					case "approval":
						t.Errorf("a session tool asked for permission: %v", e)
					case "tool":
						if s, _ := e["session"].(string); len(s) < 8 {
							t.Errorf("tool event without its session: %v", e)
						}
						toolLines = append(toolLines, fmt.Sprintf("%v %v", e["tool"], e["ok"]))
					}
				}
				if !slices.Equal(logs, want) {
					t.Errorf("log events:\n%s\nwant:\n%s", strings.Join(logs, "\n"), strings.Join(want, "\n"))
				}
				if strings.Contains(o.stderr, "tool:") {
					t.Errorf("tool lines on stderr in --json mode:\n%s", o.stderr)
				}
			} else {
				o.expect(t, 0, want...)
				if l := o.stderrLines("approval:"); len(l) > 0 {
					t.Errorf("a session tool asked for permission: %q", l)
				}
				for _, l := range o.stderrLines("tool: mcp__sous__") {
					if !strings.Contains(l, " [session ") {
						t.Errorf("tool line without its session: %q", l)
					}
					l, _, _ = strings.Cut(strings.TrimPrefix(l, "tool: "), " [session ")
					toolLines = append(toolLines, strings.Replace(strings.Replace(l, " ok", " true", 1), " error", " false", 1))
				}
			}
			slices.Sort(toolLines)
			wantLines := []string{"mcp__sous__add true", "mcp__sous__data true", "mcp__sous__fail false", "mcp__sous__nested false", "mcp__sous__shell true"}
			if !slices.Equal(toolLines, wantLines) {
				t.Errorf("tool lines %q, want %q", toolLines, wantLines)
			}

			for id, want := range map[string]string{
				"toolu_add":   "42",
				"toolu_shell": "from run: hello / a note",
				"toolu_data":  `{"answer":42,"items":["a",null]}`,
			} {
				if tr, ok := w.toolResult(id); !ok || tr.IsError || tr.Content != want {
					t.Errorf("the model got %+v (found %v) for %s, want %q", tr, ok, id, want)
				}
			}
			for id, want := range map[string]string{
				"toolu_fail":   "sous test: no luck for me",
				"toolu_nested": "a tool's function cannot wait for an agent's turn",
			} {
				if tr, ok := w.toolResult(id); !ok || !tr.IsError || !strings.Contains(tr.Content, want) {
					t.Errorf("the model got %+v (found %v) for %s, want an error carrying %q", tr, ok, id, want)
				}
			}
			if n := len(w.api.Scripted()); n != 6 {
				t.Errorf("the model got %d requests, want 6", n)
			}
		})
	}
}

// bumpRecipe runs sessions at once, each with its own tool "bump" that
// counts its calls by session and n; the recipe waits for all their turns
// with wait_all, so every call of every session runs on the recipe thread
// while it waits there. args: cli, sessions (how many), env (JSON, for the
// CLI).
const bumpRecipe = `
cli = json.decode(args["cli"])
seen = {}

def bumper(name):
    def bump(args):
        key = "%s/%d" % (name, args["n"])
        seen[key] = seen.get(key, 0) + 1
        sleep(0.01)  # a wait inside the tool: the other calls queue meanwhile
        return "bumped " + key
    return tool("bump", "Bumps a counter.", {"properties": {"n": {"type": "integer"}}, "required": ["n"]}, bump)

names = ["s%d" % i for i in range(int(args["sessions"]))]
sessions = {n: sdk.session(cwd = args["dir"], cli = cli, env = json.decode(args["env"]), tools = [bumper(n)]) for n in names}
turns = wait_all([sessions[n].start("go " + n) for n in names])
print("turns:", len([t for t in turns if t.ok]))
print("texts:", [t.text for t in turns])
print("calls:", len(seen), sorted(set(seen.values())))
`

// TestAgentToolsConcurrentFake runs twenty sessions at once on the fake
// CLI, each calling its tool five times at once: every call is answered
// exactly once, with its own session's answer, and nothing more arrives
// later.
func TestAgentToolsConcurrentFake(t *testing.T) {
	t.Parallel()
	exe, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	o, _ := runStar(t, bumpRecipe+`
want = [";".join(["c%d=bumped %s/%d" % (i, n, i) for i in range(5)]) for n in names]
print("wrong:", [(n, t.text) for n, t, w in zip(names, turns, want) if t.text != w])
checks = wait_all([sessions[n].start("check") for n in names])
print("extra:", sorted(set([t.text for t in checks])))
`, "-a", "cli="+jsonText(t, []string{exe}), "-a", "sessions=20", "-a", "env="+jsonText(t, map[string]string{fakeCLIEnv: "tools"}))
	o.expect(t, 0, "turns: 20", "wrong: []", `extra: ["extra=0"]`, "calls: 100 [1]")
	if n := len(o.stderrLines("tool: mcp__sous__bump ok [session ")); n != 100 {
		t.Errorf("%d tool lines, want 100", n)
	}
}

// TestAgentToolsConcurrent is the same on the real CLI, both versions:
// twenty sessions at once, each model reply asking for five calls of the
// session's tool in one message; the model gets each call's own answer,
// once, and the recipe gets each call once.
func TestAgentToolsConcurrent(t *testing.T) {
	t.Parallel()
	const sessions, calls = 20, 5
	for _, version := range []string{claudecli.WebSocket, claudecli.Latest} {
		t.Run(version, func(t *testing.T) {
			t.Parallel()
			w := newAgentWorld(t, version, fakemodel.Options{Func: func(req *fakemodel.Request, n int) fakemodel.Reply {
				if toolTurn(req) > 0 {
					return fakemodel.Text("bumped")
				}
				name := strings.TrimPrefix(firstPrompt(req), "go ")
				var blocks []fakemodel.Block
				for i := range calls {
					blocks = append(blocks, fakemodel.Block{Type: "tool_use", ID: fmt.Sprintf("toolu_%s_%d", name, i), Name: "mcp__sous__bump",
						Input: map[string]any{"n": i}})
				}
				return fakemodel.Blocks(blocks...)
			}})
			o := w.run(bumpRecipe, "-a", fmt.Sprint("sessions=", sessions), "-a", "env={}")
			texts := `texts: [` + strings.Repeat(`"bumped", `, sessions-1) + `"bumped"]`
			o.expect(t, 0, fmt.Sprint("turns: ", sessions), texts, fmt.Sprintf("calls: %d [1]", sessions*calls))
			got := map[string]int{}
			for _, r := range w.api.Scripted() {
				for _, tr := range r.ToolResults() {
					if tr.IsError {
						t.Errorf("tool result %+v is an error", tr)
					}
					got[tr.ToolUseID+" "+tr.Content]++
				}
			}
			if len(got) != sessions*calls {
				t.Errorf("the model got %d distinct tool results, want %d", len(got), sessions*calls)
			}
			for s := range sessions {
				for i := range calls {
					key := fmt.Sprintf("toolu_s%d_%d bumped s%d/%d", s, i, s, i)
					if got[key] != 1 {
						t.Errorf("%s: seen %d times by the model, want once", key, got[key])
					}
				}
			}
		})
	}
}

func jsonText(t *testing.T, v any) string {
	t.Helper()
	b, err := json.Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}
