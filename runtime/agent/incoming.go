package agent

import (
	"context"
	"encoding/json"
	"fmt"
)

// An incomingHandler answers one subtype of the CLI's control requests. It
// is called on the reader goroutine, in the order the CLI sent them, and
// must not block: work that takes time (a callback) runs on a goroutine of
// its own, calls r.done when it has its answer, and sends it with
// r.respond or r.respondError only if done says the CLI still waits.
type incomingHandler func(s *Session, r *incomingRequest)

// handlerFor is the handler of a control request subtype, nil for one sous
// does not handle. Answering a new subtype takes a handler (in a file of its
// own) and a case here.
func handlerFor(subtype string) incomingHandler {
	switch subtype {
	case "can_use_tool":
		return (*Session).canUseTool // permission.go
	case "mcp_message":
		return (*Session).mcpMessage // mcpmessage.go
	case "hook_callback":
		return (*Session).hookCallback // hooks.go
	}
	return nil
}

// incomingRequest is a control request from the CLI being answered.
type incomingRequest struct {
	s       *Session
	id      string          // request_id
	payload json.RawMessage // the request: its subtype and the handler's fields
	turn    *turnState      // the turn it arrived in; nil between turns
	// ctx ends when the CLI withdraws the request (control_cancel_request),
	// the handler is done, or the session ends.
	ctx    context.Context
	cancel context.CancelFunc
}

// incomingControl dispatches a control request from the CLI to its
// handler. A subtype without one gets an error response at once, so the CLI
// never waits on sous for something it cannot do.
func (s *Session) incomingControl(env envelope, cur *turnState) {
	var head struct {
		Subtype string `json:"subtype"`
	}
	json.Unmarshal(env.Request, &head)
	r := &incomingRequest{s: s, id: env.RequestID, payload: env.Request, turn: cur}
	handle := handlerFor(head.Subtype)
	if handle == nil {
		r.respondError(fmt.Sprintf("sous does not handle control request %q", head.Subtype))
		return
	}
	r.ctx, r.cancel = context.WithCancel(s.ctx)
	s.mu.Lock()
	s.incoming[r.id] = r
	s.mu.Unlock()
	handle(s, r)
}

// cancelIncoming handles control_cancel_request: the CLI no longer wants
// an answer, so the handler's ctx ends and its answer is dropped.
func (s *Session) cancelIncoming(id string) {
	s.mu.Lock()
	r := s.incoming[id]
	delete(s.incoming, id)
	s.mu.Unlock()
	if r != nil {
		r.cancel()
	}
}

// done ends the request's handling and says whether the CLI still waits
// for an answer (false: it withdrew the request and wants none). A
// handler's err becomes the turn's too (Send returns it with the Turn),
// unless the request was withdrawn: a handler that failed because the CLI
// moved on (an interrupted turn) fails nothing. Call it once.
func (r *incomingRequest) done(err error) (live bool) {
	s := r.s
	s.mu.Lock()
	_, live = s.incoming[r.id]
	delete(s.incoming, r.id)
	if err != nil && r.turn != nil && live {
		r.turn.errs = append(r.turn.errs, err)
	}
	s.mu.Unlock()
	r.cancel()
	return live
}

// respond answers the request with a success response carrying response.
// toolUseID names the tool whose result shows the CLI got the answer (see
// outMeta); "" if none does.
func (r *incomingRequest) respond(response any, toolUseID string) {
	r.s.enqueue(map[string]any{"type": "control_response", "response": map[string]any{
		"subtype": "success", "request_id": r.id, "response": response,
	}}, outMeta{kind: outAnswer, requestID: r.id, toolUseID: toolUseID})
}

// respondError answers the request with an error response; the CLI sees
// msg.
func (r *incomingRequest) respondError(msg string) {
	r.s.enqueue(map[string]any{"type": "control_response", "response": map[string]any{
		"subtype": "error", "request_id": r.id, "error": msg,
	}}, outMeta{kind: outAnswer, requestID: r.id})
}
