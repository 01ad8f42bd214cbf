package runtime

import (
	"encoding/json"
	"time"

	"github.com/seed5ad92d46/sous/runtime/event"
)

// output is the run's Output and its own reports (the log, errors, the
// prompt): each call publishes one event on the run's bus, and the sinks
// subscribed to it (sinks.go) write what they make of it. Nothing here
// writes anything itself.
type output struct {
	bus  *event.Bus
	hold hold // the echo held for the recipe to settle (hold.go)
}

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
