package agent

import (
	"context"
	"encoding/json"
	"fmt"
)

// Request is a permission request from the CLI.
type Request struct {
	// Kind is "tool".
	Kind        string
	Tool        string
	Input       map[string]any
	ToolUseID   string
	Description string
	SessionID   string
	// Suggestions are the CLI's permission_suggestions, as sent.
	Suggestions json.RawMessage
	// BlockedPath, DecisionReason and AgentID are the request's
	// blocked_path (the path outside the allowed directories that made the
	// CLI ask), decision_reason (why it asks) and agent_id (the subagent
	// asking); "" when the CLI sends none.
	BlockedPath    string
	DecisionReason string
	AgentID        string
	// RequestID is the control request's id; Raw is its whole payload
	// (fields this package does not know are there).
	RequestID string
	Raw       json.RawMessage
	// Seq is the request's place among the session's permission requests,
	// from 1, in the order the CLI sent them. Callbacks run at once, so
	// this is how a caller that queues them keeps that order.
	Seq uint64
}

// Decision answers a Request.
type Decision struct {
	// Behavior is "allow" or "deny".
	Behavior string
	// UpdatedInput replaces the tool's input when allowing (nil: unchanged).
	UpdatedInput map[string]any
	// UpdatedPermissions are permission updates sent with an allow (see
	// SessionRule).
	UpdatedPermissions []PermissionUpdate
	// Message tells the model why a tool was denied.
	Message string
	// Interrupt, with a deny, also stops the turn.
	Interrupt bool
}

// Allow allows a tool use, optionally with a replaced input and permission
// updates.
func Allow(updatedInput map[string]any, perms ...PermissionUpdate) Decision {
	return Decision{Behavior: "allow", UpdatedInput: updatedInput, UpdatedPermissions: perms}
}

// Deny refuses a tool use with the message the model sees.
func Deny(message string, interrupt bool) Decision {
	return Decision{Behavior: "deny", Message: message, Interrupt: interrupt}
}

// canUseTool handles the CLI's can_use_tool control request: the
// Permission callback decides on its own goroutine, so several requests can
// be pending at once.
func (s *Session) canUseTool(r *incomingRequest) {
	var req struct {
		ToolName    string          `json:"tool_name"`
		Input       map[string]any  `json:"input"`
		ToolUseID   string          `json:"tool_use_id"`
		Description string          `json:"description"`
		Suggestions json.RawMessage `json:"permission_suggestions"`
		BlockedPath string          `json:"blocked_path"`
		Reason      string          `json:"decision_reason"`
		AgentID     string          `json:"agent_id"`
	}
	json.Unmarshal(r.payload, &req)
	if req.Input == nil {
		req.Input = map[string]any{}
	}
	if s.opt.servedTool(req.ToolName) != "" {
		// The session's own tools are allowed without asking: they are in
		// --allowedTools, and a CLI that asks anyway (a permission mode
		// that asks for everything) gets the same answer, from here.
		pr := Request{Kind: "tool", Tool: req.ToolName, Input: req.Input, ToolUseID: req.ToolUseID,
			SessionID: s.ID(), RequestID: r.id, Raw: r.payload}
		d := Allow(nil)
		r.done(nil)
		s.observe(Event{Dir: Out, Type: "permission", Request: &pr, Decision: &d})
		r.respond(permissionResponse(pr, d), pr.ToolUseID)
		return
	}
	s.permSeq++
	pr := Request{
		Kind: "tool", Tool: req.ToolName, Input: req.Input, ToolUseID: req.ToolUseID,
		Description: req.Description, SessionID: s.ID(), Suggestions: req.Suggestions,
		BlockedPath: req.BlockedPath, DecisionReason: req.Reason, AgentID: req.AgentID,
		RequestID: r.id, Raw: r.payload, Seq: s.permSeq,
	}
	go s.answerPermission(r, pr)
}

// answerPermission runs the callback and sends its decision, unless the
// CLI withdrew the request meanwhile.
func (s *Session) answerPermission(r *incomingRequest, pr Request) {
	d, err := s.decide(r.ctx, pr)
	live := r.done(err)
	s.observe(Event{Dir: Out, Type: "permission", Request: &pr, Decision: &d, Err: err})
	if !live {
		return // the CLI withdrew the request: it wants no answer
	}
	r.respond(permissionResponse(pr, d), pr.ToolUseID)
	if err != nil {
		// Stop the turn so the failure surfaces now, but only once the
		// deny has become the tool's result: an interrupt that overtakes
		// it (the CLI reads control requests eagerly) or a deny with
		// interrupt:true makes the CLI replace the message with its
		// stock "user doesn't want to proceed" text. maybeInterrupt sends
		// it.
		s.interruptAfterResult(pr.ToolUseID)
	}
}

// interruptAfterResult makes maybeInterrupt interrupt the turn once the
// tool use has a result.
func (s *Session) interruptAfterResult(toolUseID string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.interruptAfter == nil {
		s.interruptAfter = make(map[string]bool)
	}
	s.interruptAfter[toolUseID] = true
}

// permissionResponse is the can_use_tool answer the CLI expects for d.
func permissionResponse(pr Request, d Decision) map[string]any {
	resp := map[string]any{"behavior": d.Behavior, "toolUseID": pr.ToolUseID}
	if d.Behavior == "allow" {
		in := d.UpdatedInput
		if in == nil {
			in = pr.Input
		}
		resp["updatedInput"] = in
		if len(d.UpdatedPermissions) > 0 {
			resp["updatedPermissions"] = d.UpdatedPermissions
		}
	} else {
		resp["message"] = d.Message
		if d.Interrupt {
			resp["interrupt"] = true
		}
	}
	return resp
}

// decide runs the permission callback and turns every failure into a deny:
// a request must never be left unanswered.
func (s *Session) decide(ctx context.Context, req Request) (d Decision, err error) {
	if s.opt.Permission == nil {
		return Deny("no approver allowed this request", false), nil
	}
	defer func() {
		if r := recover(); r != nil {
			err = fmt.Errorf("permission callback panicked: %v", r)
		}
		if err != nil {
			d = Deny(fmt.Sprintf("sous could not decide on this tool use: %v", err), false)
			err = fmt.Errorf("agent: permission for %s (%s): %w", req.Tool, req.ToolUseID, err)
		}
	}()
	d, err = s.opt.Permission(ctx, req)
	if err != nil {
		return d, err
	}
	switch d.Behavior {
	case "allow":
		if d.UpdatedInput != nil {
			if _, merr := json.Marshal(d.UpdatedInput); merr != nil {
				return d, fmt.Errorf("updated input: %w", merr)
			}
		}
	case "deny":
		if d.Message == "" {
			d.Message = "denied"
		}
	default:
		return d, fmt.Errorf("decision behavior %q: want \"allow\" or \"deny\"", d.Behavior)
	}
	return d, nil
}

// maybeInterrupt interrupts the turn when a tool result arrives for a tool
// use whose permission callback failed.
func (s *Session) maybeInterrupt(line []byte) {
	s.mu.Lock()
	want := len(s.interruptAfter) > 0
	s.mu.Unlock()
	if !want {
		return
	}
	ids := toolResultIDs(userContent(line))
	hit := false
	s.mu.Lock()
	for _, id := range ids {
		if s.interruptAfter[id] {
			delete(s.interruptAfter, id)
			hit = true
		}
	}
	s.mu.Unlock()
	if hit {
		go s.sendInterrupt()
	}
}
