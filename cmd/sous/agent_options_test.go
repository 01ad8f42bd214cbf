package main

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/seed5ad92d46/sous/internal/claudecli"
	"github.com/seed5ad92d46/sous/internal/mcpecho"
	"github.com/seed5ad92d46/sous/runtime/agent/fakemodel"
)

// offered is the first of names among the tools a request offers, or "".
func offered(req *fakemodel.Request, names ...string) string {
	for _, raw := range req.Parsed.Tools {
		var tool struct {
			Name string `json:"name"`
		}
		json.Unmarshal(raw, &tool)
		for _, n := range names {
			if tool.Name == n {
				return n
			}
		}
	}
	return ""
}

// TestAgentSessionOptions: a recipe defines a subagent with agent(), an
// MCP server the CLI starts, a settings file, an added directory and an
// extra flag. The model delegates to the
// subagent (whose request carries its prompt as the system prompt, and
// whose end fires SubagentStop), calls the MCP server's echo (its env
// reached it), and runs a Bash that prints the settings file's env.
func TestAgentSessionOptions(t *testing.T) {
	t.Parallel()
	bin := mcpecho.Build(t)
	for _, version := range []string{claudecli.WebSocket, claudecli.Latest} {
		t.Run(version, func(t *testing.T) {
			t.Parallel()
			w := newAgentWorld(t, version, fakemodel.Options{Func: func(req *fakemodel.Request, n int) fakemodel.Reply {
				if strings.Contains(string(req.Parsed.System), "SOUS-RECIPE-MARKER") {
					return fakemodel.Text("reviewed: fine")
				}
				switch toolTurn(req) {
				case 0:
					task := offered(req, "Task", "Agent")
					return fakemodel.ToolUse(task, map[string]any{"description": "review", "prompt": "review it", "subagent_type": "reviewer"})
				case 1:
					return fakemodel.ToolUse("mcp__local__echo", map[string]any{"text": "hi from the model"})
				case 2:
					return fakemodel.ToolUse("Bash", map[string]any{"command": "echo file=$SOUS_FROM_FILE"})
				}
				return fakemodel.Text("all done")
			}})
			if err := os.WriteFile(filepath.Join(w.dir, "settings.json"), []byte(`{"env": {"SOUS_FROM_FILE": "file-ok"}}`), 0o644); err != nil {
				t.Fatal(err)
			}
			// Outside cwd: a directory inside it is not an additional one.
			extra, err := filepath.EvalSymlinks(t.TempDir())
			if err != nil {
				t.Fatal(err)
			}
			o := w.run(`
stops = []

def on_stop(input):
    stops.append(input["hook_event_name"])

def allow(req):
    return approve()

reviewer = agent("Reviews code", "You are a strict reviewer. SOUS-RECIPE-MARKER", tools = ["Read"])
s = sdk.session(
    cwd = args["dir"], cli = json.decode(args["cli"]), policy = allow,
    agents = {"reviewer": reviewer},
    mcp_servers = {"local": {"command": args["mcpecho"], "env": {"MCPECHO_TAG": "recipe"}}},
    strict_mcp_config = True,
    add_dirs = [args["extra"]],
    settings = args["dir"] + "/settings.json",
    setting_sources = [],
    extra_args = {"disable-slash-commands": None},
    hooks = {"SubagentStop": [hook(on_stop)]},
)
t = s.send("review, echo, show")
print("turn:", t.ok, t.text)
for i in range(600):  # a later CLI may end the subagent after the turn
    if stops:
        break
    sleep(0.1)
print("stops:", stops)
`, "-a", "mcpecho="+bin, "-a", "extra="+extra)
			o.expect(t, 0, "turn: True all done", `stops: ["SubagentStop"]`)
			var sub, dir bool
			var results []string
			for _, r := range w.api.Scripted() {
				if strings.Contains(string(r.Parsed.System), "SOUS-RECIPE-MARKER") {
					sub = true
				}
				if strings.Contains(string(r.Body), extra) {
					dir = true
				}
				// Every result of the conversation: a later CLI can put the
				// subagent's notification after a tool's result.
				for _, m := range r.Parsed.Messages {
					for _, b := range m.Blocks() {
						if b.Type == "tool_result" {
							results = append(results, string(b.Content))
						}
					}
				}
			}
			if !dir {
				t.Errorf("no model request names the added directory %s", extra)
			}
			if !sub {
				t.Error("no model request carried the subagent's prompt as its system prompt")
			}
			all := strings.Join(results, "\n")
			for _, want := range []string{"[recipe] echo: hi from the model", "file=file-ok"} {
				if !strings.Contains(all, want) {
					t.Errorf("the model's tool results lack %q:\n%s", want, all)
				}
			}
		})
	}
}

// TestAgentExtraArgs: extra_args reach the CLI ({"max-turns": "1"} stops
// the turn after one model request); a session with
// continue_conversation=True continues that conversation (its id is
// learned with its first turn); a flag sous passes itself is refused
// before the CLI starts, naming the keyword that sets it.
func TestAgentExtraArgs(t *testing.T) {
	t.Parallel()
	w := newAgentWorld(t, claudecli.Latest, fakemodel.Options{Func: func(req *fakemodel.Request, n int) fakemodel.Reply {
		// The continued session's prompt joins the user message that holds
		// the first turn's last tool result, so it is looked for in the
		// whole request.
		if n == 0 {
			return fakemodel.ToolUse("Bash", map[string]any{"command": "echo round"})
		}
		body := string(req.Body)
		if !strings.Contains(body, "and now?") {
			return fakemodel.Text("unexpected request")
		}
		return fakemodel.Text(fmt.Sprintf("history has go round: %v", strings.Contains(body, "go round")))
	}})
	o := w.run(`
def allow(req):
    return approve()

t = sdk.send("go round", cwd = args["dir"], cli = json.decode(args["cli"]), policy = allow, extra_args = {"max-turns": "1"})
print("turn:", t.ok, t.subtype)
s = sdk.session(cwd = args["dir"], cli = json.decode(args["cli"]), continue_conversation = True)
before = s.id
t2 = s.send("and now?")
print("continued:", before, s.id == t.session_id, t2.session_id == t.session_id, t2.text)
s.close()
sdk.session(cwd = args["dir"], cli = json.decode(args["cli"]), model = "haiku", extra_args = {"model": "opus"})
`)
	o.expect(t, 1, "turn: False error_max_turns", "continued: None True True history has go round: true",
		`Error in sdk.session: sdk.session: extra_args: "model": sous already passes --model for this session: it is set by model`)
	if n := len(w.api.Scripted()); n != 2 {
		t.Errorf("the model got %d requests, want 2", n)
	}
}
