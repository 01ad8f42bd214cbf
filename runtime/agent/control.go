package agent

import (
	"context"
	"encoding/json"
	"fmt"
	"maps"
	"strconv"
)

// pendingControl is one of sous's control requests awaiting its
// response.
type pendingControl struct {
	ch      chan controlResult
	subtype string
}

// controlResult is the CLI's response to one of sous's control requests.
type controlResult struct {
	response json.RawMessage
	err      error
}

// Interrupt stops the running turn; its Send returns a Turn with subtype
// error_during_execution.
func (s *Session) Interrupt(ctx context.Context) error {
	_, err := s.control(ctx, "interrupt", nil)
	return err
}

// SetModel switches the model for the following requests ("default"
// resets it).
func (s *Session) SetModel(ctx context.Context, model string) error {
	_, err := s.control(ctx, "set_model", map[string]any{"model": model})
	return err
}

// SetPermissionMode changes the permission mode (default, acceptEdits,
// plan, bypassPermissions, dontAsk, ...; the CLI decides which it accepts).
func (s *Session) SetPermissionMode(ctx context.Context, mode string) error {
	_, err := s.control(ctx, "set_permission_mode", map[string]any{"mode": mode})
	return err
}

// sendInterrupt interrupts the running turn on sous's own behalf (a turn
// whose caller gave up, a failed permission callback). The answer does not
// matter: the turn's result says how it ended.
func (s *Session) sendInterrupt() {
	ctx, cancel := context.WithTimeout(s.ctx, interruptGrace)
	defer cancel()
	s.control(ctx, "interrupt", nil)
}

// control sends a control request and waits for its response (matched by
// request_id in controlResponse), the session's end, or ctx.
func (s *Session) control(ctx context.Context, subtype string, fields map[string]any) (json.RawMessage, error) {
	rid := "sous-" + strconv.FormatUint(s.reqSeq.Add(1), 10)
	ch := make(chan controlResult, 1)
	s.mu.Lock()
	if s.dead != nil {
		err := s.dead
		s.mu.Unlock()
		return nil, fmt.Errorf("agent: %s: %w", subtype, err)
	}
	s.controls[rid] = pendingControl{ch: ch, subtype: subtype}
	s.mu.Unlock()
	defer func() {
		s.mu.Lock()
		delete(s.controls, rid)
		s.mu.Unlock()
	}()
	s.enqueue(controlRequest(rid, subtype, fields), outMeta{kind: outControl, requestID: rid})
	select {
	case r := <-ch:
		if r.err != nil {
			return nil, fmt.Errorf("agent: %s: %w", subtype, r.err)
		}
		return r.response, nil
	case <-ctx.Done():
		return nil, fmt.Errorf("agent: %s: no answer from the CLI: %w", subtype, ctx.Err())
	}
}

// controlResponse hands the CLI's response to the control request waiting
// for it.
func (s *Session) controlResponse(raw json.RawMessage) {
	var r struct {
		Subtype   string          `json:"subtype"`
		RequestID string          `json:"request_id"`
		Response  json.RawMessage `json:"response"`
		Error     string          `json:"error"`
	}
	if json.Unmarshal(raw, &r) != nil {
		return
	}
	s.mu.Lock()
	pc := s.controls[r.RequestID]
	delete(s.controls, r.RequestID)
	s.mu.Unlock()
	ch, subtype := pc.ch, pc.subtype
	if ch == nil {
		return // an answer nobody waits for any more
	}
	if r.Subtype == "error" {
		msg := r.Error
		if msg == "" {
			msg = "the CLI answered with an error"
		}
		ch <- controlResult{err: &ControlError{Subtype: subtype, Version: s.Version(), Message: msg}}
		return
	}
	ch <- controlResult{response: r.Response}
}

// controlRequest is a control request as the CLI reads it on its stdin.
func controlRequest(requestID, subtype string, fields map[string]any) map[string]any {
	req := map[string]any{"subtype": subtype}
	maps.Copy(req, fields)
	return map[string]any{"type": "control_request", "request_id": requestID, "request": req}
}

// ControlRequestLine is the stdin line of a control request that carries
// nothing but its subtype ("interrupt"), for a CLI no Session here drives:
// one a resumed run's runner started, reached through process.stdin. The
// CLI's answer goes to whoever reads its output.
func ControlRequestLine(requestID, subtype string) []byte {
	b, err := json.Marshal(controlRequest(requestID, subtype, nil))
	if err != nil {
		panic(fmt.Sprintf("agent: a control request of strings: %v", err)) // cannot happen
	}
	return append(b, '\n')
}
