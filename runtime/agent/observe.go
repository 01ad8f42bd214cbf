package agent

import "encoding/json"

// Direction of an observed message.
const (
	In  = "in"  // from the CLI
	Out = "out" // to the CLI
)

// Event is what an Observer sees: a message (Dir, Type, Message), a
// permission decision (Dir Out, Type "permission", Request, Decision, Err)
// or a tool call answered (Dir Out, Type "tool", Call, Err: the tool's
// error, if it failed), or a hook's answer (Dir Out, Type "hook", Hook,
// HookOutput, Err).
// A line from the CLI that is not a JSON message comes as a JSON string with
// an empty Type.
type Event struct {
	Dir     string
	Type    string // the message's "type"
	Message json.RawMessage

	Request  *Request
	Decision *Decision
	Call     *ToolCall
	Err      error // the permission, tool or hook callback's error, if it failed

	Hook       *HookCall
	HookOutput map[string]any // nil: no opinion (or the hook failed)
}

// observe passes e to the Observer, one call at a time.
func (s *Session) observe(e Event) {
	if s.opt.Observer == nil {
		return
	}
	s.obsMu.Lock()
	defer s.obsMu.Unlock()
	s.opt.Observer(e)
}
