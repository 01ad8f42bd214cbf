package notify

import (
	"encoding/json"
	"fmt"
	"path/filepath"
	"time"

	"github.com/seed5ad92d46/sous/runtime/event"
)

// Run names the run in every notification.
type Run struct {
	// ID tells one run's notifications from another's.
	ID string `json:"id"`
	// Host is the name of the machine sous runs on; PID sous's process.
	Host string `json:"host,omitempty"`
	PID  int    `json:"pid,omitempty"`
	// Started is when the run began (its start event).
	Started time.Time         `json:"started"`
	Args    map[string]string `json:"args"`
}

// Payload is the JSON object POSTed for each notification. Event is
// "approval" (a request waits for a person: Approval says which), "end"
// (the run finished) or "failed" (it did not: failed, interrupted or
// refused; End says how). Text is a line for a person, which chat
// webhooks that read a "text" field show as it is.
type Payload struct {
	Event    string    `json:"event"`
	Time     time.Time `json:"time"`
	Run      Run       `json:"run"`
	Recipe   string    `json:"recipe"`
	Text     string    `json:"text"`
	Approval *Approval `json:"approval,omitempty"`
	End      *End      `json:"end,omitempty"`
}

// Approval is a request waiting for a person: sous approvals allow|deny
// ID, or the web page, answers it.
type Approval struct {
	ID        string `json:"id"`
	Kind      string `json:"kind"`              // "tool" or "privileged"
	Session   string `json:"session,omitempty"` // none for a privileged command
	Tool      string `json:"tool"`
	ToolUseID string `json:"tool_use_id,omitempty"`
	Summary   string `json:"summary"`
}

// End is how the run ended, as the --json end event says, with where it
// failed and what it did.
type End struct {
	Status   string  `json:"status"` // "ok", "failed", "interrupted", "error"
	ExitCode int     `json:"exit_code"`
	Error    string  `json:"error,omitempty"`
	File     string  `json:"file,omitempty"`
	Line     int     `json:"line,omitempty"`
	Duration float64 `json:"duration_s"`
	// Processes and Sessions count what the run started; CostUSD is what
	// its sessions cost, Budget the --max-cost (omitted without it).
	Processes int      `json:"processes"`
	Sessions  int      `json:"sessions"`
	Denials   int      `json:"denials"`
	CostUSD   float64  `json:"cost_usd"`
	Budget    *float64 `json:"max_cost_usd,omitempty"`
}

// Sink is the bus's side of a Notifier: it turns the events a person
// waits for into payloads and hands them on. Handle runs under the bus's
// lock and only encodes and queues.
type Sink struct {
	n   *Notifier
	run Run
	// bus is the run's bus: its State and its redaction, used under its
	// lock in Handle.
	bus   *event.Bus
	state *event.State
}

// NewSink returns the sink of n on bus, for a run named run (its Started
// and Args come from the start event).
func NewSink(n *Notifier, run Run, bus *event.Bus) *Sink {
	return &Sink{n: n, run: run, bus: bus, state: bus.State()}
}

// Handle implements event.Sink.
func (s *Sink) Handle(at time.Time, e event.Event) {
	switch e := e.(type) {
	case *event.Start:
		s.run.Started, s.run.Args = at, e.Args
	case *event.Pending:
		// Only a request that waits for a person has an id: one that a
		// policy or rule decides at once is not worth a notification.
		if e.ID == "" {
			return
		}
		a := &Approval{ID: e.ID, Kind: e.Kind, Session: e.Session, Tool: e.Tool, ToolUseID: e.ToolUseID, Summary: e.Summary}
		text := fmt.Sprintf("sous: %s waits for approval: %s %s (sous approvals allow|deny %s)", s.name(), e.Tool, e.Summary, e.ID)
		s.send(&Payload{Event: "approval", Time: at, Approval: a, Text: text})
	case *event.End:
		s.send(&Payload{Event: endEvent(e), Time: at, End: s.end(at, e), Text: s.endText(at, e)})
	}
}

// endEvent is the end notification's event: "end" when the run finished,
// "failed" however else it ended. One notification ends a run, never two.
func endEvent(e *event.End) string {
	if e.Status == "ok" {
		return "end"
	}
	return "failed"
}

func (s *Sink) end(at time.Time, e *event.End) *End {
	st := s.state
	end := &End{Status: e.Status, ExitCode: e.ExitCode, Error: e.Error, File: e.File, Line: e.Line,
		Processes: len(st.Procs), Sessions: len(st.Sessions), Denials: len(st.Denials), CostUSD: st.Cost()}
	if !s.run.Started.IsZero() {
		end.Duration = at.Sub(s.run.Started).Round(time.Millisecond).Seconds()
	}
	if st.MaxCost > 0 {
		end.Budget = &st.MaxCost
	}
	return end
}

func (s *Sink) endText(at time.Time, e *event.End) string {
	d := at.Sub(s.run.Started).Round(100 * time.Millisecond)
	switch {
	case e.Status == "ok":
		return fmt.Sprintf("sous: %s finished after %s", s.name(), d)
	case e.Line > 0:
		return fmt.Sprintf("sous: %s %s after %s at line %d: %s", s.name(), e.Status, d, e.Line, e.Error)
	}
	return fmt.Sprintf("sous: %s %s after %s: %s", s.name(), e.Status, d, e.Error)
}

// name is the recipe's file name, for the text.
func (s *Sink) name() string { return filepath.Base(s.bus.RedactLocked(s.state.Recipe)) }

func (s *Sink) send(p *Payload) {
	// The bus redacted this event, but the args and the recipe's path
	// came with the start event, before the recipe could redact() any of
	// them: redact them again now, with the text built from them.
	p.Run, p.Recipe, p.Text = s.run, s.bus.RedactLocked(s.state.Recipe), s.bus.RedactLocked(p.Text)
	p.Run.Args = make(map[string]string, len(s.run.Args))
	for k, v := range s.run.Args {
		p.Run.Args[k] = s.bus.RedactLocked(v)
	}
	b, err := json.Marshal(p)
	if err != nil {
		return // only strings, numbers and times: cannot happen
	}
	s.n.Send(b)
}
