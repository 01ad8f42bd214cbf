package agent

import (
	"context"
	"encoding/json"
	"slices"
	"strings"
	"testing"
	"time"
)

// The checks and the command line of the options that configure the CLI
// itself; what the real CLI does with them is realcli_options_test.go's.

func prepared(t *testing.T, opt Options) ([]string, error) {
	t.Helper()
	opt, err := opt.prepare(true)
	if err != nil {
		return nil, err
	}
	return buildArgs(opt), nil
}

func TestExtraFlags(t *testing.T) {
	args, err := prepared(t, Options{ExtraFlags: []Flag{{Name: "max-turns", Value: "1"}, {Name: "no-chrome", Bare: true}, {Name: "x", Value: "-v"}}})
	if err != nil {
		t.Fatal(err)
	}
	if !hasSeq(args, "--max-turns", "1", "--no-chrome", "--x", "-v") {
		t.Errorf("args %q lack the extra flags in order", args)
	}
	tests := []struct {
		name string
		opt  Options
		want string
	}{
		{"dashes", Options{ExtraFlags: []Flag{{Name: "--max-turns", Value: "1"}}},
			`extra_args: "--max-turns": give the flag without its leading dashes ("max-turns" is passed as --max-turns)`},
		{"one dash", Options{ExtraFlags: []Flag{{Name: "-p", Bare: true}}}, `extra_args: "-p": give the flag without its leading dashes`},
		{"empty", Options{ExtraFlags: []Flag{{Name: ""}}}, "extra_args: a flag's name is empty"},
		{"equals", Options{ExtraFlags: []Flag{{Name: "max-turns=1", Bare: true}}}, `extra_args: "max-turns=1": a flag's name has no '=' or spaces`},
		{"protocol", Options{ExtraFlags: []Flag{{Name: "output-format", Value: "text"}}},
			`extra_args: "output-format": sous sets --output-format itself (the session's protocol depends on it)`},
		{"session", Options{ExtraFlags: []Flag{{Name: "resume", Value: "x"}}}, `extra_args: "resume": sous sets --resume itself`},
		{"continue", Options{ExtraFlags: []Flag{{Name: "continue", Bare: true}}}, `extra_args: "continue": sous sets --continue itself`},
		{"set by an option", Options{MaxTurns: 3, ExtraFlags: []Flag{{Name: "max-turns", Value: "1"}}},
			`extra_args: "max-turns": sous already passes --max-turns for this session: it is set by max_turns`},
		{"an alias", Options{AllowedTools: []string{"Read"}, ExtraFlags: []Flag{{Name: "allowed-tools", Value: "Bash"}}},
			`extra_args: "allowed-tools": sous already passes --allowedTools for this session: it is set by allowed_tools`},
		{"twice", Options{ExtraFlags: []Flag{{Name: "no-chrome", Bare: true}, {Name: "No-Chrome", Bare: true}}}, `extra_args: "No-Chrome": given twice`},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			_, err := prepared(t, tc.opt)
			if err == nil || !strings.Contains(err.Error(), "agent: "+tc.want) {
				t.Errorf("prepare: %v, want %q", err, tc.want)
			}
		})
	}
}

func TestCLIOptionArgs(t *testing.T) {
	args, err := prepared(t, Options{
		AddDirs: []string{"/a", "/b"}, Settings: "/s.json", SettingSources: []string{}, FallbackModel: "haiku",
		StrictMCPConfig: true, MCPServers: map[string]MCPServer{"e": {Command: "mcpecho"}},
	})
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range [][]string{
		{"--add-dir", "/a", "/b"}, {"--settings", "/s.json"}, {"--setting-sources", ""}, {"--fallback-model", "haiku"},
		{"--strict-mcp-config"}, {"--mcp-config", `{"mcpServers":{"e":{"args":[],"command":"mcpecho","type":"stdio"}}}`},
	} {
		if !hasSeq(args, want...) {
			t.Errorf("args %q lack %q", args, want)
		}
	}
	if !slices.Contains(args, "--session-id") || slices.Contains(args, "--continue") {
		t.Errorf("a fresh session's args %q", args)
	}
	args, err = prepared(t, Options{Continue: true, Fork: true})
	if err != nil {
		t.Fatal(err)
	}
	if !hasSeq(args, "--continue", "--fork-session") || slices.Contains(args, "--session-id") {
		t.Errorf("a continued fork's args %q: want --continue --fork-session and no --session-id", args)
	}
	none, _ := prepared(t, Options{})
	for _, a := range none {
		if slices.Contains([]string{"--setting-sources", "--mcp-config", "--add-dir", "--settings", "--continue"}, a) {
			t.Errorf("a session without options passes %s", a)
		}
	}
	for _, tc := range []struct {
		opt  Options
		want string
	}{
		{Options{Continue: true, Resume: "x"}, "continue_conversation and resume: give one"},
		{Options{Continue: true, SessionID: "0b5f5c8a-2d42-4a8e-9a53-3c9d4d0b0c11"}, "a session id is for a fresh session"},
		{Options{AddDirs: []string{"-x"}}, `add_dirs[0]: "-x" would read as a flag; write ./-x`},
		{Options{AddDirs: []string{""}}, "add_dirs[0]: empty path"},
		{Options{SettingSources: []string{"user,project"}}, `setting_sources[0]: "user,project": want a source name`},
	} {
		if _, err := prepared(t, tc.opt); err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("prepare(%+v): %v, want %q", tc.opt, err, tc.want)
		}
	}
}

func TestMCPServerChecks(t *testing.T) {
	servers := map[string]MCPServer{
		"s": {Command: "srv", Args: []string{"-v"}, Env: map[string]string{"K": "v"}},
		"h": {Type: MCPHTTP, URL: "https://example.com/mcp", Headers: map[string]string{"Authorization": "Bearer x"}},
		"e": {Type: MCPSSE, URL: "http://127.0.0.1:9/sse"},
	}
	got, err := checkMCPServers(servers, false)
	if err != nil {
		t.Fatal(err)
	}
	js, err := mcpConfigJSON(got)
	if err != nil {
		t.Fatal(err)
	}
	want := `{"mcpServers":{"e":{"type":"sse","url":"http://127.0.0.1:9/sse"},` +
		`"h":{"headers":{"Authorization":"Bearer x"},"type":"http","url":"https://example.com/mcp"},` +
		`"s":{"args":["-v"],"command":"srv","env":{"K":"v"},"type":"stdio"}}}`
	if js != want {
		t.Errorf("--mcp-config %s\nwant %s", js, want)
	}
	for _, tc := range []struct {
		servers map[string]MCPServer
		tools   bool
		want    string
	}{
		{map[string]MCPServer{"x": {}}, false, `mcp_servers["x"]: a stdio server needs a command`},
		{map[string]MCPServer{"x": {Command: "c", URL: "http://h"}}, false, `mcp_servers["x"]: a stdio server has a command, not a url`},
		{map[string]MCPServer{"x": {Type: MCPHTTP}}, false, `mcp_servers["x"]: an http server needs a url`},
		{map[string]MCPServer{"x": {Type: MCPSSE, URL: "ftp://h"}}, false, `mcp_servers["x"]: url "ftp://h": want an http:// or https:// URL`},
		{map[string]MCPServer{"x": {Type: MCPHTTP, URL: "http://h", Command: "c"}}, false, `an http server has a url, not a command`},
		{map[string]MCPServer{"x": {Type: "ws", URL: "ws://h"}}, false, `mcp_servers["x"]: type "ws": want "stdio", "http" or "sse"`},
		{map[string]MCPServer{"": {Command: "c"}}, false, "mcp_servers: a server's name is empty"},
		{map[string]MCPServer{"sous": {Command: "c"}}, true, `mcp_servers["sous"]: the name is taken by the session's own tools`},
	} {
		if _, err := checkMCPServers(tc.servers, tc.tools); err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("check %+v: %v, want %q", tc.servers, err, tc.want)
		}
	}
	if _, err := checkMCPServers(map[string]MCPServer{"sous": {Command: "c"}}, false); err != nil {
		t.Errorf("a server named sous without tools of the session's: %v", err)
	}
}

func TestAgentsInInitialize(t *testing.T) {
	long := strings.Repeat("a long prompt ", 20000) // past what a command line holds
	opt, err := Options{Agents: map[string]AgentDef{
		"reviewer": {Description: "Reviews code", Prompt: long, Tools: []string{"Read"}, Model: "haiku"},
		"helper":   {Description: "Helps", Prompt: "Help."},
	}}.prepare(true)
	if err != nil {
		t.Fatal(err)
	}
	if args := strings.Join(buildArgs(opt), " "); strings.Contains(args, "long prompt") || strings.Contains(args, "--agents") {
		t.Error("the agents reached the command line")
	}
	b, _ := json.Marshal(initializeRequest(opt, nil)["agents"])
	want := `{"helper":{"description":"Helps","prompt":"Help."},"reviewer":{"description":"Reviews code","model":"haiku","prompt":"` +
		long + `","tools":["Read"]}}`
	if string(b) != want {
		t.Errorf("initialize's agents: %.300s", b)
	}
	for _, tc := range []struct {
		def  AgentDef
		want string
	}{
		{AgentDef{Prompt: "p"}, `agents["x"]: the description is empty`},
		{AgentDef{Description: "d", Prompt: " "}, `agents["x"]: the prompt is empty`},
		{AgentDef{Description: "d", Prompt: "p", Tools: []string{""}}, `agents["x"]: tools[0] is empty`},
		{AgentDef{Description: "d", Prompt: "p", Model: " "}, `agents["x"]: the model is blank`},
	} {
		if _, err := (Options{Agents: map[string]AgentDef{"x": tc.def}}).prepare(true); err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("agent %+v: %v, want %q", tc.def, err, tc.want)
		}
	}
}

// TestSubagentsNotTaken: a CLI whose answer to initialize does not list
// the session's subagents (the fake CLI answers {}, as a CLI too old to
// read them would list none) fails Start with an error naming its version
// and the subagents, at once rather than at the first Task call.
func TestSubagentsNotTaken(t *testing.T) {
	t.Parallel()
	opt := fakeOptions("chatty")
	opt.Agents = map[string]AgentDef{"reviewer": {Description: "Reviews", Prompt: "Be strict."}, "helper": {Description: "Helps", Prompt: "Help."}}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	s, err := Start(ctx, embedded(t), opt)
	if err == nil {
		s.Close()
		t.Fatal("a CLI that did not take the subagents started")
	}
	if want := "Claude Code 0.9.1 did not take the subagents helper, reviewer of initialize"; !strings.Contains(err.Error(), want) {
		t.Errorf("start: %v, want %q", err, want)
	}
	if got := agentsNotTaken(opt.Agents, json.RawMessage(`{"agents":[{"name":"reviewer"},{"name":"Explore"}]}`)); !slices.Equal(got, []string{"helper"}) {
		t.Errorf("not taken: %q, want helper", got)
	}
}
