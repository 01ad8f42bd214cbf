package event

import (
	"bytes"
	"hash/fnv"
	"time"

	"github.com/seed5ad92d46/sous/daemon/wire"
)

// State is the run as its events tell it: what every output reads instead
// of keeping an account of its own. The bus updates it before the sinks
// see each event; read it only under the bus's lock.
type State struct {
	Recipe  string
	Started time.Time
	// Procs are the run's processes in the order they started (a spawn
	// that reuses the id of an ended process is a new entry).
	Procs []*Proc
	// Sessions are the agent sessions, in the order their ids were seen.
	Sessions []*Session
	// Pending are the permission requests waiting for a decision, oldest
	// first.
	Pending []*PendingRequest
	// Denials are the requests denied so far, in order.
	Denials []Approval
	// Echoing counts the processes echoing now; while a hold is open
	// (Holding), also those held whose echo ended during it. Prefixed
	// turns on once a second process echoes while another does, and at a
	// Settle that finds two or more echoing, and stays on for the rest of
	// the run: a process's lines must not lose their "[id] " because
	// another ended, nor a reader have to guess whose a bare line is.
	Echoing  int
	Prefixed bool
	// Holding says the human output holds the lines of the processes
	// spawned since the last Settle (EchoStart.Held) and writes them at
	// the next one, when Prefixed is decided for all of them at once.
	Holding bool
	// LastFailed is the last process that exited with a code other than 0.
	LastFailed *Proc
	// End is how the run ended (nil while it runs).
	End   *End
	Ended time.Time
	// Version counts the events that changed more than a process's last
	// line (a spawn, an exit, an agent message, a request): a view that
	// lays the state out now and then does it at once when it moved.
	Version uint64

	// MaxCost is the run's cap on its sessions' cost (sous run --max-cost),
	// 0 when there is none.
	MaxCost float64

	procs    map[string]*Proc
	sessions map[string]*Session
	// colorsRunning counts the running processes of each colour slot:
	// a spawn picks a free slot without a walk over every process the
	// run ever had (a recipe of thousands of run() calls).
	colorsRunning [ColorSlots]int
	cost          float64 // every session's Cost, added up as results come

	// The open hold: the ids whose echo it holds, how many of them ended
	// their echo during it (still counted in Echoing), and how many bytes
	// of output it holds (the bus settles past MaxHeld).
	held      map[string]bool
	heldEnded int
	heldBytes int
}

// MaxHeld bounds the output a hold keeps back: a spawned process that
// writes more than this before the recipe settles has its lines decided
// and written then, so a flood does not grow sous.
const MaxHeld = 1 << 20

// Held reports whether the human output holds process id's lines now.
func (s *State) Held(id string) bool { return s.held[id] }

// Proc is one process of the run.
type Proc struct {
	ID         string
	Command    []string
	Host       string
	Pid        int
	Reattached bool
	// Color is the process's colour slot (0 to ColorSlots-1): its id's own
	// (a hash of it, so the same id has the same colour run after run),
	// unless a running process has that one; then the next free one, so
	// that the processes on screen together look apart.
	Color    int
	Started  time.Time
	Ended    time.Time // zero while it runs
	Exited   bool
	ExitCode int
	// LastLine is the last line the process wrote (stdout or stderr), at
	// most MaxLastLine bytes of it, as written: escape it before showing.
	LastLine []byte
	// StderrTail is the end of its stderr: at most MaxStderrTail bytes.
	StderrTail []byte
}

// Running reports whether the process has not exited (as far as the run
// knows).
func (p *Proc) Running() bool { return !p.Exited }

// Session is one agent session of the run.
type Session struct {
	ID      string
	Started time.Time
	Model   string
	// InTurn says a turn runs; TurnStarted is when it began.
	InTurn      bool
	TurnStarted time.Time
	// Activity is what the agent does now: "thinking", or the tool it
	// uses and on what ("Bash: go test ./...").
	Activity string
	// LastText is the first line of the agent's last text.
	LastText string
	Turns    int
	// Cost is what the session's turns cost (their results' cost_usd is
	// the CLI's running total: see turnCost); Duration adds up their
	// duration_ms.
	Cost     float64
	Duration time.Duration
	// cliTotal is the last result's total_cost_usd.
	cliTotal float64
	// Subtype and OK are the last turn's.
	Subtype string
	OK      bool
	Denials int
	Tools   int // tool uses so far
}

// PendingRequest is a permission request waiting for a decision.
type PendingRequest struct {
	Approval
	Since time.Time
}

// Bounds of what State keeps of a process's output.
const (
	MaxLastLine   = 512
	MaxStderrTail = 4 << 10
)

func newState() *State {
	return &State{procs: make(map[string]*Proc), sessions: make(map[string]*Session)}
}

// Proc returns the latest process with id, or nil.
func (s *State) Proc(id string) *Proc { return s.procs[id] }

// Session returns the session with id, or nil.
func (s *State) Session(id string) *Session { return s.sessions[id] }

// Cost adds up every session's cost.
func (s *State) Cost() float64 { return s.cost }

func (s *State) apply(at time.Time, e Event) {
	switch e.(type) {
	case *Output, *Log, *Error, *Failure, *Prompt, *PromptDone, *Tool, *Hook, *Progress, *Settle:
	default:
		s.Version++
	}
	switch e := e.(type) {
	case *Start:
		s.Recipe, s.Started, s.MaxCost = e.Recipe, at, e.MaxCost
	case *Spawn:
		p := &Proc{ID: e.ID, Command: e.Command, Host: e.Host, Pid: e.Pid, Reattached: e.Reattached, Started: at,
			Color: s.freeColor(e.ID)}
		s.Procs = append(s.Procs, p)
		s.procs[e.ID] = p
		s.colorsRunning[p.Color]++
	case *EchoStart:
		s.Echoing++
		if s.Echoing > 1 {
			s.Prefixed = true
		}
		if e.Held {
			if s.held == nil {
				s.held = make(map[string]bool)
			}
			s.held[e.ID], s.Holding = true, true
		}
	case *EchoEnd:
		if s.held[e.ID] {
			s.heldEnded++ // its lines are not out yet: it counts until the Settle
		} else {
			s.Echoing--
		}
	case *Settle:
		s.settle()
	case *Output:
		if p := s.procs[e.ID]; p != nil {
			p.noteOutput(e.Stream, e.Data)
		}
		if s.Holding && s.held[e.ID] {
			s.heldBytes += len(e.Data)
		}
	case *Exit:
		if p := s.procs[e.ID]; p != nil {
			if !p.Exited {
				s.colorsRunning[p.Color]--
			}
			p.Exited, p.ExitCode, p.Ended = true, e.ExitCode, at
			if e.ExitCode != 0 {
				s.LastFailed = p
			}
		}
	case *Agent:
		s.noteAgent(at, e)
	case *Pending:
		if p := s.pendingOf(&e.Approval); p != nil && e.ID != "" {
			p.Approval = e.Approval // now waiting for a person, with its id
			break
		}
		s.Pending = append(s.Pending, &PendingRequest{Approval: e.Approval, Since: at})
	case *Approval:
		s.decided(e)
	case *End:
		s.End, s.Ended = e, at
	}
}

// settle closes the hold: Prefixed is decided for every process it held,
// and those whose echo ended during it stop counting.
func (s *State) settle() {
	if !s.Holding {
		return
	}
	if s.Echoing > 1 {
		s.Prefixed = true
	}
	s.Echoing -= s.heldEnded
	clear(s.held)
	s.Holding, s.heldEnded, s.heldBytes = false, 0, 0
}

// overHeld reports whether the open hold keeps more than MaxHeld bytes.
func (s *State) overHeld() bool { return s.heldBytes > MaxHeld }

// ColorSlots is how many colours ids take turns at (view's palette).
const ColorSlots = 10

// ColorOf is the colour slot an id prefers: the same in every run.
func ColorOf(id string) int {
	h := fnv.New32a()
	h.Write([]byte(id))
	return int(h.Sum32() % ColorSlots)
}

// freeColor is the slot for a new process with id: its own, or the next
// one no running process has.
func (s *State) freeColor(id string) int {
	want := ColorOf(id)
	for k := range ColorSlots {
		if c := (want + k) % ColorSlots; s.colorsRunning[c] == 0 {
			return c
		}
	}
	return want
}

// pendingIndex is the newest pending request a is about: the one with its
// ID, else (a has none, or no request has it yet) the newest without an
// ID of the same kind, session, tool and tool use; -1 when none is.
func (s *State) pendingIndex(a *Approval) int {
	if a.ID != "" {
		for i, p := range s.Pending {
			if p.ID == a.ID {
				return i
			}
		}
	}
	for i := len(s.Pending) - 1; i >= 0; i-- {
		p := s.Pending[i]
		if (p.ID == "" || p.ID == a.ID) && p.Kind == a.Kind && p.Session == a.Session && p.Tool == a.Tool && p.ToolUseID == a.ToolUseID {
			return i
		}
	}
	return -1
}

// pendingOf is the pending request a is about, or nil.
func (s *State) pendingOf(a *Approval) *PendingRequest {
	if i := s.pendingIndex(a); i >= 0 {
		return s.Pending[i]
	}
	return nil
}

// decided ends the pending request the decision answers, and keeps a
// denial.
func (s *State) decided(a *Approval) {
	if i := s.pendingIndex(a); i >= 0 {
		s.Pending = append(s.Pending[:i], s.Pending[i+1:]...)
	}
	if a.Allow {
		return
	}
	s.Denials = append(s.Denials, *a)
	if ss := s.sessions[a.Session]; ss != nil {
		ss.Denials++
	}
}

// noteOutput keeps the last line and, for stderr, the tail. It looks only
// at the end of data: an output event is the hot path.
func (p *Proc) noteOutput(stream wire.Stream, data []byte) {
	if len(data) == 0 {
		return
	}
	if stream == wire.Stderr {
		p.StderrTail = appendTail(p.StderrTail, data, MaxStderrTail)
	}
	line := bytes.TrimRight(data, "\r\n")
	if i := bytes.LastIndexByte(line, '\n'); i >= 0 {
		line = line[i+1:]
	}
	// A progress bar redraws its line with \r: what shows is after the
	// last one.
	if i := bytes.LastIndexByte(line, '\r'); i >= 0 {
		line = line[i+1:]
	}
	if len(bytes.TrimSpace(line)) == 0 {
		return
	}
	if p.LastLine == nil {
		p.LastLine = make([]byte, 0, MaxLastLine)
	}
	p.LastLine = append(p.LastLine[:0], line[:min(len(line), MaxLastLine)]...)
}

// appendTail appends data to tail and keeps the last max bytes, in a
// buffer that never grows past max.
func appendTail(tail, data []byte, max int) []byte {
	if len(data) >= max {
		if tail == nil {
			tail = make([]byte, 0, max)
		}
		return append(tail[:0], data[len(data)-max:]...)
	}
	if tail == nil {
		tail = make([]byte, 0, max)
	}
	if over := len(tail) + len(data) - max; over > 0 {
		n := copy(tail, tail[over:])
		tail = tail[:n]
	}
	return append(tail, data...)
}
