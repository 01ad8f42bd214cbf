package main

import (
	"bufio"
	"encoding/json"
	"fmt"
	"os"
	"sort"
	"strings"
	"sync"
)

// fakeCLIEnv names the scenario when this test binary runs as a fake
// Claude Code CLI (see TestMain): for loads the real CLI is too heavy for
// on a small machine, such as twenty sessions at once.
const fakeCLIEnv = "SOUS_FAKE_CLI"

// fakeCLI speaks just enough stream-json for one scenario and returns the
// exit code.
//
// "tools": on a user message that starts with "go" it calls the session's tool "bump" five
// times at once ({"n": 0} to {"n": 4}, as mcp_message tools/call requests),
// then pings the server as a fence, and ends the turn with a result whose
// text lists the answers: "c0=TEXT;c1=TEXT;...". On any other user message
// the result is "extra=K", K counting the answers that came beyond one per
// request so far.
func fakeCLI(scenario string) int {
	in := bufio.NewScanner(os.Stdin)
	in.Buffer(make([]byte, 1<<20), 16<<20)
	out := bufio.NewWriter(os.Stdout)
	var mu sync.Mutex
	emit := func(v any) {
		b, _ := json.Marshal(v)
		mu.Lock()
		defer mu.Unlock()
		out.Write(append(b, '\n'))
		out.Flush()
	}
	next := func() map[string]any {
		if !in.Scan() {
			return nil
		}
		var m map[string]any
		json.Unmarshal(in.Bytes(), &m)
		return m
	}
	if scenario != "tools" {
		fmt.Fprintf(os.Stderr, "fake CLI: no scenario %q\n", scenario)
		return 2
	}
	init := next()
	if init == nil {
		return 1
	}
	emit(map[string]any{"type": "control_response", "response": map[string]any{"subtype": "success", "request_id": init["request_id"], "response": map[string]any{}}})
	mcp := func(id string, msg map[string]any) {
		msg["jsonrpc"] = "2.0"
		emit(map[string]any{"type": "control_request", "request_id": id, "request": map[string]any{
			"subtype": "mcp_message", "server_name": "sous", "message": msg}})
	}
	turn, extra := 0, 0
	for m := next(); m != nil; m = next() {
		if m["type"] == "control_response" {
			extra++ // every request was answered already
		}
		if m["type"] != "user" {
			continue
		}
		if msg, _ := m["message"].(map[string]any); !strings.HasPrefix(fmt.Sprint(msg["content"]), "go") {
			emit(map[string]any{"type": "result", "subtype": "success", "is_error": false, "result": fmt.Sprintf("extra=%d", extra),
				"session_id": "fake", "num_turns": 1, "total_cost_usd": 0, "duration_ms": 1, "usage": map[string]any{}})
			continue
		}
		turn++
		for i := range 5 {
			mcp(fmt.Sprintf("t%d-c%d", turn, i), map[string]any{"id": i, "method": "tools/call", "params": map[string]any{
				"name": "bump", "arguments": map[string]any{"n": i}}})
		}
		answers := map[string]string{}
		fence := fmt.Sprintf("t%d-fence", turn)
		for r := next(); r != nil; r = next() {
			if r["type"] != "control_response" {
				continue
			}
			resp, _ := r["response"].(map[string]any)
			id := fmt.Sprint(resp["request_id"])
			if id == fence {
				break
			}
			if _, dup := answers[id]; dup || !strings.HasPrefix(id, fmt.Sprintf("t%d-c", turn)) {
				extra++
				continue
			}
			var body struct {
				MCP struct {
					Result struct {
						Content []struct{ Text string } `json:"content"`
						IsError bool                    `json:"isError"`
					} `json:"result"`
				} `json:"mcp_response"`
			}
			b, _ := json.Marshal(resp["response"])
			json.Unmarshal(b, &body)
			text := "?"
			if c := body.MCP.Result.Content; len(c) == 1 {
				text = c[0].Text
			}
			if body.MCP.Result.IsError {
				text = "error: " + text
			}
			answers[id] = text
			if len(answers) == 5 {
				mcp(fence, map[string]any{"id": 99, "method": "ping"})
			}
		}
		var parts []string
		for id, text := range answers {
			parts = append(parts, strings.TrimPrefix(id, fmt.Sprintf("t%d-", turn))+"="+text)
		}
		sort.Strings(parts)
		emit(map[string]any{"type": "result", "subtype": "success", "is_error": false, "result": strings.Join(parts, ";"),
			"session_id": "fake", "num_turns": 1, "total_cost_usd": 0, "duration_ms": 1, "usage": map[string]any{}})
	}
	return 0
}
