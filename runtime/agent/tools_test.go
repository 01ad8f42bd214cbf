package agent

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"os"
	"regexp"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"
	"unicode/utf8"

	"github.com/seed5ad92d46/sous/runtime/agent/fakemodel"
)

// addTools are the tools the tests serve: add sums a and b, fail always
// fails.
var addTools = []Tool{
	{Name: "add", Description: "Adds a and b.", InputSchema: json.RawMessage(
		`{"type":"object","properties":{"a":{"type":"number"},"b":{"type":"number"}},"required":["a","b"]}`)},
	{Name: "fail", Description: "Always fails."},
}

func callAddTools(ctx context.Context, c ToolCall) (string, error) {
	switch c.Tool {
	case "add":
		var in struct{ A, B json.Number }
		if err := json.Unmarshal(c.Arguments, &in); err != nil {
			return "", err
		}
		a, _ := in.A.Int64()
		b, _ := in.B.Int64()
		return fmt.Sprint(a + b), nil
	case "fail":
		return "", errors.New("sous test: the tool failed on purpose")
	}
	return "", fmt.Errorf("no tool %s", c.Tool)
}

// TestSessionTools serves two tools to the real CLI over each version and
// transport: the model's call of mcp__sous__add with {"a": 40, "b": 2}
// comes back to it as "42"; a tool that fails reaches the model as an
// error result carrying the message, and the turn goes on. The server is
// connected (system/init and mcp_status say so) and no call asked for
// permission.
func TestSessionTools(t *testing.T) {
	for _, tc := range cliCases {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			w := newWorld(t, tc.version, fakemodel.Options{Func: func(req *fakemodel.Request, n int) fakemodel.Reply {
				switch n {
				case 0:
					return fakemodel.Reply{Blocks: []fakemodel.Block{{Type: "tool_use", ID: "toolu_add", Name: "mcp__sous__add",
						Input: map[string]any{"a": 40, "b": 2}}}}
				case 1:
					return fakemodel.Text("added")
				case 2:
					return fakemodel.Reply{Blocks: []fakemodel.Block{{Type: "tool_use", ID: "toolu_fail", Name: "mcp__sous__fail",
						Input: map[string]any{}}}}
				case 3:
					return fakemodel.Text("it failed")
				}
				return fakemodel.Text("unexpected request")
			}})
			rec := &recorder{decide: func(Request) (Decision, error) { return Deny("sous test: nothing is asked", false), nil }}
			var mu sync.Mutex
			var calls []string
			s := w.start(embedded(t), tc.transport, Options{
				Tools: addTools, CallTool: callAddTools, Permission: rec.callback,
				Observer: func(e Event) {
					if e.Type == "tool" {
						mu.Lock()
						calls = append(calls, fmt.Sprintf("%s %s %v", e.Call.Tool, e.Call.ToolUseID, e.Err))
						mu.Unlock()
					}
				},
			})

			t1 := send(t, s, "add 40 and 2")
			if t1.Text != "added" || t1.IsError {
				t.Errorf("turn 1: %q error %v", t1.Text, t1.IsError)
			}
			tr := toolResultFor(t, w, "toolu_add")
			if tr.Content != "42" || tr.IsError {
				t.Errorf("the model got %+v for mcp__sous__add, want 42", tr)
			}
			init := systemInit(t, t1)
			if !slices.Contains(init.Tools, "mcp__sous__add") || !slices.Contains(init.Tools, "mcp__sous__fail") {
				t.Errorf("system/init tools %v lack the session's tools", init.Tools)
			}
			if len(init.MCPServers) != 1 || init.MCPServers[0].Name != "sous" || init.MCPServers[0].Status != "connected" {
				t.Errorf("system/init mcp_servers %+v, want sous connected", init.MCPServers)
			}

			t2 := send(t, s, "now fail")
			if t2.Text != "it failed" || t2.IsError || t2.Subtype != "success" {
				t.Errorf("turn 2: %q error %v subtype %s: a failing tool must not end the turn", t2.Text, t2.IsError, t2.Subtype)
			}
			tr = toolResultFor(t, w, "toolu_fail")
			if !tr.IsError || !strings.Contains(tr.Content, "sous test: the tool failed on purpose") {
				t.Errorf("the model got %+v for mcp__sous__fail, want an error carrying the message", tr)
			}

			ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
			defer cancel()
			raw, err := s.Control(ctx, "mcp_status", nil)
			if err != nil {
				t.Fatal(err)
			}
			var st struct {
				MCPServers []struct {
					Name   string `json:"name"`
					Status string `json:"status"`
					Tools  []struct {
						Name string `json:"name"`
					} `json:"tools"`
				} `json:"mcpServers"`
			}
			json.Unmarshal(raw, &st)
			if len(st.MCPServers) != 1 || st.MCPServers[0].Status != "connected" || len(st.MCPServers[0].Tools) != 2 ||
				st.MCPServers[0].Tools[0].Name != "add" {
				t.Errorf("mcp_status %s, want sous connected with add and fail", raw)
			}
			if reqs := rec.requests(); len(reqs) != 0 {
				t.Errorf("%d permission requests (first %s): the session's tools must be allowed without asking", len(reqs), reqs[0].Tool)
			}
			mu.Lock()
			defer mu.Unlock()
			want := []string{"add toolu_add <nil>", "fail toolu_fail sous test: the tool failed on purpose"}
			if !slices.Equal(calls, want) {
				t.Errorf("observed calls %q, want %q", calls, want)
			}
		})
	}
}

// TestSessionToolDisallowed: a tool that disallowed_tools names is not
// offered to the model, and a call of it never reaches CallTool.
func TestSessionToolDisallowed(t *testing.T) {
	t.Parallel()
	w := newWorld(t, "latest", fakemodel.Options{Func: func(req *fakemodel.Request, n int) fakemodel.Reply {
		if n == 0 {
			return fakemodel.Reply{Blocks: []fakemodel.Block{{Type: "tool_use", ID: "toolu_fail", Name: "mcp__sous__fail",
				Input: map[string]any{}}}}
		}
		return fakemodel.Text("refused")
	}})
	called := make(chan string, 4)
	s := w.start(embedded(t), TransportStdio, Options{
		Tools: addTools, DisallowedTools: []string{"mcp__sous__fail"},
		CallTool: func(ctx context.Context, c ToolCall) (string, error) {
			called <- c.Tool
			return "ran", nil
		},
	})
	turn := send(t, s, "fail please")
	init := systemInit(t, turn)
	if !slices.Contains(init.Tools, "mcp__sous__add") || slices.Contains(init.Tools, "mcp__sous__fail") {
		t.Errorf("system/init tools %v: want add and not the disallowed fail", init.Tools)
	}
	if tr := toolResultFor(t, w, "toolu_fail"); !tr.IsError {
		t.Errorf("the disallowed tool's result %+v, want an error", tr)
	}
	select {
	case name := <-called:
		t.Errorf("CallTool ran %s, which is disallowed", name)
	default:
	}
}

// toolResultFor is the tool result the model got for a tool use.
func toolResultFor(t *testing.T, w *world, toolUseID string) fakemodel.ToolResult {
	t.Helper()
	for _, r := range w.api.Scripted() {
		for _, tr := range r.ToolResults() {
			if tr.ToolUseID == toolUseID {
				return tr
			}
		}
	}
	t.Fatalf("the model never got a result for %s", toolUseID)
	return fakemodel.ToolResult{}
}

type initMessage struct {
	Tools      []string `json:"tools"`
	MCPServers []struct {
		Name   string `json:"name"`
		Status string `json:"status"`
	} `json:"mcp_servers"`
}

// systemInit is a turn's system/init message.
func systemInit(t *testing.T, turn *Turn) initMessage {
	t.Helper()
	for _, raw := range turn.Messages {
		var m struct {
			Type    string `json:"type"`
			Subtype string `json:"subtype"`
			initMessage
		}
		if json.Unmarshal(raw, &m) == nil && m.Type == "system" && m.Subtype == "init" {
			return m.initMessage
		}
	}
	t.Fatal("no system/init in the turn")
	return initMessage{}
}

// fakeMCP is the fake CLI's "mcp" scenario: it plays the CLI's side of the
// in-process MCP server through mcp_message control requests, corners
// included, and reports what sous answered as the result text, a JSON
// object from request id to a summary of the answer ("dup" when answered
// twice).
func fakeMCP(emit func(any), next func() map[string]any) string {
	ask := func(id, server string, msg map[string]any) {
		msg["jsonrpc"] = "2.0"
		emit(map[string]any{"type": "control_request", "request_id": id, "request": map[string]any{
			"subtype": "mcp_message", "server_name": server, "message": msg}})
	}
	call := func(id string, rpcID int, name string, args any) {
		ask(id, "sous", map[string]any{"id": rpcID, "method": "tools/call", "params": map[string]any{
			"name": name, "arguments": args, "_meta": map[string]any{"claudecode/toolUseId": "toolu_" + id}}})
	}
	ask("init", "sous", map[string]any{"id": 0, "method": "initialize", "params": map[string]any{"protocolVersion": "2025-06-18"}})
	ask("initialized", "sous", map[string]any{"method": "notifications/initialized"})
	ask("list", "sous", map[string]any{"id": 1, "method": "tools/list"})
	ask("ping", "sous", map[string]any{"id": 2, "method": "ping"})
	ask("resources", "sous", map[string]any{"id": 3, "method": "resources/list"})
	ask("other", "elsewhere", map[string]any{"id": 4, "method": "tools/list"})
	for i := range 5 {
		call(fmt.Sprint("echo", i), 10+i, "echo", map[string]any{"n": i})
	}
	call("big", 20, "big", nil)
	call("boom", 21, "boom", map[string]any{})
	call("nope", 22, "nope", map[string]any{})
	call("slow", 23, "slow", map[string]any{})
	emit(map[string]any{"type": "control_cancel_request", "request_id": "slow"})
	for id, tool := range map[string]string{"perm-echo": "mcp__sous__echo", "perm-nope": "mcp__sous__nope"} {
		emit(map[string]any{"type": "control_request", "request_id": id, "request": map[string]any{
			"subtype": "can_use_tool", "tool_name": tool, "input": map[string]any{"n": 1}, "tool_use_id": "toolu_" + id}})
	}

	answers := map[string]string{}
	const want = 16 // every request above but the withdrawn one
	fenced := false
	for !fenced {
		r := next()
		if r == nil {
			break
		}
		if r["type"] != "control_response" {
			continue
		}
		resp, _ := r["response"].(map[string]any)
		id := fmt.Sprint(resp["request_id"])
		if _, seen := answers[id]; seen {
			answers[id] = "dup"
			continue
		}
		if id == "fence" {
			fenced = true
			continue
		}
		if resp["subtype"] != "success" {
			answers[id] = "control error: " + fmt.Sprint(resp["error"])
			continue
		}
		body, _ := resp["response"].(map[string]any)
		b, _ := json.Marshal(body)
		if mcp, ok := body["mcp_response"]; ok {
			b, _ = json.Marshal(mcp)
		}
		answers[id] = string(b)
		if len(answers) == want {
			// Anything more (a second answer, an answer to the withdrawn
			// call) would be on its way by now, ahead of the fence's.
			time.Sleep(300 * time.Millisecond)
			ask("fence", "sous", map[string]any{"id": 99, "method": "ping"})
		}
	}
	b, _ := json.Marshal(answers)
	return string(b)
}

// TestFakeMCP drives the MCP server through every message kind the CLI
// sends and some it might: the handshake, ping, tools/list, concurrent
// tools/call (the five echo calls wait for each other, so they must run at
// once), a result over MaxToolResult, a failing and a panicking tool, an
// unknown tool, method and server, and a call the CLI withdraws, which gets
// no answer. Every other request is answered exactly once. A permission
// request for one of the tools is allowed without asking; one for a tool
// the session does not serve is asked as usual.
func TestFakeMCP(t *testing.T) {
	t.Parallel()
	var arrived sync.WaitGroup
	arrived.Add(5)
	withdrawn := make(chan error, 1)
	var mu sync.Mutex
	seqs := map[uint64]string{}
	opt := fakeOptions("mcp")
	opt.Tools = []Tool{{Name: "echo"}, {Name: "big"}, {Name: "boom"}, {Name: "slow"}}
	var asked []string
	opt.Permission = func(ctx context.Context, r Request) (Decision, error) {
		mu.Lock()
		asked = append(asked, r.Tool)
		mu.Unlock()
		return Deny("sous test: asked", false), nil
	}
	opt.CallTool = func(ctx context.Context, c ToolCall) (string, error) {
		mu.Lock()
		seqs[c.Seq] = c.Tool
		mu.Unlock()
		switch c.Tool {
		case "echo":
			arrived.Done()
			done := make(chan struct{})
			go func() { arrived.Wait(); close(done) }()
			select {
			case <-done:
			case <-time.After(10 * time.Second):
				return "", errors.New("the other echo calls never ran concurrently")
			}
			return fmt.Sprintf("echo %s %s", c.Arguments, c.ToolUseID), nil
		case "big":
			return strings.Repeat("a line of the big result\n", 3*MaxToolResult/25), nil
		case "boom":
			panic("kaboom")
		case "slow":
			select {
			case <-ctx.Done():
				withdrawn <- ctx.Err()
			case <-time.After(10 * time.Second):
				withdrawn <- errors.New("never withdrawn")
			}
			return "too late", nil
		}
		return "", fmt.Errorf("no tool %s", c.Tool)
	}
	turn := fakeTurn(t, opt)
	var answers map[string]string
	if err := json.Unmarshal([]byte(turn.Text), &answers); err != nil {
		t.Fatalf("the fake CLI reported %q: %v", turn.Text, err)
	}
	if err := <-withdrawn; !errors.Is(err, context.Canceled) {
		t.Errorf("the withdrawn call's ctx: %v", err)
	}
	for id, want := range map[string]string{
		"init":        `{"id":0,"jsonrpc":"2.0","result":{"capabilities":{"tools":{}},"protocolVersion":"2025-06-18","serverInfo":{"name":"sous","version":"1.0.0"}}}`,
		"initialized": `{"jsonrpc":"2.0","result":{}}`,
		"list": `{"id":1,"jsonrpc":"2.0","result":{"tools":[{"description":"","inputSchema":{"type":"object"},"name":"echo"},` +
			`{"description":"","inputSchema":{"type":"object"},"name":"big"},{"description":"","inputSchema":{"type":"object"},"name":"boom"},` +
			`{"description":"","inputSchema":{"type":"object"},"name":"slow"}]}}`,
		"ping":      `{"id":2,"jsonrpc":"2.0","result":{}}`,
		"resources": `{"error":{"code":-32601,"message":"sous: method \"resources/list\" not found"},"id":3,"jsonrpc":"2.0"}`,
		"other":     `{"error":{"code":-32601,"message":"sous: no in-process MCP server \"elsewhere\""},"id":4,"jsonrpc":"2.0"}`,
		"echo3":     `{"id":13,"jsonrpc":"2.0","result":{"content":[{"text":"echo {\"n\":3} toolu_echo3","type":"text"}]}}`,
		"boom":      `{"id":21,"jsonrpc":"2.0","result":{"content":[{"text":"tool boom panicked: kaboom","type":"text"}],"isError":true}}`,
		"nope":      `{"error":{"code":-32602,"message":"sous: unknown tool \"nope\""},"id":22,"jsonrpc":"2.0"}`,
		"perm-echo": `{"behavior":"allow","toolUseID":"toolu_perm-echo","updatedInput":{"n":1}}`,
		"perm-nope": `{"behavior":"deny","message":"sous test: asked","toolUseID":"toolu_perm-nope"}`,
	} {
		if got := answers[id]; got != want {
			t.Errorf("answer to %s:\n got %s\nwant %s", id, got, want)
		}
	}
	for i := range 5 {
		if got := answers[fmt.Sprint("echo", i)]; !strings.Contains(got, fmt.Sprintf(`echo {\"n\":%d}`, i)) {
			t.Errorf("echo %d answered %s", i, got)
		}
	}
	var big struct {
		Result struct {
			Content []struct{ Text string } `json:"content"`
		} `json:"result"`
	}
	json.Unmarshal([]byte(answers["big"]), &big)
	if len(big.Result.Content) != 1 {
		t.Fatalf("the big result: %.200s", answers["big"])
	}
	text := big.Result.Content[0].Text
	body, note, _ := strings.Cut(text, "[sous: ")
	if len(text) > MaxToolResult || !strings.HasSuffix(body, "a line of the big result\n") ||
		!strings.HasPrefix(note, fmt.Sprintf("the tool's result was %d bytes", 3*MaxToolResult/25*25)) {
		t.Errorf("the big result is %d bytes and ends %q", len(text), text[max(0, len(text)-120):])
	}
	if _, ok := answers["slow"]; ok {
		t.Errorf("the withdrawn call was answered: %s", answers["slow"])
	}
	if len(answers) != 16 {
		t.Errorf("%d answers, want 16: %v", len(answers), slices.Sorted(maps.Keys(answers)))
	}
	mu.Lock()
	defer mu.Unlock()
	if !slices.Equal(asked, []string{"mcp__sous__nope"}) {
		t.Errorf("the permission callback was asked about %v, want only the tool the session does not serve", asked)
	}
	if len(seqs) != 8 || seqs[6] != "big" || seqs[8] != "slow" {
		t.Errorf("calls numbered %v: want 1 to 8 in the order the CLI sent them", seqs)
	}
}

func TestTruncateResult(t *testing.T) {
	t.Parallel()
	if s := "short\n"; truncateResult(s) != s {
		t.Error("a short result changed")
	}
	exact := strings.Repeat("x", MaxToolResult)
	if truncateResult(exact) != exact {
		t.Error("a result of exactly MaxToolResult changed")
	}
	// Lines: cut after a whole line.
	lines := strings.Repeat("0123456789abcdef\n", 2*MaxToolResult/17)
	got := truncateResult(lines)
	body, note, ok := strings.Cut(got, "[sous: ")
	if !ok || len(got) > MaxToolResult || !strings.HasSuffix(body, "0123456789abcdef\n") || len(body)%17 != 0 {
		t.Errorf("lines: %d bytes, body %d bytes ending %q, note %q", len(got), len(body), body[max(0, len(body)-20):], note)
	}
	if want := fmt.Sprintf("the tool's result was %d bytes; only the first %d are shown]", len(lines), len(body)); note != want {
		t.Errorf("note %q, want %q", note, want)
	}
	// No line ends, multi-byte characters: never a broken character.
	runes := strings.Repeat("é✓🙂", MaxToolResult)
	got = truncateResult(runes)
	if len(got) > MaxToolResult || !utf8.ValidString(got) || !strings.Contains(got, "\n[sous: the tool's result was") {
		t.Errorf("runes: %d bytes, valid %v, ends %q", len(got), utf8.ValidString(got), got[max(0, len(got)-100):])
	}
}

func TestCheckTools(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		tools []Tool
		call  bool
		err   string
	}{
		{[]Tool{{Name: "ok_name-2"}}, true, ""},
		{[]Tool{{Name: "bad name"}}, true, `agent: tools: name: want letters, digits, _ and - only, got "bad name"`},
		{[]Tool{{Name: ""}}, true, `agent: tools: name: want letters, digits, _ and - only, got ""`},
		{[]Tool{{Name: "a"}, {Name: "a"}}, true, `agent: tools: two tools named "a"`},
		{[]Tool{{Name: "a", InputSchema: json.RawMessage(`[1]`)}}, true, "agent: tools: a: the input schema is not a JSON object"},
		{[]Tool{{Name: "a"}}, false, "agent: tools: 1 tools but no CallTool to run them"},
	} {
		_, err := checkTools(tc.tools, tc.call)
		if (err == nil) != (tc.err == "") || (err != nil && err.Error() != tc.err) {
			t.Errorf("%+v: %v, want %q", tc.tools, err, tc.err)
		}
	}
}

// TestToolArgs: the session's tools are allowed on the command line unless
// disallowed (by name or as a server), and announced in initialize.
func TestToolArgs(t *testing.T) {
	t.Parallel()
	opt, err := Options{
		Tools: []Tool{{Name: "a"}, {Name: "b"}}, CallTool: callAddTools,
		AllowedTools: []string{"Read"}, DisallowedTools: []string{"mcp__sous__b"},
	}.prepare(true)
	if err != nil {
		t.Fatal(err)
	}
	args := strings.Join(buildArgs(opt), " ")
	if !strings.Contains(args, "--allowedTools Read mcp__sous__a --disallowedTools mcp__sous__b") {
		t.Errorf("args %s", args)
	}
	if init := initializeRequest(opt, nil); !slices.Equal(init["sdkMcpServers"].([]string), []string{"sous"}) {
		t.Errorf("initialize %v", init)
	}
	if opt.servedTool("mcp__sous__a") != "a" || opt.servedTool("mcp__sous__b") != "" || opt.servedTool("Read") != "" {
		t.Error("servedTool")
	}
	opt.DisallowedTools = []string{"mcp__sous"}
	if args := strings.Join(buildArgs(opt), " "); strings.Contains(args, "mcp__sous__a") {
		t.Errorf("a server-wide disallow still allows a tool: %s", args)
	}
	opt = Options{}
	if _, ok := initializeRequest(opt, nil)["sdkMcpServers"]; ok {
		t.Error("a session without tools announces a server")
	}
}

// TestSessionToolBigResult: a tool's 3 MiB result reaches the real CLI cut
// to MaxToolResult at a line end, with sous's note, on one intact protocol
// line over each version and transport; the session goes on. The CLI keeps
// a result that large out of the model's context: it saves it to a file
// and tells the model where (the file holds what sous sent).
func TestSessionToolBigResult(t *testing.T) {
	const line = "a line of the big result\n"
	big := strings.Repeat(line, 3*MaxToolResult/len(line))
	saved := regexp.MustCompile(`saved to (/\S+\.(?:txt|json))`)
	for _, tc := range cliCases {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			w := newWorld(t, tc.version, fakemodel.Options{Func: func(req *fakemodel.Request, n int) fakemodel.Reply {
				switch n {
				case 0:
					return fakemodel.Blocks(fakemodel.Block{Type: "tool_use", ID: "toolu_big", Name: "mcp__sous__big", Input: map[string]any{}})
				case 1:
					return fakemodel.Text("got it")
				}
				return fakemodel.Text("still here")
			}})
			s := w.start(embedded(t), tc.transport, Options{
				Tools:    []Tool{{Name: "big"}},
				CallTool: func(context.Context, ToolCall) (string, error) { return big, nil },
			})
			if turn := send(t, s, "big"); turn.Text != "got it" || !turn.OK() {
				t.Errorf("turn %q %s", turn.Text, turn.Subtype)
			}
			tr := toolResultFor(t, w, "toolu_big")
			m := saved.FindStringSubmatch(tr.Content)
			if m == nil {
				t.Fatalf("the model got %.300q, want the CLI's note of where it saved the result", tr.Content)
			}
			b, err := os.ReadFile(m[1])
			if err != nil {
				t.Fatal(err)
			}
			// 2.1.81 saves the MCP content list as JSON, later CLIs its text.
			text := string(b)
			var content []struct{ Text string }
			if json.Unmarshal(b, &content) == nil && len(content) == 1 {
				text = content[0].Text
			}
			body, note, _ := strings.Cut(text, "[sous: ")
			if len(text) > MaxToolResult || len(body)%len(line) != 0 || !strings.HasSuffix(body, line) ||
				note != fmt.Sprintf("the tool's result was %d bytes; only the first %d are shown]", len(big), len(body)) {
				t.Errorf("the CLI saved %d bytes ending %q", len(text), text[max(0, len(text)-150):])
			}
			if next := send(t, s, "again"); next.Text != "still here" {
				t.Errorf("after the big result: %q", next.Text)
			}
		})
	}
}
