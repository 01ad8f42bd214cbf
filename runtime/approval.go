package runtime

import (
	"encoding/json"

	"github.com/seed5ad92d46/sous/runtime/rules"
)

// Approvals: a permission request from an agent, or a privileged command,
// goes through a chain of approvers until one decides:
//
//	the session's policy → the recipe's approvals(policy) → Env.Approver
//	(the command line's --allow/--deny, the prompt's "always" rules, then a
//	person, else the default deny)
//
// The recipe's policies are Starlark functions that the builtins call on
// the recipe thread (agent sessions post their requests to the event
// loop); what no policy decided goes to the Env's Approver, the runtime's
// end of the chain (approvals.go). Every decision is logged through
// Output.Approval.
//
// A request that only a person can decide waits for one only when one can
// answer (a terminal, sous run --ui or --ask), and never on the recipe
// thread: Approve hands back a *Waiting, and the caller waits with it on a
// goroutine of its own (an agent session's permission goroutine), or
// through Env.Loop.Wait when it is on the recipe thread (a privileged
// command), so that any number of requests wait at once. A waiting request
// is published, under a random id, to the queue of the run's default
// daemon (the approval.* extension) or, against a daemon without it, to a
// queue in sous: the first answer wins, whoever gives it (asks.go).

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
	// ByRemote is a person who answered through the queue: `sous
	// approvals allow|deny`, the web page.
	ByRemote = "remote"
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
	// Summary is the request in one line (the command, the path, the
	// url), as the queue shows it ("" : the runtime makes one).
	Summary string
	// ID names the request once it waits for a person (Approve sets it):
	// what `sous approvals` and the web page answer by. "" before.
	ID string
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

// Approver decides what no recipe policy decided. Approve is called on
// the recipe thread and never waits for a person: it decides at once (the
// command line's rules, the prompt's "always" rules, or the default deny
// when nobody could answer) and returns a nil *Waiting, or it sets req.ID
// and returns the zero Answer and a *Waiting, whose Wait the caller calls
// off the recipe thread, or through Env.Loop.Wait on it, for the answer.
type Approver interface {
	Approve(req *ApprovalRequest) (Answer, *Waiting)
}

// ApprovalInfo describes a decision for the log.
type ApprovalInfo struct {
	// ID names a request that waited for a person ("" for one decided
	// without asking).
	ID        string
	Kind      string // "tool" or "privileged"
	Session   string // "" for a privileged command
	Tool      string
	ToolUseID string
	Summary   string // what was asked, in one line (the command, the path)
	// Description and Input are the request's own (for the web page).
	Description string
	Input       map[string]any
	Allow       bool
	By          string // "session", "recipe", "flag", "prompt", "remote" or "default"
	Message     string // the deny message
}
