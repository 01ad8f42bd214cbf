package agent

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"time"
)

// Transports.
const (
	TransportStdio     = "stdio"
	TransportWebSocket = "websocket"
)

// Options describe a session. The zero value (plus a Permission callback)
// starts "claude" on the daemon in the daemon's working directory.
type Options struct {
	// Cwd is the CLI's working directory on the daemon's host (default: the
	// daemon's).
	Cwd string
	// Model, PermissionMode, AllowedTools, DisallowedTools and MaxTurns map
	// to the CLI's --model, --permission-mode, --allowedTools,
	// --disallowedTools and --max-turns.
	Model           string
	PermissionMode  string
	AllowedTools    []string
	DisallowedTools []string
	MaxTurns        int
	// SystemPrompt replaces the CLI's system prompt; AppendSystemPrompt is
	// added to its end. Both travel in the initialize control request, so
	// their size is not bounded by the command line.
	SystemPrompt       string
	AppendSystemPrompt string
	// CLI is the program and leading arguments: {"claude"} (the default),
	// {"/path/to/claude"} or {"node", "/path/cli.js"}.
	CLI []string
	// Env is merged over the daemon host's environment.
	Env map[string]string
	// Resume continues a previous session by id; with Fork the CLI starts a
	// new session id from a copy of it.
	Resume string
	Fork   bool
	// SessionID is the id of a fresh session, a UUID (default: a random
	// one). Choosing it lets a caller label what it observes before Start
	// returns.
	SessionID string
	// TurnTimeout bounds each turn (0: none). When it passes the turn is
	// interrupted and Send fails with ErrTurnTimeout.
	TurnTimeout time.Duration
	// Transport is TransportStdio (default) or TransportWebSocket.
	Transport string
	// LocalHost says the daemon runs on this machine, so a CLI it starts can
	// reach a WebSocket endpoint on this machine's loopback. An embedded
	// client is always local. The WebSocket transport refuses anything else.
	LocalHost bool
	// Permission answers the CLI's tool permission requests. Several may run
	// at once (one goroutine each). Its ctx is cancelled when the CLI
	// withdraws the request or the session ends. Returning an error denies
	// the request, interrupts the turn, and makes the turn's Send fail with
	// that error. Nil denies every request.
	Permission func(ctx context.Context, req Request) (Decision, error)
	// Observer sees every message in and out and every permission decision,
	// one call at a time, in order. It must return quickly.
	Observer func(Event)
	// ProcessID names the CLI's process on the daemon (default: "claude-"
	// and a random suffix).
	ProcessID string
	// StartTimeout bounds the wait for the CLI to come up and answer
	// initialize (default 60 s).
	StartTimeout time.Duration
	// ExtraArgs are appended to the CLI's command line as they are.
	ExtraArgs []string
}

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

// PermissionUpdate is one entry of updatedPermissions (Claude Code's
// PermissionUpdate): e.g. {Type: "addRules", Rules: ..., Behavior: "allow",
// Destination: "session"}.
type PermissionUpdate struct {
	Type        string           `json:"type"`
	Rules       []PermissionRule `json:"rules,omitempty"`
	Behavior    string           `json:"behavior,omitempty"`
	Destination string           `json:"destination"`
	Mode        string           `json:"mode,omitempty"`
	Directories []string         `json:"directories,omitempty"`
}

// PermissionRule is a tool and an optional rule content: "Bash(git:*)" is
// {ToolName: "Bash", RuleContent: "git:*"}.
type PermissionRule struct {
	ToolName    string `json:"toolName"`
	RuleContent string `json:"ruleContent,omitempty"`
}

// ParseRule splits a rule string in Claude Code's syntax, "Tool" or
// "Tool(content)".
func ParseRule(s string) (PermissionRule, error) {
	s = strings.TrimSpace(s)
	open := strings.IndexByte(s, '(')
	if open < 0 {
		if s == "" || strings.ContainsAny(s, ")") {
			return PermissionRule{}, fmt.Errorf("rule %q: want Tool or Tool(content)", s)
		}
		return PermissionRule{ToolName: s}, nil
	}
	if !strings.HasSuffix(s, ")") || open == 0 {
		return PermissionRule{}, fmt.Errorf("rule %q: want Tool or Tool(content)", s)
	}
	return PermissionRule{ToolName: s[:open], RuleContent: s[open+1 : len(s)-1]}, nil
}

// SessionRule is the permission update that allows a rule for the rest of
// the session ("remember" in recipes). Whether the CLI applies it is its
// decision.
func SessionRule(rule string) (PermissionUpdate, error) {
	r, err := ParseRule(rule)
	if err != nil {
		return PermissionUpdate{}, err
	}
	return PermissionUpdate{Type: "addRules", Rules: []PermissionRule{r}, Behavior: "allow", Destination: "session"}, nil
}

// Turn is the outcome of one user message.
type Turn struct {
	// Text is the result text ("" when the CLI gives none).
	Text       string
	Subtype    string
	IsError    bool
	CostUSD    float64
	NumTurns   int
	DurationMs int64
	SessionID  string
	Usage      map[string]any
	Denials    []Denial
	// Messages are every protocol message the CLI sent during the turn, in
	// order, the result last. keep_alive messages are left out.
	Messages []json.RawMessage
}

// Denial is a tool use the CLI reported as denied in the turn's result.
type Denial struct {
	Tool      string
	ToolUseID string
	Input     map[string]any
}

// Direction of an observed message.
const (
	In  = "in"  // from the CLI
	Out = "out" // to the CLI
)

// Event is what an Observer sees: a message (Dir, Type, Message) or a
// permission decision (Dir Out, Type "permission", Request, Decision, Err).
// A line from the CLI that is not a JSON message comes as a JSON string with
// an empty Type.
type Event struct {
	Dir     string
	Type    string // the message's "type"
	Message json.RawMessage

	Request  *Request
	Decision *Decision
	Err      error // the permission callback's error, if it failed
}
