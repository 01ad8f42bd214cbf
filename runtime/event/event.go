// Package event is a run's event bus: everything a run says (its log, its
// processes and their output, its agent sessions, the approvals, how it
// ended) is published once, as a typed event, and every output reads it
// from there: the --json stream, the human lines, the live status area on
// a terminal, the final summary, the GitHub Actions annotations, and later
// a web page. None of them keeps its own account of the run: the bus keeps
// one (State), brought up to date with each event before the sinks see it.
//
// Publishing is synchronous: each sink handles an event on the publisher's
// goroutine, under the bus's lock, in the order the sinks subscribed. That
// orders every write of every sink (a line is never cut by another), and a
// slow terminal pushes back on a process's output as it did before there
// was a bus. Output events are the hot path (a recipe that echoes a GiB):
// the echo reuses one *Output for all its chunks, each chunk holds many
// lines, and the bus allocates nothing to hand it on.
//
// The bus is also where secrets are kept out of the run's outputs
// (Bus.Redact, redact.go): every event's text is redacted before the
// State or any sink sees it, so an output added later (a web page, a
// notification) cannot forget to. A run without secrets pays one length
// check per event; with some, an output chunk is redacted into the bus's
// own buffers, and the end of a chunk that may begin a secret waits for
// the stream's next chunk.
//
// Whether a process's lines carry "[id] " is decided here too (State.
// Prefixed), for every sink at the same event: the echo of a process
// started by spawn is held by the human output from its EchoStart (Held)
// to the next Settle, when the processes spawned together are decided
// together.
package event

import (
	"encoding/json"

	"github.com/seed5ad92d46/sous/daemon/wire"
)

// Event is one of the types below.
type Event interface{ event() }

// Start opens the run.
type Start struct {
	// Run is the run's id (Options.RunID).
	Run    string
	Recipe string
	Args   map[string]string
	// MaxCost is the cap on what the run's agent sessions may cost (sous
	// run --max-cost), 0 when there is none.
	MaxCost float64
}

// Log is a line of the recipe's print.
type Log struct{ Text string }

// Error is a report for the person running the recipe (a traceback, a
// "sous: ..." line): on stderr in every mode.
type Error struct{ Text string }

// Failure is something that failed without stopping the run (a deferred
// call): on stderr in every mode, and a log event in the --json stream,
// where stdout is all a reader may see.
type Failure struct{ Text string }

// Spawn is a process the run started or reattached to.
type Spawn struct {
	ID         string
	Pid        int // 0 when unknown
	Command    []string
	Host       string
	Reattached bool
	// Lost counts the frames of a reattach's replay that the daemon no
	// longer had.
	Lost int64
}

// EchoStart and EchoEnd bracket the live echo of a process's output: the
// human output prefixes lines with "[id] " once two processes echo at once.
type EchoStart struct {
	ID string
	// Held: the process runs beside the recipe (spawn), so the human
	// output holds its lines until the next Settle, and decides then
	// whether they carry their ids: processes spawned together are
	// decided together, whichever printed first (State.Holding).
	Held bool
}

// EchoEnd: see EchoStart.
type EchoEnd struct{ ID string }

// Settle says the recipe moved on from the processes it spawned (its
// next builtin call that is not spawn, its end, or the hold's time
// limits: runtime/hold.go): the echo held since the first of them goes out, "[id] "-
// prefixed when two or more processes echo (State.Echoing > 1, counting
// those whose echo ended during the hold). The bus publishes one itself
// before End and when the held output grows past MaxHeld.
type Settle struct{}

// Output is a piece of a process's echoed output: whole lines, or a piece
// of a line longer than the echo holds (it then does not end in a newline).
// Data is valid only while the event is handled.
type Output struct {
	ID     string
	Stream wire.Stream
	Data   []byte
	// MidLine says Data starts in the middle of a line whose first piece
	// went out in an earlier event: no "[id] " prefix before it.
	MidLine bool
	// Last is the end of the stream: Data is the rest of a last line that
	// had no newline (possibly empty, after a piece). The human output
	// ends the line; the --json stream gives the bytes as they are.
	Last bool
}

// Exit is the end of a process (-1: killed by a signal).
type Exit struct {
	ID       string
	ExitCode int
}

// Agent is one protocol message of an agent session, in (from the CLI) or
// out (to it). Session is "" until the CLI has said its session id.
type Agent struct {
	Session string
	Dir     string
	Message json.RawMessage
}

// Approval is a decision on a permission request; Pending, the request
// while it waits for one.
type Approval struct {
	// ID names a request that waited for a person (the id `sous approvals`
	// and the web page answer by); "" for one decided without asking.
	ID        string
	Kind      string // "tool" or "privileged"
	Session   string // "" for a privileged command
	Tool      string
	ToolUseID string
	Summary   string // what was asked, in one line
	// Description and Input are the request's own: what the CLI says the
	// tool use does, and the tool's input (for the web page).
	Description string
	Input       map[string]any
	Allow       bool
	By          string
	Message     string // the deny message
}

// Pending is a permission request that waits for a decision (the
// Approval with the same ID, else the same Kind, Session, Tool and
// ToolUseID, ends it). A request is pending first without an ID while the
// recipe's policies run, then again with its ID when it starts waiting for
// a person: the second updates the first.
type Pending struct{ Approval }

// Tool is one call of a recipe's tool by an agent.
type Tool struct {
	Session string
	Tool    string
	OK      bool
}

// Progress is where one parallel() fan-out stands: Done counts the tasks
// that ended (Failed of them failed), Running those started and not ended,
// Remaining those not started yet; Total is what this shard runs.
// LostHost is set on the event that follows a host of the fan-out's pool
// lost for good.
type Progress struct {
	Done, Running, Failed, Remaining, Total int
	LostHost                                *LostHost
}

// LostHost is a host taken out of a parallel() pool: its target, the
// connection's last error, and how many of its tasks start again on the
// pool's other hosts.
type LostHost struct {
	Target string
	Error  string
	Moved  int
}

// Hook is one answer of a recipe's agent hook.
type Hook struct {
	Session string
	Event   string // "PreToolUse", "Stop", ...
	// Tool, ToolUseID and Summary name the tool use of a tool event.
	Tool      string
	ToolUseID string
	Summary   string
	Output    json.RawMessage // nil: no opinion
}

// Prompt is text of a question to the person at the terminal, written as
// it is; PromptDone says the question was answered (or given up).
type Prompt struct{ Text string }

// PromptDone: see Prompt.
type PromptDone struct{}

// End closes the run.
type End struct {
	Status   string // "ok", "failed", "interrupted", "error"
	ExitCode int
	Error    string // "" when the recipe finished
	// Where the recipe failed: the innermost frame of the recipe's own
	// code, with the text of its line ("" and 0 when the failure has no
	// place in the recipe).
	File   string
	Line   int
	Col    int
	Source string
}

func (*Start) event()      {}
func (*Log) event()        {}
func (*Error) event()      {}
func (*Failure) event()    {}
func (*Spawn) event()      {}
func (*EchoStart) event()  {}
func (*EchoEnd) event()    {}
func (*Settle) event()     {}
func (*Output) event()     {}
func (*Exit) event()       {}
func (*Agent) event()      {}
func (*Approval) event()   {}
func (*Pending) event()    {}
func (*Tool) event()       {}
func (*Hook) event()       {}
func (*Progress) event()   {}
func (*Prompt) event()     {}
func (*PromptDone) event() {}
func (*End) event()        {}
