// Package fakemodel is a scripted stand-in for Anthropic's Messages API, for
// tests and for anyone who wants to run a recipe's agent steps without a
// model, a network or a bill.
//
// A Server listens on loopback and answers POST /v1/messages the way the real
// API does: with server-sent events (message_start, content_block_start /
// content_block_delta / content_block_stop for each text or tool_use block,
// message_delta with the stop reason, message_stop) when the request asks to
// stream, and with one JSON message otherwise. What it says comes from a
// script: a list of replies handed out in order, or a function of the request
// for replies that depend on what the model was sent.
//
//	api, err := fakemodel.Start(fakemodel.Options{Script: []fakemodel.Reply{
//		fakemodel.ToolUse("Write", map[string]any{"file_path": "/tmp/x/hello.txt", "content": "hi\n"}),
//		fakemodel.Text("done"),
//	}})
//	if err != nil { ... }
//	defer api.Close()
//	// run the Claude Code CLI with ANTHROPIC_BASE_URL=api.URL() and ANTHROPIC_API_KEY=test
//
// Each turn of an agent is a loop of requests: the model's tool_use reply is
// answered by the CLI with a tool_result in the next request. So a script for
// "write a file, then say done" is two replies: the ToolUse, then the Text.
//
// Every request is recorded (Requests) so a test can assert what the model
// was sent, e.g. that a denied tool came back as a tool_result with is_error
// and the deny message (Request.ToolResults).
//
// Requests that are not part of the conversation the script drives (the
// CLI's occasional side calls: a non-streaming probe, a title or topic
// request without tools) are answered with SideReply and do not consume the
// script; Options.IsSide decides which those are. POST
// /v1/messages/count_tokens answers a token estimate; every other path is a
// 404 with an API-style error body, which the CLI tolerates.
//
// Everything a Server sends is deterministic: ids are counters
// (msg_scripted_0001, toolu_scripted_0001), usage is fixed per reply, and
// nothing depends on the clock. When the script runs out the server answers
// a text reply that says so and records the event in Exhausted, rather than
// failing with a status the CLI would retry for minutes.
package fakemodel

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"strings"
	"sync"
	"time"
)

// Block is one content block of a reply: text or tool_use.
type Block struct {
	// Type is "text" or "tool_use".
	Type string
	// Text is the text of a text block.
	Text string
	// ID is the tool_use id; empty gets a deterministic one
	// (toolu_scripted_0001, ...).
	ID string
	// Name and Input are the tool and its arguments for a tool_use block.
	Name  string
	Input map[string]any
}

// Reply is what the model says to one request.
type Reply struct {
	Blocks []Block
	// StopReason defaults to "tool_use" when a tool_use block is present,
	// else "end_turn".
	StopReason string
	// InputTokens and OutputTokens are reported as usage (defaults 10 and
	// 5), so cost figures in results are predictable.
	InputTokens, OutputTokens int
	// Status, when non-zero, makes the server answer with an API error of
	// this HTTP status instead (ErrorType and Message fill the body). Beware:
	// the CLI retries 429 and 5xx with backoff.
	Status    int
	ErrorType string
	Message   string
	// Hold, when non-nil, pauses the streamed reply after message_start
	// until Hold is closed or the client gives up on the request (as an
	// interrupted CLI does). Tests use it to catch a turn mid-flight.
	Hold <-chan struct{}
	// ChunkText splits text deltas into pieces of this many bytes (0: one
	// delta per block), to exercise the client's reassembly.
	ChunkText int
}

// Text is a reply with one text block that ends the turn.
func Text(s string) Reply { return Reply{Blocks: []Block{TextBlock(s)}} }

// ToolUse is a reply with one tool_use block: the model asks to run name with
// input.
func ToolUse(name string, input map[string]any) Reply {
	return Reply{Blocks: []Block{ToolUseBlock(name, input)}}
}

// Blocks is a reply made of several blocks (e.g. text then tool_use, or two
// tool uses in one reply).
func Blocks(b ...Block) Reply { return Reply{Blocks: b} }

// TextBlock is a text content block.
func TextBlock(s string) Block { return Block{Type: "text", Text: s} }

// ToolUseBlock is a tool_use content block with a generated id.
func ToolUseBlock(name string, input map[string]any) Block {
	return Block{Type: "tool_use", Name: name, Input: input}
}

// APIError is a reply that fails the request with an HTTP status and an
// Anthropic-style error body.
func APIError(status int, typ, msg string) Reply {
	return Reply{Status: status, ErrorType: typ, Message: msg}
}

// Options configure a Server.
type Options struct {
	// Script is handed out in order, one reply per scripted request.
	Script []Reply
	// Func, when set, is asked for every scripted request instead of
	// Script. n counts scripted requests from 0. It runs on the HTTP
	// handler's goroutine; it may block (the CLI waits).
	Func func(req *Request, n int) Reply
	// IsSide picks the requests that are not part of the scripted
	// conversation (default: a request that does not stream or offers no
	// tools). They get SideReply and do not advance the script.
	IsSide func(req *Request) bool
	// SideReply answers side requests (default: Text("ok")).
	SideReply *Reply
	// Model is reported in replies when the request names none.
	Model string
}

// Request is one recorded request.
type Request struct {
	Method string
	Path   string // without the query
	Query  string
	Header http.Header
	Body   []byte
	// Side reports whether it was answered as a side request.
	Side bool
	// Parsed is Body decoded (zero when Body is not a JSON message request).
	Parsed MessagesRequest
}

// MessagesRequest is the part of a Messages API request tests look at.
type MessagesRequest struct {
	Model     string            `json:"model"`
	Stream    bool              `json:"stream"`
	MaxTokens int               `json:"max_tokens"`
	System    json.RawMessage   `json:"system"`
	Messages  []Message         `json:"messages"`
	Tools     []json.RawMessage `json:"tools"`
}

// Message is one turn of the conversation sent to the model.
type Message struct {
	Role    string          `json:"role"`
	Content json.RawMessage `json:"content"` // a string or a list of blocks
}

// ContentBlock is one block of a message's content, as the model receives it.
type ContentBlock struct {
	Type      string          `json:"type"`
	Text      string          `json:"text,omitempty"`
	ID        string          `json:"id,omitempty"`
	Name      string          `json:"name,omitempty"`
	Input     json.RawMessage `json:"input,omitempty"`
	ToolUseID string          `json:"tool_use_id,omitempty"`
	Content   json.RawMessage `json:"content,omitempty"`
	IsError   bool            `json:"is_error,omitempty"`
}

// Blocks returns the message's content as blocks (a plain string becomes one
// text block).
func (m Message) Blocks() []ContentBlock {
	var s string
	if json.Unmarshal(m.Content, &s) == nil {
		return []ContentBlock{{Type: "text", Text: s}}
	}
	var bs []ContentBlock
	json.Unmarshal(m.Content, &bs)
	return bs
}

// ToolResult is a tool_result block the CLI sent back to the model.
type ToolResult struct {
	ToolUseID string
	// Content is the result's text (text parts joined with newlines).
	Content string
	IsError bool
}

// ToolResults lists the tool_result blocks of the request's last message
// (the results of the tools the previous reply asked for).
func (r *Request) ToolResults() []ToolResult {
	if len(r.Parsed.Messages) == 0 {
		return nil
	}
	var out []ToolResult
	for _, b := range r.Parsed.Messages[len(r.Parsed.Messages)-1].Blocks() {
		if b.Type != "tool_result" {
			continue
		}
		out = append(out, ToolResult{ToolUseID: b.ToolUseID, Content: blockText(b.Content), IsError: b.IsError})
	}
	return out
}

// UserText is the text of the request's last user message, with the CLI's
// <system-reminder> blocks left out.
func (r *Request) UserText() string {
	for i := len(r.Parsed.Messages) - 1; i >= 0; i-- {
		m := r.Parsed.Messages[i]
		if m.Role != "user" {
			continue
		}
		var parts []string
		for _, b := range m.Blocks() {
			if b.Type == "text" && !strings.HasPrefix(strings.TrimSpace(b.Text), "<system-reminder>") {
				parts = append(parts, b.Text)
			}
		}
		return strings.Join(parts, "\n")
	}
	return ""
}

// SystemText is the system prompt as one string (text blocks joined).
func (r *Request) SystemText() string {
	return blockText(r.Parsed.System)
}

func blockText(raw json.RawMessage) string {
	var s string
	if json.Unmarshal(raw, &s) == nil {
		return s
	}
	var bs []ContentBlock
	json.Unmarshal(raw, &bs)
	var parts []string
	for _, b := range bs {
		if b.Type == "text" {
			parts = append(parts, b.Text)
		}
	}
	return strings.Join(parts, "\n")
}

// Server is a running scripted API.
type Server struct {
	opt  Options
	ln   net.Listener
	srv  *http.Server
	done chan struct{}

	mu        sync.Mutex
	requests  []*Request
	scripted  int // scripted requests answered
	nextMsg   int
	nextTool  int
	exhausted []string
}

// Start serves a scripted API on a random loopback port. Close it when done.
func Start(opt Options) (*Server, error) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, fmt.Errorf("fakemodel: listen: %w", err)
	}
	if opt.Model == "" {
		opt.Model = "claude-scripted"
	}
	s := &Server{opt: opt, ln: ln, done: make(chan struct{})}
	s.srv = &http.Server{Handler: s, ReadHeaderTimeout: 10 * time.Second}
	go func() {
		defer close(s.done)
		s.srv.Serve(ln)
	}()
	return s, nil
}

// URL is the base URL to give the CLI as ANTHROPIC_BASE_URL.
func (s *Server) URL() string { return "http://" + s.ln.Addr().String() }

// Close stops the server and aborts requests in flight (held replies too).
func (s *Server) Close() error {
	err := s.srv.Close()
	<-s.done
	return err
}

// Requests returns every request received so far, in arrival order.
func (s *Server) Requests() []*Request {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]*Request(nil), s.requests...)
}

// Scripted returns the requests that were answered from the script.
func (s *Server) Scripted() []*Request {
	s.mu.Lock()
	defer s.mu.Unlock()
	var out []*Request
	for _, r := range s.requests {
		if !r.Side && r.Path == "/v1/messages" {
			out = append(out, r)
		}
	}
	return out
}

// Exhausted lists a note for every scripted request that arrived after the
// script ran out (a test usually asserts it is empty).
func (s *Server) Exhausted() []string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]string(nil), s.exhausted...)
}

// ServeHTTP implements http.Handler.
func (s *Server) ServeHTTP(w http.ResponseWriter, hr *http.Request) {
	body, err := io.ReadAll(io.LimitReader(hr.Body, 64<<20))
	if err != nil {
		writeError(w, http.StatusBadRequest, "invalid_request_error", "fakemodel: read body: "+err.Error())
		return
	}
	req := &Request{Method: hr.Method, Path: hr.URL.Path, Query: hr.URL.RawQuery, Header: hr.Header.Clone(), Body: body}
	if len(body) > 0 {
		json.Unmarshal(body, &req.Parsed)
	}
	switch {
	case hr.Method == http.MethodPost && hr.URL.Path == "/v1/messages":
		s.messages(w, hr.Context(), req)
	case hr.Method == http.MethodPost && hr.URL.Path == "/v1/messages/count_tokens":
		s.record(req)
		writeJSON(w, map[string]any{"input_tokens": estimateTokens(body)})
	default:
		s.record(req)
		writeError(w, http.StatusNotFound, "not_found_error", "fakemodel: no such endpoint: "+hr.Method+" "+hr.URL.Path)
	}
}

func (s *Server) record(req *Request) {
	s.mu.Lock()
	s.requests = append(s.requests, req)
	s.mu.Unlock()
}

func (s *Server) isSide(req *Request) bool {
	if s.opt.IsSide != nil {
		return s.opt.IsSide(req)
	}
	return !req.Parsed.Stream || len(req.Parsed.Tools) == 0
}

func (s *Server) messages(w http.ResponseWriter, ctx context.Context, req *Request) {
	var reply Reply
	if s.isSide(req) {
		req.Side = true
		s.record(req)
		reply = Text("ok")
		if s.opt.SideReply != nil {
			reply = *s.opt.SideReply
		}
	} else {
		s.mu.Lock()
		s.requests = append(s.requests, req)
		n := s.scripted
		s.scripted++
		s.mu.Unlock()
		switch {
		case s.opt.Func != nil:
			reply = s.opt.Func(req, n)
		case n < len(s.opt.Script):
			reply = s.opt.Script[n]
		default:
			note := fmt.Sprintf("scripted request %d arrived after the script's %d replies ran out", n+1, len(s.opt.Script))
			s.mu.Lock()
			s.exhausted = append(s.exhausted, note)
			s.mu.Unlock()
			reply = Text("fakemodel: " + note)
		}
	}
	if reply.Status != 0 {
		typ := reply.ErrorType
		if typ == "" {
			typ = "api_error"
		}
		writeError(w, reply.Status, typ, reply.Message)
		return
	}
	model := req.Parsed.Model
	if model == "" {
		model = s.opt.Model
	}
	msg := s.render(reply, model)
	if !req.Parsed.Stream {
		writeJSON(w, msg.full())
		return
	}
	s.stream(w, ctx, reply, msg)
}

// rendered is a reply with its ids assigned.
type rendered struct {
	id         string
	model      string
	blocks     []Block
	stopReason string
	in, out    int
}

func (s *Server) render(r Reply, model string) rendered {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.nextMsg++
	m := rendered{id: fmt.Sprintf("msg_scripted_%04d", s.nextMsg), model: model, stopReason: r.StopReason, in: r.InputTokens, out: r.OutputTokens}
	if m.in == 0 {
		m.in = 10
	}
	if m.out == 0 {
		m.out = 5
	}
	hasTool := false
	for _, b := range r.Blocks {
		if b.Type == "tool_use" {
			hasTool = true
			if b.ID == "" {
				s.nextTool++
				b.ID = fmt.Sprintf("toolu_scripted_%04d", s.nextTool)
			}
			if b.Input == nil {
				b.Input = map[string]any{}
			}
		}
		m.blocks = append(m.blocks, b)
	}
	if m.stopReason == "" {
		m.stopReason = "end_turn"
		if hasTool {
			m.stopReason = "tool_use"
		}
	}
	return m
}

func (m rendered) usage(out int) map[string]any {
	return map[string]any{"input_tokens": m.in, "output_tokens": out, "cache_creation_input_tokens": 0, "cache_read_input_tokens": 0}
}

func (b Block) wire() map[string]any {
	if b.Type == "tool_use" {
		return map[string]any{"type": "tool_use", "id": b.ID, "name": b.Name, "input": b.Input}
	}
	return map[string]any{"type": "text", "text": b.Text}
}

// full is the non-streaming form of the reply.
func (m rendered) full() map[string]any {
	content := make([]any, 0, len(m.blocks))
	for _, b := range m.blocks {
		content = append(content, b.wire())
	}
	return map[string]any{
		"id": m.id, "type": "message", "role": "assistant", "model": m.model,
		"content": content, "stop_reason": m.stopReason, "stop_sequence": nil,
		"usage": m.usage(m.out),
	}
}

func (s *Server) stream(w http.ResponseWriter, ctx context.Context, r Reply, m rendered) {
	h := w.Header()
	h.Set("Content-Type", "text/event-stream")
	h.Set("Cache-Control", "no-cache")
	h.Set("request-id", "req_"+m.id)
	w.WriteHeader(http.StatusOK)
	fl, _ := w.(http.Flusher)
	var buf bytes.Buffer
	send := func(event string, data any) bool {
		buf.Reset()
		b, _ := json.Marshal(data)
		buf.WriteString("event: ")
		buf.WriteString(event)
		buf.WriteString("\ndata: ")
		buf.Write(b)
		buf.WriteString("\n\n")
		if _, err := w.Write(buf.Bytes()); err != nil {
			return false
		}
		if fl != nil {
			fl.Flush()
		}
		return true
	}
	start := map[string]any{
		"id": m.id, "type": "message", "role": "assistant", "model": m.model,
		"content": []any{}, "stop_reason": nil, "stop_sequence": nil, "usage": m.usage(1),
	}
	if !send("message_start", map[string]any{"type": "message_start", "message": start}) {
		return
	}
	if r.Hold != nil {
		select {
		case <-r.Hold:
		case <-ctx.Done():
			return
		}
	}
	for i, b := range m.blocks {
		var cb map[string]any
		if b.Type == "tool_use" {
			cb = map[string]any{"type": "tool_use", "id": b.ID, "name": b.Name, "input": map[string]any{}}
		} else {
			cb = map[string]any{"type": "text", "text": ""}
		}
		if !send("content_block_start", map[string]any{"type": "content_block_start", "index": i, "content_block": cb}) {
			return
		}
		var deltas []map[string]any
		if b.Type == "tool_use" {
			in, _ := json.Marshal(b.Input)
			deltas = append(deltas, map[string]any{"type": "input_json_delta", "partial_json": string(in)})
		} else {
			for _, piece := range chunks(b.Text, r.ChunkText) {
				deltas = append(deltas, map[string]any{"type": "text_delta", "text": piece})
			}
		}
		for _, d := range deltas {
			if !send("content_block_delta", map[string]any{"type": "content_block_delta", "index": i, "delta": d}) {
				return
			}
		}
		if !send("content_block_stop", map[string]any{"type": "content_block_stop", "index": i}) {
			return
		}
	}
	if !send("message_delta", map[string]any{
		"type":  "message_delta",
		"delta": map[string]any{"stop_reason": m.stopReason, "stop_sequence": nil},
		"usage": map[string]any{"output_tokens": m.out},
	}) {
		return
	}
	send("message_stop", map[string]any{"type": "message_stop"})
}

// chunks splits s into pieces of n bytes without splitting a UTF-8
// character (n <= 0: s whole).
func chunks(s string, n int) []string {
	if n <= 0 || len(s) <= n {
		return []string{s}
	}
	var out []string
	for len(s) > n {
		cut := n
		for cut > 0 && cut < len(s) && !utf8RuneStart(s[cut]) {
			cut--
		}
		if cut == 0 {
			cut = n
		}
		out = append(out, s[:cut])
		s = s[cut:]
	}
	if s != "" {
		out = append(out, s)
	}
	return out
}

func utf8RuneStart(b byte) bool { return b&0xC0 != 0x80 }

// estimateTokens is a fixed function of the body so count_tokens answers
// deterministically: about four bytes per token.
func estimateTokens(body []byte) int { return len(body)/4 + 1 }

func writeJSON(w http.ResponseWriter, v any) {
	b, _ := json.Marshal(v)
	w.Header().Set("Content-Type", "application/json")
	w.Write(b)
}

func writeError(w http.ResponseWriter, status int, typ, msg string) {
	b, _ := json.Marshal(map[string]any{"type": "error", "error": map[string]any{"type": typ, "message": msg}})
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	w.Write(b)
}
