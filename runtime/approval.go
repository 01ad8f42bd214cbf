package runtime

import (
	"encoding/json"

	"github.com/seed5ad92d46/sous/runtime/rules"
)

// Approvals: a permission request from an agent, or a privileged command,
// goes through a chain of approvers until one decides:
//
//	the session's policy → the recipe's approvals(policy) → Env.Approver
//	(the command line's --allow/--deny, a prompt, the default deny)
//
// The recipe's policies are Starlark functions that the builtins call on
// the recipe thread (agent sessions post their requests to the event
// loop); what no policy decided goes to the Env's Approver, the runtime's
// end of the chain (approvals.go). Every decision is logged through
// Output.Approval.

// Request kinds.
const (
	KindTool       = "tool"
	KindPrivileged = "privileged"
)

// Who decided a request.
const (
	BySession = "session"
	ByRecipe  = "recipe"
	ByFlag    = "flag"
	ByPrompt  = "prompt"
	ByDefault = "default"
)

// DefaultDenyMessage is what the agent sees when no approver decided.
const DefaultDenyMessage = "no approver allowed this request"

// ApprovalRequest is a permission request in Go.
type ApprovalRequest struct {
	Kind        string // KindTool or KindPrivileged
	Tool        string // "Bash", "Write", ...; "Sudo" for privileged commands
	Input       map[string]any
	ToolUseID   string
	Description string
	SessionID   string
	// Cwd is the session's working directory, for rules on relative paths
	// ("" when the session did not set one).
	Cwd string
	// Local says the session's files are on this machine (its host is the
	// embedded daemon or a Unix socket), so rules resolve symlinks in its
	// paths (see rules.Request.Local).
	Local bool
	// Suggestions, BlockedPath, DecisionReason and AgentID are what the
	// agent's CLI sent with the request (permission_suggestions as sent,
	// blocked_path, decision_reason, agent_id); empty when it sent none.
	Suggestions    json.RawMessage
	BlockedPath    string
	DecisionReason string
	AgentID        string
}

// RuleRequest is the request as rules see it.
func (r *ApprovalRequest) RuleRequest() rules.Request {
	return rules.Request{Tool: r.Tool, Input: r.Input, Cwd: r.Cwd, Local: r.Local}
}

// Answer is a decision.
type Answer struct {
	Allow bool
	// Input replaces the tool's input when allowing (nil: unchanged).
	Input map[string]any
	// Remember is a rule the agent may apply for the rest of its session.
	Remember string
	// Updates are permission updates sent with an allow (Claude Code's
	// PermissionUpdate objects as JSON, checked by whoever built them).
	Updates []json.RawMessage
	// Message tells the agent why it was denied; Interrupt also stops the
	// turn.
	Message   string
	Interrupt bool
	By        string
}

// Approver decides what no recipe policy decided. It is called on the
// recipe thread, one request at a time, and always decides.
type Approver interface {
	Approve(req *ApprovalRequest) Answer
}

// ApprovalInfo describes a decision for the log.
type ApprovalInfo struct {
	Kind      string // "tool" or "privileged"
	Session   string // "" for a privileged command
	Tool      string
	ToolUseID string
	Summary   string // what was asked, in one line (the command, the path)
	Allow     bool
	By        string // "session", "recipe", "flag", "prompt" or "default"
	Message   string // the deny message
}
