package agent

import (
	"encoding/json"
	"fmt"
	"regexp"
	"slices"
	"strings"
	"sync"
)

// ServerName is the name of the in-process MCP server that serves a
// session's Tools to the CLI. The model sees a tool NAME as
// mcp__sous__NAME (ToolName).
const ServerName = "sous"

// ToolName is the name the CLI and the model give the session's tool name.
func ToolName(name string) string { return "mcp__" + ServerName + "__" + name }

// Tool is a tool the session serves to the CLI itself, through the MCP
// server ServerName: its calls come back as mcp_message control requests
// and are run by Options.CallTool.
type Tool struct {
	// Name is the tool's name, [A-Za-z0-9_-]+; the model calls it as
	// ToolName(Name).
	Name        string
	Description string
	// InputSchema is the JSON Schema of the tool's input, a JSON object
	// (nil: any object).
	InputSchema json.RawMessage
}

// ToolCall is one call of a Tool by the model.
type ToolCall struct {
	// Tool is the Tool's Name (without the mcp__sous__ prefix).
	Tool string
	// Arguments is the input the model gave, a JSON object as sent.
	Arguments json.RawMessage
	// ToolUseID is the model's id of the tool use, when the CLI says it
	// ("" otherwise).
	ToolUseID string
	SessionID string
	// Seq is the call's place among the session's tool calls, from 1, in
	// the order the CLI sent them. CallTool runs at once for each, so this
	// is how a caller that queues them keeps that order.
	Seq uint64
}

// MaxToolResult bounds the text of a tool result sent to the CLI: a longer
// one is cut (at a line end when there is one) and ends with a note saying
// so.
const MaxToolResult = 1 << 20

// validToolName is what a Tool's Name may be: the characters the Messages
// API accepts in a tool name. Compiled on first use, not at init: every
// start of sous paid for it (docs/PERFORMANCE.md, the start row).
var validToolName = sync.OnceValue(func() *regexp.Regexp { return regexp.MustCompile(`^[A-Za-z0-9_-]+$`) })

// CheckToolName says why name cannot be a Tool's name, or nil.
func CheckToolName(name string) error {
	if !validToolName().MatchString(name) {
		return fmt.Errorf("want letters, digits, _ and - only, got %q", name)
	}
	return nil
}

// checkTools validates the session's tools and fills in their defaults.
func checkTools(tools []Tool, call bool) ([]Tool, error) {
	if len(tools) == 0 {
		return nil, nil
	}
	if !call {
		return nil, fmt.Errorf("agent: tools: %d tools but no CallTool to run them", len(tools))
	}
	out := make([]Tool, len(tools))
	seen := make(map[string]bool, len(tools))
	for i, t := range tools {
		if err := CheckToolName(t.Name); err != nil {
			return nil, fmt.Errorf("agent: tools: name: %w", err)
		}
		if seen[t.Name] {
			return nil, fmt.Errorf("agent: tools: two tools named %q", t.Name)
		}
		seen[t.Name] = true
		if len(t.InputSchema) == 0 {
			t.InputSchema = json.RawMessage(`{"type":"object"}`)
		}
		var obj map[string]json.RawMessage
		if err := json.Unmarshal(t.InputSchema, &obj); err != nil || obj == nil {
			return nil, fmt.Errorf("agent: tools: %s: the input schema is not a JSON object", t.Name)
		}
		out[i] = t
	}
	return out, nil
}

// toolsAllowed are the mcp__sous__ names of the tools the CLI may use
// without asking: all of them, but those the disallowed rules name (the
// tool's own name, or the whole server).
func toolsAllowed(tools []Tool, disallowed []string) []string {
	var names []string
	for _, t := range tools {
		if !toolDisallowed(t.Name, disallowed) {
			names = append(names, ToolName(t.Name))
		}
	}
	return names
}

// toolDisallowed says whether a disallowed rule names the tool: its
// mcp__sous__ name, or the server as a whole (mcp__sous, mcp__sous__*), as
// in Claude Code's own rules.
func toolDisallowed(name string, disallowed []string) bool {
	server := "mcp__" + ServerName
	return slices.ContainsFunc(disallowed, func(rule string) bool {
		rule = strings.TrimSpace(rule)
		return rule == ToolName(name) || rule == server || rule == server+"__*"
	})
}

// servedTool is the Tool name names when it is one of the session's tools
// the CLI may use without asking ("" otherwise): name is the CLI's
// mcp__sous__NAME.
func (opt Options) servedTool(name string) string {
	short, ok := strings.CutPrefix(name, ToolName(""))
	if !ok {
		return ""
	}
	for _, t := range opt.Tools {
		if t.Name == short && !toolDisallowed(short, opt.DisallowedTools) {
			return short
		}
	}
	return ""
}
