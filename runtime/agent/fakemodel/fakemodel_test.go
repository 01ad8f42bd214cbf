package fakemodel

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"reflect"
	"strings"
	"sync"
	"testing"
	"time"
)

func post(t *testing.T, url, body string) *http.Response {
	t.Helper()
	resp, err := http.Post(url, "application/json", strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { resp.Body.Close() })
	return resp
}

// events reads a server-sent event stream into (event, data) pairs.
func events(t *testing.T, r io.Reader) [][2]string {
	t.Helper()
	var out [][2]string
	sc := bufio.NewScanner(r)
	var ev string
	for sc.Scan() {
		line := sc.Text()
		switch {
		case strings.HasPrefix(line, "event: "):
			ev = strings.TrimPrefix(line, "event: ")
		case strings.HasPrefix(line, "data: "):
			out = append(out, [2]string{ev, strings.TrimPrefix(line, "data: ")})
		}
	}
	return out
}

const streamReq = `{"model":"claude-x","stream":true,"max_tokens":100,"tools":[{"name":"Write"}],"messages":[{"role":"user","content":"hi"}]}`

func TestStreamedScript(t *testing.T) {
	s, err := Start(Options{Script: []Reply{
		Blocks(TextBlock("let me write"), ToolUseBlock("Write", map[string]any{"file_path": "/x", "content": "é"})),
		{Blocks: []Block{TextBlock("done ✓✓")}, ChunkText: 4},
	}})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()

	resp := post(t, s.URL()+"/v1/messages?beta=true", streamReq)
	if ct := resp.Header.Get("Content-Type"); ct != "text/event-stream" {
		t.Fatalf("content type %q", ct)
	}
	var names []string
	var toolJSON, stop string
	for _, e := range events(t, resp.Body) {
		names = append(names, e[0])
		var d map[string]any
		if err := json.Unmarshal([]byte(e[1]), &d); err != nil {
			t.Fatalf("%s data is not JSON: %v", e[0], err)
		}
		if d["type"] != e[0] {
			t.Errorf("event %s carries type %v", e[0], d["type"])
		}
		if delta, ok := d["delta"].(map[string]any); ok {
			if pj, ok := delta["partial_json"].(string); ok {
				toolJSON += pj
			}
			if sr, ok := delta["stop_reason"].(string); ok {
				stop = sr
			}
		}
	}
	want := "message_start content_block_start content_block_delta content_block_stop content_block_start content_block_delta content_block_stop message_delta message_stop"
	if got := strings.Join(names, " "); got != want {
		t.Errorf("events:\n got %s\nwant %s", got, want)
	}
	if toolJSON != `{"content":"é","file_path":"/x"}` || stop != "tool_use" {
		t.Errorf("tool input %s, stop %s", toolJSON, stop)
	}

	// The second reply's text comes in 4-byte deltas that never split a
	// character.
	resp = post(t, s.URL()+"/v1/messages", streamReq)
	var text []string
	for _, e := range events(t, resp.Body) {
		var d struct {
			Delta struct {
				Text string `json:"text"`
			} `json:"delta"`
		}
		json.Unmarshal([]byte(e[1]), &d)
		if e[0] == "content_block_delta" {
			text = append(text, d.Delta.Text)
		}
	}
	if strings.Join(text, "") != "done ✓✓" || len(text) < 3 {
		t.Errorf("text deltas %q", text)
	}

	// Past the script: a reply that says so, and a note.
	resp = post(t, s.URL()+"/v1/messages", streamReq)
	io.Copy(io.Discard, resp.Body)
	if ex := s.Exhausted(); len(ex) != 1 || !strings.Contains(ex[0], "ran out") {
		t.Errorf("exhausted %v", ex)
	}
	if n := len(s.Scripted()); n != 3 {
		t.Errorf("%d scripted requests recorded", n)
	}
	if m := s.Scripted()[0].Parsed.Messages; len(m) != 1 || m[0].Blocks()[0].Text != "hi" {
		t.Errorf("recorded messages %+v", m)
	}
}

func TestSideRequestsAndOtherEndpoints(t *testing.T) {
	s, err := Start(Options{Script: []Reply{Text("scripted")}})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	// A non-streaming request is a side request: answered, script untouched.
	resp := post(t, s.URL()+"/v1/messages", `{"model":"claude-haiku","max_tokens":1,"messages":[{"role":"user","content":"quota"}]}`)
	var msg struct {
		Type       string `json:"type"`
		StopReason string `json:"stop_reason"`
		Content    []struct {
			Text string `json:"text"`
		} `json:"content"`
	}
	json.NewDecoder(resp.Body).Decode(&msg)
	if msg.Type != "message" || msg.StopReason != "end_turn" || msg.Content[0].Text != "ok" {
		t.Errorf("side reply %+v", msg)
	}
	resp = post(t, s.URL()+"/v1/messages/count_tokens", `{"messages":[]}`)
	var ct map[string]int
	json.NewDecoder(resp.Body).Decode(&ct)
	if resp.StatusCode != 200 || ct["input_tokens"] <= 0 {
		t.Errorf("count_tokens %d %v", resp.StatusCode, ct)
	}
	r, err := http.Get(s.URL() + "/v1/models")
	if err != nil {
		t.Fatal(err)
	}
	r.Body.Close()
	if r.StatusCode != 404 {
		t.Errorf("GET /v1/models: %d", r.StatusCode)
	}
	// The script is still whole.
	resp = post(t, s.URL()+"/v1/messages", streamReq)
	if body, _ := io.ReadAll(resp.Body); !strings.Contains(string(body), "scripted") {
		t.Errorf("first scripted reply: %s", body)
	}
	reqs := s.Requests()
	if len(reqs) != 4 || !reqs[0].Side || reqs[3].Side {
		t.Errorf("recorded %d requests", len(reqs))
	}
}

func TestErrorReplyAndHold(t *testing.T) {
	hold := make(chan struct{})
	s, err := Start(Options{Script: []Reply{
		APIError(400, "invalid_request_error", "bad tools"),
		{Blocks: []Block{TextBlock("held")}, Hold: hold},
	}})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	resp := post(t, s.URL()+"/v1/messages", streamReq)
	body, _ := io.ReadAll(resp.Body)
	if resp.StatusCode != 400 || !strings.Contains(string(body), `"type":"invalid_request_error"`) {
		t.Errorf("error reply %d %s", resp.StatusCode, body)
	}
	// A held reply streams message_start, then waits; a client that gives
	// up ends it.
	ctx, cancel := context.WithCancel(context.Background())
	req, _ := http.NewRequestWithContext(ctx, "POST", s.URL()+"/v1/messages", strings.NewReader(streamReq))
	r, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	br := bufio.NewReader(r.Body)
	first, _ := br.ReadString('\n')
	if first != "event: message_start\n" {
		t.Errorf("first line %q", first)
	}
	got := make(chan string, 1)
	go func() {
		rest, _ := io.ReadAll(br)
		got <- string(rest)
	}()
	select {
	case rest := <-got:
		t.Fatalf("a held reply finished: %q", rest)
	case <-time.After(200 * time.Millisecond):
	}
	cancel()
	<-got
	r.Body.Close()
}

// convo is a streamed request with tools whose conversation is msgs.
func convo(msgs string) string {
	return `{"model":"claude-x","stream":true,"tools":[{"name":"Bash"}],"messages":` + msgs + `}`
}

// replyText reads a streamed reply's text.
func replyText(t *testing.T, resp *http.Response) string {
	t.Helper()
	var text string
	for _, e := range events(t, resp.Body) {
		var d struct {
			Delta struct {
				Text string `json:"text"`
			} `json:"delta"`
		}
		json.Unmarshal([]byte(e[1]), &d)
		text += d.Delta.Text
	}
	return text
}

// TestWhenPrompt: a reply with When goes to the first request whose
// prompt matches, whatever the order; a follow-up request of a turn (tool
// results last) has the turn's prompt; a request nothing left matches gets
// a reply saying so; Unused lists what no request took.
func TestWhenPrompt(t *testing.T) {
	var mu sync.Mutex
	var seen []string
	s, err := Start(Options{
		Script: []Reply{
			{Blocks: []Block{TextBlock("for beta")}, When: &When{PromptContains: "beta"}},
			{Blocks: []Block{TextBlock("for alpha")}, When: &When{PromptContains: "alpha"}},
			{Blocks: []Block{TextBlock("alpha again")}, When: &When{PromptContains: "alpha"}},
			Text("anyone"),
			{Blocks: []Block{TextBlock("never")}, When: &When{PromptContains: "gamma"}},
		},
		OnRequest: func(r *Request) {
			mu.Lock()
			defer mu.Unlock()
			seen = append(seen, fmt.Sprintf("%s %v %d %q", r.Path, r.Side, r.Reply, r.Prompt()))
		},
	})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	alpha := `[{"role":"user","content":[{"type":"text","text":"<system-reminder>be nice</system-reminder>"},{"type":"text","text":"task alpha"}]}]`
	alphaTool := `[{"role":"user","content":"task alpha"},{"role":"assistant","content":[{"type":"tool_use","id":"t1","name":"Bash","input":{}}]},` +
		`{"role":"user","content":[{"type":"tool_result","tool_use_id":"t1","content":"ok"},{"type":"text","text":"beta is mentioned here"}]}]`
	for _, c := range []struct{ msgs, want string }{
		{alpha, "for alpha"},
		{alphaTool, "alpha again"},
		{`[{"role":"user","content":"task beta"}]`, "for beta"},
		{`[{"role":"user","content":"task delta"}]`, "anyone"},
		{`[{"role":"user","content":"task alpha"}]`, `fakemodel: scripted request 5 (prompt "task alpha") matches none of the 1 replies left in the script`},
	} {
		if got := replyText(t, post(t, s.URL()+"/v1/messages", convo(c.msgs))); got != c.want {
			t.Errorf("prompt of %s: reply %q, want %q", c.msgs, got, c.want)
		}
	}
	post(t, s.URL()+"/v1/messages", `{"model":"claude-haiku","messages":[{"role":"user","content":"title?"}]}`)
	if u := s.Unused(); !reflect.DeepEqual(u, []int{4}) {
		t.Errorf("unused %v, want [4]", u)
	}
	if ex := s.Exhausted(); len(ex) != 1 || !strings.Contains(ex[0], "matches none") {
		t.Errorf("exhausted %v", ex)
	}
	want := []string{
		`/v1/messages false 1 "task alpha"`, `/v1/messages false 2 "task alpha"`, `/v1/messages false 0 "task beta"`,
		`/v1/messages false 3 "task delta"`, `/v1/messages false -1 "task alpha"`, `/v1/messages true -1 "title?"`,
	}
	if !reflect.DeepEqual(seen, want) {
		t.Errorf("OnRequest saw\n%s\nwant\n%s", strings.Join(seen, "\n"), strings.Join(want, "\n"))
	}
}

func TestAddr(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := ln.Addr().String()
	ln.Close()
	s, err := Start(Options{Addr: addr, Script: []Reply{Text("here")}})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	if s.URL() != "http://"+addr {
		t.Errorf("URL %s, want http://%s", s.URL(), addr)
	}
	if _, err := Start(Options{Addr: addr}); err == nil || !strings.HasPrefix(err.Error(), "fakemodel: listen: ") {
		t.Errorf("a second server on %s: %v", addr, err)
	}
}

// TestStructuredFollowUp: the request after an accepted StructuredOutput
// tool use is answered with the value's JSON without taking a reply; after
// a rejected one (an error result) the script goes on.
func TestStructuredFollowUp(t *testing.T) {
	s, err := Start(Options{Script: []Reply{Text("retry please"), Text("next turn")}})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	turn := func(isError bool) string {
		return `[{"role":"user","content":"report"},{"role":"assistant","content":[{"type":"tool_use","id":"t9","name":"StructuredOutput","input":{"plan":"p"}}]},` +
			fmt.Sprintf(`{"role":"user","content":[{"type":"tool_result","tool_use_id":"t9","content":"ok","is_error":%v}]}]`, isError)
	}
	if got := replyText(t, post(t, s.URL()+"/v1/messages", convo(turn(true)))); got != "retry please" {
		t.Errorf("after a rejected StructuredOutput: %q", got)
	}
	if got := replyText(t, post(t, s.URL()+"/v1/messages", convo(turn(false)))); got != `{"plan":"p"}` {
		t.Errorf("after an accepted StructuredOutput: %q", got)
	}
	if u := s.Unused(); !reflect.DeepEqual(u, []int{1}) {
		t.Errorf("unused %v: the follow-up took a reply", u)
	}
	if r := s.Requests(); len(r) != 2 || r[0].Side || !r[1].Side {
		t.Errorf("requests %+v", r)
	}
}
