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
// A script is one queue for every conversation that reaches the server.
// When several sessions run at once, a reply's When (its prompt must
// contain some text) keeps it for the session that was sent that prompt.
// Scripts also have a JSON form (ParseScript), which `sous model serve`
// and `sous run --fake-model` read.
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
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"sync"
	"time"
)

// Options configure a Server.
type Options struct {
	// Script is handed out in order, one reply per scripted request: each
	// request gets the first reply not handed out yet whose When matches
	// it (a reply without When matches every request).
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
	// Addr is the TCP address to listen on (default "127.0.0.1:0": a
	// random loopback port).
	Addr string
	// OnRequest, when set, is called with every request once it is
	// recorded and its reply chosen, before the reply is written. It may
	// be called from several goroutines at once and must not modify req.
	OnRequest func(req *Request)
}

// Server is a running scripted API.
type Server struct {
	opt  Options
	ln   net.Listener
	srv  *http.Server
	done chan struct{}

	mu        sync.Mutex
	requests  []*Request
	scripted  int    // scripted requests answered
	used      []bool // by Script index: handed out
	nextMsg   int
	nextTool  int
	exhausted []string
}

// Start serves a scripted API on Options.Addr (default: a random loopback
// port). Close it when done.
func Start(opt Options) (*Server, error) {
	addr := opt.Addr
	if addr == "" {
		addr = "127.0.0.1:0"
	}
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return nil, fmt.Errorf("fakemodel: listen: %w", err)
	}
	if opt.Model == "" {
		opt.Model = "claude-scripted"
	}
	s := &Server{opt: opt, ln: ln, done: make(chan struct{}), used: make([]bool, len(opt.Script))}
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

// Exhausted lists a note for every scripted request that found no reply
// left in the script (a test usually asserts it is empty).
func (s *Server) Exhausted() []string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]string(nil), s.exhausted...)
}

// Unused returns the indexes in Options.Script of the replies not handed
// out yet, in order.
func (s *Server) Unused() []int {
	s.mu.Lock()
	defer s.mu.Unlock()
	var out []int
	for i, u := range s.used {
		if !u {
			out = append(out, i)
		}
	}
	return out
}

// ServeHTTP implements http.Handler.
func (s *Server) ServeHTTP(w http.ResponseWriter, hr *http.Request) {
	body, err := io.ReadAll(io.LimitReader(hr.Body, 64<<20))
	if err != nil {
		writeError(w, http.StatusBadRequest, "invalid_request_error", "fakemodel: read body: "+err.Error())
		return
	}
	req := &Request{Method: hr.Method, Path: hr.URL.Path, Query: hr.URL.RawQuery, Header: hr.Header.Clone(), Body: body, Reply: -1}
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
	s.observe(req)
}

func (s *Server) observe(req *Request) {
	if s.opt.OnRequest != nil {
		s.opt.OnRequest(req)
	}
}

func (s *Server) isSide(req *Request) bool {
	if s.opt.IsSide != nil {
		return s.opt.IsSide(req)
	}
	return !req.Parsed.Stream || len(req.Parsed.Tools) == 0
}

func (s *Server) messages(w http.ResponseWriter, ctx context.Context, req *Request) {
	var reply Reply
	switch {
	case s.isSide(req):
		req.Side = true
		s.record(req)
		reply = Text("ok")
		if s.opt.SideReply != nil {
			reply = *s.opt.SideReply
		}
	case s.opt.Func != nil:
		s.mu.Lock()
		s.requests = append(s.requests, req)
		n := s.scripted
		s.scripted++
		s.mu.Unlock()
		s.observe(req)
		reply = s.opt.Func(req, n)
	default:
		if out, ok := structuredFollowUp(req); ok {
			// The turn is over; answering it takes no reply, so a
			// script works the same with CLIs that ask and those that
			// do not.
			req.Side = true
			s.record(req)
			reply = Text(out)
			break
		}
		reply = s.fromScript(req)
		s.observe(req)
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

// fromScript records a scripted request and hands it the first reply of
// the script not handed out yet that matches it; when none is left, a text
// reply saying so (an error status would have the CLI retry for minutes).
func (s *Server) fromScript(req *Request) Reply {
	prompt := req.Prompt()
	s.mu.Lock()
	defer s.mu.Unlock()
	n := s.scripted
	s.scripted++
	left := 0
	for i, r := range s.opt.Script {
		if s.used[i] {
			continue
		}
		left++
		if r.When.matches(prompt) {
			s.used[i] = true
			req.Reply = i
			s.requests = append(s.requests, req)
			return r
		}
	}
	s.requests = append(s.requests, req)
	note := fmt.Sprintf("scripted request %d arrived after the script's %d replies ran out", n+1, len(s.opt.Script))
	if left > 0 {
		note = fmt.Sprintf("scripted request %d (prompt %q) matches none of the %d replies left in the script", n+1, cut(prompt, 60), left)
	}
	s.exhausted = append(s.exhausted, note)
	return Text("fakemodel: " + note)
}

// structuredFollowUp recognises the request some CLIs (2.1.81) make after
// the model's StructuredOutput tool use was accepted, although the turn's
// value is known: its last message holds the tool's result, not an error.
// It returns the value's JSON, which current CLIs make the turn's text.
func structuredFollowUp(req *Request) (string, bool) {
	msgs := req.Parsed.Messages
	if len(msgs) < 2 || msgs[len(msgs)-2].Role != "assistant" {
		return "", false
	}
	inputs := map[string]json.RawMessage{}
	for _, b := range msgs[len(msgs)-2].Blocks() {
		if b.Type == "tool_use" && b.Name == "StructuredOutput" {
			inputs[b.ID] = b.Input
		}
	}
	for _, tr := range req.ToolResults() {
		if in, ok := inputs[tr.ToolUseID]; ok && !tr.IsError {
			return string(in), true
		}
	}
	return "", false
}

// cut shortens s to at most n bytes of whole characters, marking the cut.
func cut(s string, n int) string {
	if len(s) <= n {
		return s
	}
	for n > 0 && !utf8RuneStart(s[n]) {
		n--
	}
	return s[:n] + "..."
}
