package webui

import (
	"bytes"
	"io"
	"sync"
	"time"

	"github.com/seed5ad92d46/sous/daemon/wire"
	"github.com/seed5ad92d46/sous/runtime/event"
)

// Bounds of what a hub keeps, which is what a page that joins late gets:
// a run that prints gigabytes, or a daemon with a thousand processes, must
// not grow sous or the page without limit.
const (
	// OutputTail is how much of each process's output is kept (the
	// newest bytes).
	OutputTail = 64 << 10
	// MaxProcesses is how many processes are kept; past it the oldest
	// that exited go first.
	MaxProcesses = 256
	// MaxSessions is how many agent sessions are kept, the oldest going
	// first.
	MaxSessions = 64
	// SessionMessages and SessionBytes bound each session's recent
	// messages (the oldest go first).
	SessionMessages = 200
	SessionBytes    = 512 << 10
)

// Encoder makes the sink that writes events as the --json stream does
// (runtime.JSONEvents): the page's live events are those same objects.
type Encoder func(w io.Writer) event.Sink

// Hub is what a page shows, kept up to date from events, and the event
// streams of the pages that watch it. It is an event.Sink: a run
// subscribes it to its bus (AttachRun); the daemon page feeds it the
// events it makes of the daemon's processes (DaemonFeed).
type Hub struct {
	kind string // "run" or "daemon"
	now  func() time.Time

	mu      sync.Mutex
	encode  event.Sink   // the --json encoding, writing into encoded
	encoded bytes.Buffer // one event's lines
	frame   []byte       // the SSE frames made of them
	// state is the run's own account (event.State), read in Handle only,
	// under the bus's lock; nil for a daemon.
	state     *event.State
	title     string
	started   time.Time
	procs     []*procView
	procIndex map[string]*procView
	sessions  []*sessionView
	sessIndex map[string]*sessionView
	approvals []Approval
	end       *endView
	subs      map[*subscriber]struct{}
	closed    bool
}

// NewHub returns an empty hub for a page of kind "run" or "daemon" titled
// title; enc is the --json encoding (runtime.JSONEvents), now the clock
// (nil: time.Now).
func NewHub(kind, title string, enc Encoder, now func() time.Time) *Hub {
	if now == nil {
		now = time.Now
	}
	h := &Hub{kind: kind, title: title, now: now, started: now(),
		procIndex: make(map[string]*procView), sessIndex: make(map[string]*sessionView),
		subs: make(map[*subscriber]struct{})}
	h.encode = enc(&h.encoded)
	return h
}

// AttachRun subscribes the hub to a run's bus. Call it before the first
// event (runtime.Options.Steer is called then).
func (h *Hub) AttachRun(bus *event.Bus) {
	h.mu.Lock()
	h.state = bus.State()
	h.mu.Unlock()
	bus.Subscribe(h)
}

// Handle implements event.Sink. It runs on the publisher's goroutine (the
// run's, or a process's output), so it never waits for a page: each page's
// stream has a bounded queue, and one that falls behind is dropped.
func (h *Hub) Handle(at time.Time, e event.Event) {
	h.mu.Lock()
	defer h.mu.Unlock()
	approvalsMoved := false
	switch e := e.(type) {
	case *event.Start:
		h.title, h.started = e.Recipe, at
	case *event.Spawn:
		h.addProc(&procView{id: e.ID, command: e.Command, host: e.Host, pid: e.Pid, started: at})
	case *event.Output:
		if p := h.procIndex[e.ID]; p != nil {
			p.tail.add(e.Stream, e.Data)
		}
	case *event.Exit:
		if p := h.procIndex[e.ID]; p != nil && !p.exited {
			p.exited, p.exitCode, p.ended = true, e.ExitCode, at
		}
	case *event.Agent:
		h.noteAgent(e)
	case *event.Pending:
		if e.ID != "" {
			h.pending(approvalOf(e.Approval, at))
			approvalsMoved = true
		}
	case *event.Approval:
		approvalsMoved = h.decided(e)
		h.refreshSession(e.Session)
	case *event.End:
		h.end = &endView{Status: e.Status, ExitCode: e.ExitCode, Error: e.Error, Time: at}
	}
	if len(h.subs) == 0 {
		return // nobody watches: no encoding on the run's hot path
	}
	h.encoded.Reset()
	h.encode.Handle(at, e)
	h.broadcastLines(h.encoded.Bytes())
	if approvalsMoved {
		h.broadcastApprovals(at)
	}
}

// SetApprovals replaces the pending requests (the daemon's queue, read
// after each change).
func (h *Hub) SetApprovals(asks []wire.Ask) {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.approvals = h.approvals[:0]
	for _, a := range asks {
		h.approvals = append(h.approvals, Approval{ID: a.ID, Run: a.Run, Recipe: a.Recipe, Kind: a.Kind,
			Session: a.Session, Tool: a.Tool, Summary: a.Summary, Description: a.Description, Input: a.Input, Since: a.Since})
	}
	h.broadcastApprovals(h.now())
}

// Pending reports whether id is among the pending requests.
func (h *Hub) Pending(id string) bool {
	h.mu.Lock()
	defer h.mu.Unlock()
	for _, a := range h.approvals {
		if a.ID == id {
			return true
		}
	}
	return false
}

// addProc adds a process; a reused id names the new one from now on. Past
// MaxProcesses the oldest exited process goes (the oldest of all when
// every one runs).
func (h *Hub) addProc(p *procView) {
	h.procs = append(h.procs, p)
	h.procIndex[p.id] = p
	if len(h.procs) <= MaxProcesses {
		return
	}
	drop := 0
	for i, q := range h.procs {
		if q.exited {
			drop = i
			break
		}
	}
	old := h.procs[drop]
	h.procs = append(h.procs[:drop], h.procs[drop+1:]...)
	if h.procIndex[old.id] == old {
		delete(h.procIndex, old.id)
	}
}

// pending adds a request that waits for a person; one with the id of a
// request already there (published again) replaces it and keeps its
// place and its since.
func (h *Hub) pending(a Approval) {
	for i := range h.approvals {
		if h.approvals[i].ID == a.ID {
			a.Since = h.approvals[i].Since
			h.approvals[i] = a
			return
		}
	}
	h.approvals = append(h.approvals, a)
}

// decided ends the pending request a decision answers: by its id, or for
// a decision without one, the newest request of the same kind, session,
// tool and tool use (as event.State does).
func (h *Hub) decided(a *event.Approval) bool {
	for i := len(h.approvals) - 1; i >= 0; i-- {
		p := h.approvals[i]
		match := a.ID != "" && p.ID == a.ID
		if a.ID == "" {
			match = p.Kind == a.Kind && p.Session == a.Session && p.Tool == a.Tool && p.ToolUseID == a.ToolUseID
		}
		if match {
			h.approvals = append(h.approvals[:i], h.approvals[i+1:]...)
			return true
		}
	}
	return false
}

// Close ends every page's event stream once it has written what is
// queued: sous is exiting.
func (h *Hub) Close() {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.closed = true
	for s := range h.subs {
		s.finish(false)
		delete(h.subs, s)
	}
}
