package wire

import "time"

// The approval queue extension (docs/PROTOCOL.md §6, "approval.*"): a run
// publishes the permission requests that wait for a person to the daemon
// that runs its processes, so that any holder of the daemon's token can
// list and answer them (`sous approvals`, the daemon's web page) from
// another shell, another machine or a browser. The daemon is the arbiter:
// the first answer wins, whoever gives it (the run's own terminal prompt
// and timeout answer through the daemon too), and a later one is refused
// with CodeApprovalDecided.
const FeatureApprovalQueue = "approval.queue"

// ApprovalMethods are the extension's methods, in the order
// server.capabilities lists them.
var ApprovalMethods = []string{"approval.publish", "approval.list", "approval.answer", "approval.wait", "approval.withdraw"}

// Errors of approval.answer.
const (
	// CodeApprovalDecided: the request was decided already (or withdrawn);
	// the message says by whom.
	CodeApprovalDecided = -32020
	// CodeApprovalUnknown: no request has that id (never published, or
	// forgotten since: withdrawn by its run, or its run gone).
	CodeApprovalUnknown = -32021
)

// Ask is a permission request waiting for a person: approval.publish's
// params and an element of approval.list's result.
type Ask struct {
	// ID is unique on the daemon: the run chooses it (random), and a
	// publish of an id another run holds is refused.
	ID string `json:"id"`
	// Run names the run that asks (its id), Recipe its recipe file.
	Run    string `json:"run"`
	Recipe string `json:"recipe,omitempty"`
	// Kind is "tool" (an agent's tool use) or "privileged" (a command to
	// run as root).
	Kind    string `json:"kind"`
	Session string `json:"session,omitempty"`
	Tool    string `json:"tool"`
	// Summary is the request in one line (the command, the path, the
	// url); Input the tool's input as the agent gave it.
	Summary     string         `json:"summary"`
	Description string         `json:"description,omitempty"`
	Input       map[string]any `json:"input,omitempty"`
	Since       time.Time      `json:"since"`
}

// AskAnswer is a decision on an Ask: approval.answer's params and an
// element of approval.wait's result.
type AskAnswer struct {
	ID       string `json:"id"`
	Decision string `json:"decision"` // "allow" or "deny"
	Message  string `json:"message,omitempty"`
	// By says who decided: "remote" for a person through the daemon,
	// "prompt" for the run's terminal, "default" for its timeout.
	By string `json:"by,omitempty"`
}

// Decisions.
const (
	DecisionAllow = "allow"
	DecisionDeny  = "deny"
)

// AskListResult is approval.list's result: the pending requests, oldest
// first.
type AskListResult struct {
	Approvals []Ask `json:"approvals"`
}

// AskWaitParams are approval.wait's params: it answers once one of IDs is
// decided (at once if one is), or after TimeoutMs (default and at most
// 30 s) with none. Each wait also tells the daemon that the run still
// waits for these requests: one that no wait names for a minute is
// forgotten (its run is gone).
type AskWaitParams struct {
	IDs       []string `json:"ids"`
	TimeoutMs int      `json:"timeout_ms,omitempty"`
}

// AskWaitResult is approval.wait's result: the decided requests among the
// ids (empty after the timeout). A decided request stays known, and is
// returned by each wait that names it, until approval.withdraw.
type AskWaitResult struct {
	Decided []AskAnswer `json:"decided"`
}

// AskIDsParams are approval.withdraw's params: the run no longer waits for
// these requests (it ended, or the agent withdrew the request); a pending
// one among them is decided as withdrawn, so a later answer is refused.
type AskIDsParams struct {
	IDs []string `json:"ids"`
}
