package agent

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"time"
)

// HookEvents are the hook events a session can register callbacks for,
// in the CLI's spelling. SessionStart and SessionEnd are left out, as the
// Agent SDKs' in-process hooks leave them out: they concern the CLI's
// process, not the turns a session drives.
var HookEvents = []string{"PreToolUse", "PostToolUse", "UserPromptSubmit", "Stop", "SubagentStop", "PreCompact", "Notification"}

// Hook is one callback for a hook event.
type Hook struct {
	// Matcher narrows the hook to some tools for PreToolUse and
	// PostToolUse (a tool name, "Write|Edit", a regular expression; the
	// CLI decides). "": every tool.
	Matcher string
	// Timeout is how long the CLI waits for the callback (0: its default).
	// Past it the CLI withdraws the request (control_cancel_request: Func's
	// ctx ends and its answer is dropped); what it does then depends on
	// the version (doc.go).
	Timeout time.Duration
	// Func decides. Its ctx ends when the CLI withdraws the request or the
	// session ends. It returns the hook's JSON output (e.g. {"decision":
	// "block", "reason": "..."}, or {"hookSpecificOutput": {...}}), sent as
	// it is; nil is no opinion ({}). Several may run at once (one goroutine
	// each). An error makes the turn stop (see answerHook) and Send return
	// the error with the Turn.
	Func func(ctx context.Context, call HookCall) (map[string]any, error)
}

// HookCall is one hook_callback request from the CLI.
type HookCall struct {
	// Event is the event the hook was registered for.
	Event string
	// Input is the CLI's hook input (hook_event_name, session_id,
	// tool_name, tool_input, tool_response, prompt, ...), as sent.
	Input json.RawMessage
	// ToolUseID is the request's tool_use_id: the tool use's for
	// PreToolUse and PostToolUse, an id of the CLI's for other events.
	ToolUseID string
	// RequestID is the control request's id.
	RequestID string
	SessionID string
	// Seq is the call's place among the session's hook calls, from 1, in
	// the order the CLI sent them (as Request.Seq is for permissions).
	Seq uint64
}

// CheckHookEvent says whether a session can register hooks for event,
// and if not, why, in one line that names it.
func CheckHookEvent(event string) error {
	for _, e := range HookEvents {
		if e == event {
			return nil
		}
	}
	want := strings.Join(HookEvents, ", ")
	if event == "SessionStart" || event == "SessionEnd" {
		return fmt.Errorf("%q is not available to session hooks (they see the turns, not the CLI's start and end); want one of %s", event, want)
	}
	return fmt.Errorf("unknown event %q; want one of %s", event, want)
}

// checkHooks validates Options.Hooks.
func checkHooks(hooks map[string][]Hook) error {
	for event, hs := range hooks {
		if err := CheckHookEvent(event); err != nil {
			return fmt.Errorf("agent: hooks: %w", err)
		}
		for i, h := range hs {
			if h.Func == nil {
				return fmt.Errorf("agent: hooks: %s[%d]: no function", event, i)
			}
			if h.Timeout < 0 {
				return fmt.Errorf("agent: hooks: %s[%d]: negative timeout %s", event, i, h.Timeout)
			}
		}
	}
	return nil
}

// registeredHook is a hook under the callback id it was registered with.
type registeredHook struct {
	event string
	hook  Hook
}

// hookRegistry is a session's hooks as the CLI knows them: the hooks field
// of initialize and the callbacks by id.
type hookRegistry struct {
	config map[string]any // nil: no hooks
	byID   map[string]registeredHook
}

// registerHooks gives every hook a callback id, one matcher entry each, as
// the Agent SDKs register them: {Event: [{matcher, hookCallbackIds,
// timeout}]}. Events go in HookEvents order, so the ids are stable.
func registerHooks(hooks map[string][]Hook) hookRegistry {
	reg := hookRegistry{byID: map[string]registeredHook{}}
	for _, event := range HookEvents {
		var entries []any
		for _, h := range hooks[event] {
			id := fmt.Sprintf("hook_%d", len(reg.byID))
			reg.byID[id] = registeredHook{event: event, hook: h}
			entry := map[string]any{"hookCallbackIds": []string{id}}
			if h.Matcher != "" {
				entry["matcher"] = h.Matcher
			}
			if h.Timeout > 0 {
				entry["timeout"] = h.Timeout.Seconds()
			}
			entries = append(entries, entry)
		}
		if len(entries) > 0 {
			if reg.config == nil {
				reg.config = map[string]any{}
			}
			reg.config[event] = entries
		}
	}
	return reg
}

// hookCallback handles the CLI's hook_callback control request: the
// hook's Func decides on its own goroutine.
func (s *Session) hookCallback(r *incomingRequest) {
	var req struct {
		CallbackID string          `json:"callback_id"`
		Input      json.RawMessage `json:"input"`
		ToolUseID  string          `json:"tool_use_id"`
	}
	json.Unmarshal(r.payload, &req)
	h, ok := s.hooks.byID[req.CallbackID]
	if !ok {
		r.done(nil)
		r.respondError(fmt.Sprintf("sous has no hook callback %q", req.CallbackID))
		return
	}
	if len(req.Input) == 0 || string(req.Input) == "null" {
		req.Input = json.RawMessage("{}")
	}
	s.hookSeq++
	call := HookCall{
		Event: h.event, Input: req.Input, ToolUseID: req.ToolUseID, RequestID: r.id,
		SessionID: s.ID(), Seq: s.hookSeq,
	}
	go s.answerHook(r, h.hook, call)
}

// answerHook runs a hook's Func and sends its output, unless the CLI
// withdrew the request meanwhile.
func (s *Session) answerHook(r *incomingRequest, h Hook, call HookCall) {
	out, herr := runHook(r.ctx, h, call)
	var err error
	if herr != nil {
		err = fmt.Errorf("agent: %s hook: %w", call.Event, herr)
	}
	live := r.done(err)
	s.observe(Event{Dir: Out, Type: "hook", Hook: &call, HookOutput: out, Err: err})
	if !live {
		return
	}
	if out == nil && err == nil {
		out = map[string]any{} // no opinion
	}
	// A PreToolUse answer has visibly arrived once the tool has a result
	// (see outMeta); the others once the turn ends.
	settledBy := ""
	if call.Event == "PreToolUse" {
		settledBy = call.ToolUseID
	}
	if err == nil {
		r.respond(out, settledBy)
		return
	}
	r.respond(failedHookOutput(call.Event, herr), settledBy)
	// Stop the turn so the failure surfaces now, as for a failed permission
	// callback: the answer says "continue": false, which 2.1.81 ignores
	// after a PreToolUse deny, so a tool hook's turn is also interrupted
	// once the tool's result is in the transcript (maybeInterrupt).
	if call.Event == "PreToolUse" || call.Event == "PostToolUse" {
		s.interruptAfterResult(call.ToolUseID)
	}
}

// runHook calls the hook's Func, turning a panic or an output that is not
// JSON into an error.
func runHook(ctx context.Context, h Hook, call HookCall) (out map[string]any, err error) {
	defer func() {
		if r := recover(); r != nil {
			out, err = nil, fmt.Errorf("hook callback panicked: %v", r)
		}
	}()
	out, err = h.Func(ctx, call)
	if err != nil {
		return nil, err
	}
	if out != nil {
		if _, merr := json.Marshal(out); merr != nil {
			return nil, fmt.Errorf("output: %w", merr)
		}
	}
	return out, nil
}

// failedHookOutput is the answer for a hook whose callback failed: the
// turn stops (continue false), and a PreToolUse hook also denies the
// tool, so a guard that broke lets nothing through.
func failedHookOutput(event string, err error) map[string]any {
	msg := fmt.Sprintf("sous: the %s hook failed: %v", event, err)
	out := map[string]any{"continue": false, "stopReason": msg}
	if event == "PreToolUse" {
		out["hookSpecificOutput"] = map[string]any{
			"hookEventName": "PreToolUse", "permissionDecision": "deny", "permissionDecisionReason": msg,
		}
	}
	return out
}
