package runtime

import (
	"encoding/json"
	"strings"
)

// HookInfo describes one answer of a recipe's hook to an agent, for the
// log.
type HookInfo struct {
	Session string
	// Event is the hook event: "PreToolUse", "Stop", ...
	Event string
	// Tool and ToolUseID name the tool use of a tool event ("" otherwise);
	// Summary is what the tool was asked to do, in one line.
	Tool      string
	ToolUseID string
	Summary   string
	// Output is the hook's JSON output as sent to the agent; nil when the
	// hook had no opinion.
	Output json.RawMessage
}

// hookVerdict reads a hook's output for the human log: the decision in a
// word and why, as far as the output says. The fields are Claude Code's
// hook output: hookSpecificOutput.permissionDecision (allow, deny, ask)
// with its reason, decision (block, approve) with reason, continue false
// with stopReason, additionalContext, updatedInput.
func hookVerdict(output json.RawMessage) (verdict, why string) {
	var o struct {
		Continue   *bool  `json:"continue"`
		StopReason string `json:"stopReason"`
		Decision   string `json:"decision"`
		Reason     string `json:"reason"`
		System     string `json:"systemMessage"`
		Specific   struct {
			Permission string          `json:"permissionDecision"`
			Why        string          `json:"permissionDecisionReason"`
			Context    string          `json:"additionalContext"`
			Input      json.RawMessage `json:"updatedInput"`
		} `json:"hookSpecificOutput"`
	}
	json.Unmarshal(output, &o)
	var notes []string
	note := func(s string) {
		if s != "" {
			notes = append(notes, s)
		}
	}
	switch {
	case o.Continue != nil && !*o.Continue:
		verdict = "stop"
		note(o.StopReason)
	case o.Specific.Permission != "":
		verdict = o.Specific.Permission
		note(o.Specific.Why)
	case o.Decision != "":
		verdict = o.Decision
		note(o.Reason)
	case o.Specific.Context != "":
		verdict = "context"
	default:
		verdict = "output"
	}
	if len(o.Specific.Input) > 0 && string(o.Specific.Input) != "null" {
		note("input replaced")
	}
	if o.Specific.Context != "" {
		note("context: " + o.Specific.Context)
	}
	note(o.System)
	return verdict, strings.Join(notes, "; ")
}
