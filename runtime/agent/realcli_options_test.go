package agent

import (
	"context"
	"encoding/json"
	"net/http/httptest"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/seed5ad92d46/sous/internal/mcpecho"
	"github.com/seed5ad92d46/sous/runtime/agent/fakemodel"
)

// The session options that configure the CLI itself (subagents, MCP
// servers, directories, settings, continuing, extra flags), with the real
// CLI against the scripted model.

var stdioCases = []cliCase{cliCases[0], cliCases[2]}

// argvLogged wraps a CLI command in a shell that writes the arguments it
// gets, NUL-separated, to file and then runs the CLI with them: how a test
// sees the command line the CLI received.
func argvLogged(cli []string, file string) []string {
	script := `printf '%s\0' "$@" > '` + file + `'; exec "$0" "$@"`
	return append([]string{"/bin/sh", "-c", script}, cli...)
}

func readArgv(t *testing.T, file string) []string {
	t.Helper()
	b, err := os.ReadFile(file)
	if err != nil {
		t.Fatalf("the CLI's argv was not logged: %v", err)
	}
	return strings.Split(strings.TrimSuffix(string(b), "\x00"), "\x00")
}

// hasSeq reports whether want appears in args as consecutive arguments.
func hasSeq(args []string, want ...string) bool {
	for i := 0; i+len(want) <= len(args); i++ {
		if slices.Equal(args[i:i+len(want)], want) {
			return true
		}
	}
	return false
}

// toolNamed finds the tool of a request whose name is one of names.
func toolNamed(req *fakemodel.Request, names ...string) string {
	for _, raw := range req.Parsed.Tools {
		var tool struct {
			Name string `json:"name"`
		}
		json.Unmarshal(raw, &tool)
		if slices.Contains(names, tool.Name) {
			return tool.Name
		}
	}
	return ""
}

// TestCLIOptionFlags: settings (a JSON object), add_dirs,
// setting_sources, fallback_model, strict_mcp_config and extra flags
// reach the CLI's command line; the settings' env reaches the Bash tool,
// the added directory the model's environment section, and the extra
// --max-turns 1 stops the turn after its first model request.
func TestCLIOptionFlags(t *testing.T) {
	for _, tc := range stdioCases {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			w := newWorld(t, tc.version, fakemodel.Options{Func: func(req *fakemodel.Request, n int) fakemodel.Reply {
				if n == 0 {
					return fakemodel.ToolUse("Bash", map[string]any{"command": "echo value=$SOUS_FROM_SETTINGS"})
				}
				return fakemodel.Text("a second model request: --max-turns 1 was ignored")
			}})
			extra := filepath.Join(t.TempDir(), "extra-dir")
			if err := os.Mkdir(extra, 0o755); err != nil {
				t.Fatal(err)
			}
			argv := filepath.Join(t.TempDir(), "argv")
			s := w.start(embedded(t), tc.transport, Options{
				CLI:             argvLogged(w.cli, argv),
				Settings:        `{"env": {"SOUS_FROM_SETTINGS": "settings-ok"}}`,
				AddDirs:         []string{extra},
				SettingSources:  []string{"user", "local"},
				FallbackModel:   "claude-fallback-test",
				StrictMCPConfig: true,
				ExtraFlags:      []Flag{{Name: "max-turns", Value: "1"}, {Name: "disable-slash-commands", Bare: true}},
				Permission:      allowAll,
			})
			turn := send(t, s, "show the setting")
			args := readArgv(t, argv)
			for _, want := range [][]string{
				{"--settings", `{"env": {"SOUS_FROM_SETTINGS": "settings-ok"}}`},
				{"--add-dir", extra},
				{"--setting-sources", "user,local"},
				{"--fallback-model", "claude-fallback-test"},
				{"--strict-mcp-config"},
				{"--max-turns", "1", "--disable-slash-commands"},
			} {
				if !hasSeq(args, want...) {
					t.Errorf("the CLI's argv lacks %q: %q", want, args)
				}
			}
			if turn.Subtype != "error_max_turns" || turn.OK() {
				t.Errorf("turn %s (ok %v), want error_max_turns from the extra --max-turns 1", turn.Subtype, turn.OK())
			}
			reqs := w.api.Scripted()
			if len(reqs) != 1 {
				t.Fatalf("the model got %d requests, want 1 (--max-turns 1)", len(reqs))
			}
			// The environment section names it: in the system prompt on
			// 2.1.81, in the first user message on later CLIs.
			if body := string(reqs[0].Body); !strings.Contains(body, "Additional working directories") || !strings.Contains(body, extra) {
				t.Errorf("the model's request does not name the added directory %s among its working directories", extra)
			}
			ran := false
			for _, m := range turn.Messages {
				if strings.Contains(string(m), `"tool_result"`) && strings.Contains(string(m), "value=settings-ok") {
					ran = true
				}
			}
			if !ran {
				t.Error("no Bash result with value=settings-ok: the settings' env did not reach the tool")
			}
		})
	}
}

// TestSubagents: a subagent defined in initialize runs when the model
// calls the Task tool (Agent on later CLIs) with its name: the subagent's
// model request carries its prompt as the system prompt and only its
// tools, the main agent gets its answer, and SubagentStop fires. Its
// prompt never reaches the command line.
func TestSubagents(t *testing.T) {
	const marker = "You are a strict reviewer. SOUS-SUBAGENT-MARKER"
	for _, tc := range cliCases {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			w := newWorld(t, tc.version, fakemodel.Options{Func: func(req *fakemodel.Request, n int) fakemodel.Reply {
				switch {
				case strings.Contains(req.SystemText(), "SOUS-SUBAGENT-MARKER"):
					return fakemodel.Text("reviewed: looks fine")
				case len(req.ToolResults()) > 0:
					return fakemodel.Text("all done")
				}
				task := toolNamed(req, "Task", "Agent")
				if task == "" {
					return fakemodel.Text("no Task or Agent tool was offered")
				}
				return fakemodel.ToolUse(task, map[string]any{"description": "review", "prompt": "review main.go", "subagent_type": "reviewer"})
			}})
			stops := make(chan HookCall, 4)
			argv := filepath.Join(t.TempDir(), "argv")
			var initMsg string
			s := w.start(embedded(t), tc.transport, Options{
				CLI:    argvLogged(w.cli, argv),
				Agents: map[string]AgentDef{"reviewer": {Description: "Reviews code", Prompt: marker, Tools: []string{"Read"}}},
				Hooks: map[string][]Hook{"SubagentStop": {{Func: func(ctx context.Context, c HookCall) (map[string]any, error) {
					stops <- c
					return nil, nil
				}}}},
				Permission: allowAll,
				Observer: func(e Event) {
					if e.Dir == Out && initMsg == "" && strings.Contains(string(e.Message), `"initialize"`) {
						initMsg = string(e.Message)
					}
				},
			})
			turn := send(t, s, "get main.go reviewed")
			if turn.Text != "all done" {
				t.Errorf("turn text %q", turn.Text)
			}
			var sub *fakemodel.Request
			for _, r := range w.api.Scripted() {
				if strings.Contains(r.SystemText(), marker) {
					sub = r
				}
			}
			if sub == nil {
				t.Fatal("no model request carried the subagent's prompt in its system prompt")
			}
			if toolNamed(sub, "Read") == "" || toolNamed(sub, "Bash", "Write") != "" {
				t.Errorf("the subagent was offered %d tools, want Read only", len(sub.Parsed.Tools))
			}
			// 2.1.81 ends the subagent inside the turn; later CLIs may run it
			// in the background and end it after the turn.
			select {
			case c := <-stops:
				if c.Event != "SubagentStop" {
					t.Errorf("hook event %q", c.Event)
				}
			case <-time.After(60 * time.Second):
				t.Error("SubagentStop did not fire")
			}
			if !strings.Contains(initMsg, `"agents":{"reviewer":{`) || !strings.Contains(initMsg, "SOUS-SUBAGENT-MARKER") {
				t.Errorf("initialize %s does not define the subagent", initMsg)
			}
			if args := strings.Join(readArgv(t, argv), " "); strings.Contains(args, "SOUS-SUBAGENT-MARKER") || strings.Contains(args, "--agents") {
				t.Errorf("the subagent reached the command line: %s", args)
			}
		})
	}
}

// TestMCPServers: the CLI starts a stdio MCP server of mcp_servers (with
// its env) and reaches an http one and an sse one; the model calls the
// three servers' echo tool and their results reach its next request.
func TestMCPServers(t *testing.T) {
	bin := mcpecho.Build(t)
	for _, tc := range stdioCases {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			// Closed after the session (cleanups run last first): Close
			// waits for the CLI's open event stream.
			web := httptest.NewServer(mcpecho.Handler("web"))
			t.Cleanup(web.Close)
			events := httptest.NewServer(mcpecho.SSEHandler("sse"))
			t.Cleanup(events.Close)
			w := newWorld(t, tc.version, fakemodel.Options{Func: func(req *fakemodel.Request, n int) fakemodel.Reply {
				if n == 0 {
					return fakemodel.Blocks(
						fakemodel.ToolUseBlock("mcp__local__echo", map[string]any{"text": "hello over stdio"}),
						fakemodel.ToolUseBlock("mcp__remote__echo", map[string]any{"text": "hello over http"}),
						fakemodel.ToolUseBlock("mcp__events__echo", map[string]any{"text": "hello over sse"}),
					)
				}
				return fakemodel.Text("echoed")
			}})
			rec := &recorder{decide: func(Request) (Decision, error) { return Allow(nil), nil }}
			s := w.start(embedded(t), tc.transport, Options{
				MCPServers: map[string]MCPServer{
					"local":  {Command: bin, Env: map[string]string{"MCPECHO_TAG": "stdio"}},
					"remote": {Type: MCPHTTP, URL: web.URL + "/mcp"},
					"events": {Type: MCPSSE, URL: events.URL + "/sse"},
				},
				StrictMCPConfig: true,
				Permission:      rec.callback,
			})
			if turn := send(t, s, "echo twice"); turn.Text != "echoed" {
				t.Errorf("turn text %q", turn.Text)
			}
			reqs := w.api.Scripted()
			if len(reqs) != 2 {
				t.Fatalf("the model got %d requests, want 2", len(reqs))
			}
			var got []string
			for _, tr := range reqs[1].ToolResults() {
				got = append(got, tr.Content)
			}
			want := []string{"[stdio] echo: hello over stdio", "[web] echo: hello over http", "[sse] echo: hello over sse"}
			if !slices.Equal(got, want) {
				t.Errorf("tool results %q, want %q", got, want)
			}
			var tools []string
			for _, r := range rec.requests() {
				tools = append(tools, r.Tool)
			}
			if !slices.Equal(tools, []string{"mcp__local__echo", "mcp__remote__echo", "mcp__events__echo"}) {
				t.Errorf("permission requests for %v", tools)
			}
		})
	}
}

// TestContinueConversation: a session with Continue picks up the most
// recent conversation in its working directory: the model's first request
// carries the earlier session's prompt and answer, and the session's id is
// learned from the CLI.
func TestContinueConversation(t *testing.T) {
	for _, tc := range stdioCases {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			w := newWorld(t, tc.version, fakemodel.Options{Script: []fakemodel.Reply{
				fakemodel.Text("noted: PINEAPPLE"),
				fakemodel.Text("you said PINEAPPLE"),
			}})
			c := embedded(t)
			first := w.start(c, tc.transport, Options{})
			send(t, first, "remember PINEAPPLE")
			firstID := first.ID()
			if err := first.Close(); err != nil {
				t.Fatal(err)
			}
			s := w.start(c, tc.transport, Options{Continue: true})
			turn := send(t, s, "what did I say?")
			if turn.Text != "you said PINEAPPLE" {
				t.Errorf("turn text %q", turn.Text)
			}
			reqs := w.api.Scripted()
			if len(reqs) != 2 {
				t.Fatalf("the model got %d requests, want 2", len(reqs))
			}
			if body := string(reqs[1].Body); !strings.Contains(body, "remember PINEAPPLE") || !strings.Contains(body, "noted: PINEAPPLE") {
				t.Error("the continued session's request lacks the earlier conversation")
			}
			if s.ID() == "" || turn.SessionID != s.ID() {
				t.Errorf("continued session id %q, turn's %q", s.ID(), turn.SessionID)
			}
			if s.ID() != firstID {
				t.Errorf("the continued session has id %s, want the earlier one's, %s", s.ID(), firstID)
			}
		})
	}
}

// TestFallbackModel: when the model answers "overloaded" (529) three
// times in a row, the CLI switches to the fallback model and the turn
// succeeds. 2.1.81 falls back only from an Opus model (or with
// FALLBACK_FOR_ALL_PRIMARY_MODELS set), hence the main model's name.
func TestFallbackModel(t *testing.T) {
	for _, tc := range stdioCases {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			w := newWorld(t, tc.version, fakemodel.Options{Func: func(req *fakemodel.Request, n int) fakemodel.Reply {
				if req.Parsed.Model == "claude-opus-4-6" {
					return fakemodel.APIError(529, "overloaded_error", "Overloaded")
				}
				return fakemodel.Text("answered by " + req.Parsed.Model)
			}})
			s := w.start(embedded(t), tc.transport, Options{Model: "claude-opus-4-6", FallbackModel: "claude-fallback-test"})
			turn := send(t, s, "hello")
			if turn.Text != "answered by claude-fallback-test" {
				t.Errorf("turn %s text %q, want the fallback model's answer", turn.Subtype, turn.Text)
			}
			var models []string
			for _, r := range w.api.Scripted() {
				models = append(models, r.Parsed.Model)
			}
			if len(models) < 2 || models[0] != "claude-opus-4-6" || models[len(models)-1] != "claude-fallback-test" {
				t.Errorf("models asked: %v, want the main one, then the fallback", models)
			}
		})
	}
}

// TestStrictMCPConfig: a project's .mcp.json server (enabled by the
// settings) is connected beside mcp_servers, unless StrictMCPConfig makes
// mcp_servers the only ones: system/init's mcp_servers tells.
func TestStrictMCPConfig(t *testing.T) {
	bin := mcpecho.Build(t)
	for _, tc := range stdioCases {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			w := newWorld(t, tc.version, fakemodel.Options{Func: func(*fakemodel.Request, int) fakemodel.Reply { return fakemodel.Text("hi") }})
			project, _ := json.Marshal(map[string]any{"mcpServers": map[string]any{"project": map[string]any{"type": "stdio", "command": bin}}})
			if err := os.WriteFile(filepath.Join(w.work, ".mcp.json"), project, 0o644); err != nil {
				t.Fatal(err)
			}
			c := embedded(t)
			for _, strict := range []bool{false, true} {
				s := w.start(c, tc.transport, Options{
					MCPServers:      map[string]MCPServer{"local": {Command: bin}},
					StrictMCPConfig: strict,
					Settings:        `{"enableAllProjectMcpServers": true}`,
				})
				turn := send(t, s, "hi")
				var servers []string
				for _, m := range turn.Messages {
					var init struct {
						Subtype    string `json:"subtype"`
						MCPServers []struct {
							Name string `json:"name"`
						} `json:"mcp_servers"`
					}
					if json.Unmarshal(m, &init) == nil && init.Subtype == "init" {
						for _, srv := range init.MCPServers {
							servers = append(servers, srv.Name)
						}
					}
				}
				slices.Sort(servers)
				want := []string{"local", "project"}
				if strict {
					want = []string{"local"}
				}
				if !slices.Equal(servers, want) {
					t.Errorf("strict %v: system/init lists MCP servers %q, want %q", strict, servers, want)
				}
				s.Close()
			}
		})
	}
}
