package runtime

import (
	"encoding/json"
	"sync/atomic"
	"time"

	"github.com/seed5ad92d46/sous/runtime/event"
)

// output is the run's Output and its own reports (the log, errors, the
// prompt): each call publishes one event on the run's bus, and the sinks
// subscribed to it (sinks.go) write what they make of it. Nothing here
// writes anything itself.
type output struct {
	bus *event.Bus
	// holding is set while a hold is open (event.State.Holding): Settle,
	// called before every builtin call, looks at it without the bus's
	// lock. holdGen numbers the holds, so that a hold's time limit never
	// settles a later one (lock held).
	holding atomic.Bool
	holdGen uint64
}

// HoldLimit is the longest the human output holds a spawned process's
// lines while the recipe computes without calling a builtin: past it
// they go out, decided with the processes spawned so far.
const HoldLimit = 100 * time.Millisecond

var _ Output = (*output)(nil)

// newOutput is an output with the sinks opt asks for, and now its clock
// (nil: time.Now).
func newOutput(opt Options, now func() time.Time) *output {
	bus := event.New(now)
	subscribeSinks(bus, opt)
	return &output{bus: bus}
}

// start opens the run: the first line of the event stream.
func (o *output) start(opt Options) {
	args := opt.Args
	if args == nil {
		args = map[string]string{}
	}
	o.bus.Publish(&event.Start{Run: opt.RunID, Recipe: opt.Recipe, Args: args, MaxCost: opt.MaxCost})
}

// end closes the run: the last line of the event stream. Anything
// published later is dropped, but for errors and prompts.
func (o *output) end(e *event.End) { o.bus.Publish(e) }

// Log is the recipe's print: a line on stderr, or a log event.
func (o *output) Log(text string) { o.bus.Publish(&event.Log{Text: text}) }

// Error writes an error report to stderr, in every mode.
func (o *output) Error(text string) { o.bus.Publish(&event.Error{Text: text}) }

// Failure reports, in one line, something that failed without stopping the
// run (a deferred call): on stderr in every mode, and as a log event in
// --json mode, where stdout is all a reader may see.
func (o *output) Failure(text string) { o.bus.Publish(&event.Failure{Text: text}) }

// Prompt writes text to stderr as it is (no newline added): a question
// whose answer is typed on the same line. The status area stays hidden
// until PromptDone.
func (o *output) Prompt(text string) { o.bus.Publish(&event.Prompt{Text: text}) }

// PromptDone says the question was answered or given up.
func (o *output) PromptDone() { o.bus.Publish(&event.PromptDone{}) }

// Spawned implements Output.
func (o *output) Spawned(info SpawnInfo) {
	o.bus.Publish(&event.Spawn{ID: info.ID, Pid: info.Pid, Command: info.Command, Host: info.Host,
		Reattached: info.Reattached, Lost: info.Lost})
}

// Exited implements Output.
func (o *output) Exited(id string, exitCode int) {
	o.bus.Publish(&event.Exit{ID: id, ExitCode: exitCode})
}

// Echo implements Output.
func (o *output) Echo(id string) Echo {
	e := &echo{bus: o.bus, id: id}
	e.ev.ID = id
	o.bus.Publish(&event.EchoStart{ID: id})
	return e
}

// EchoBeside implements Output: the echo of a process that runs beside
// the recipe. Its lines are held (event.EchoStart.Held) until the recipe
// settles, at most HoldLimit after the hold opened.
func (o *output) EchoBeside(id string) Echo {
	e := &echo{bus: o.bus, id: id}
	e.ev.ID = id
	o.bus.Lock()
	defer o.bus.Unlock()
	if !o.bus.State().Holding {
		o.holdGen++
		gen := o.holdGen
		time.AfterFunc(HoldLimit, func() { o.settleHold(gen) })
	}
	o.bus.PublishLocked(&event.EchoStart{ID: id, Held: true})
	o.holding.Store(o.bus.State().Holding)
	return e
}

// Settle implements Output. Without a hold open it costs one atomic load:
// it runs before every builtin call.
func (o *output) Settle() {
	if o.holding.Load() {
		o.settleHold(0)
	}
}

// settleHold publishes a Settle if a hold is open: any hold for gen 0,
// else only hold gen (a time limit firing after its hold was settled).
func (o *output) settleHold(gen uint64) {
	o.bus.Lock()
	defer o.bus.Unlock()
	if o.bus.State().Holding && (gen == 0 || gen == o.holdGen) {
		o.bus.PublishLocked(&event.Settle{})
	}
	o.holding.Store(o.bus.State().Holding)
}

// Agent implements Output.
func (o *output) Agent(session, dir string, message json.RawMessage) {
	o.bus.Publish(&event.Agent{Session: session, Dir: dir, Message: message})
}

// Pending implements Output.
func (o *output) Pending(a ApprovalInfo) {
	o.bus.Publish(&event.Pending{Approval: approvalEvent(a)})
}

// Approval implements Output.
func (o *output) Approval(a ApprovalInfo) {
	e := approvalEvent(a)
	o.bus.Publish(&e)
}

func approvalEvent(a ApprovalInfo) event.Approval {
	return event.Approval{ID: a.ID, Kind: a.Kind, Session: a.Session, Tool: a.Tool, ToolUseID: a.ToolUseID,
		Summary: a.Summary, Description: a.Description, Input: a.Input, Allow: a.Allow, By: a.By, Message: a.Message}
}

// Hook implements Output.
func (o *output) Hook(h HookInfo) {
	o.bus.Publish(&event.Hook{Session: h.Session, Event: h.Event, Tool: h.Tool, ToolUseID: h.ToolUseID,
		Summary: h.Summary, Output: h.Output})
}

// Tool implements Output.
func (o *output) Tool(session, tool string, ok bool) {
	o.bus.Publish(&event.Tool{Session: session, Tool: tool, OK: ok})
}
