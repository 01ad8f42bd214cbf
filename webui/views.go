package webui

import (
	"strings"
	"time"

	"github.com/seed5ad92d46/sous/daemon/wire"
	"github.com/seed5ad92d46/sous/runtime/event"
)

// Approval is a permission request waiting for a person, as the API shows
// it (GET /api/state's approvals, the approvals event).
type Approval struct {
	ID string `json:"id"`
	// Run and Recipe name the run that asks (the daemon page shows every
	// run's requests).
	Run         string         `json:"run,omitempty"`
	Recipe      string         `json:"recipe,omitempty"`
	Kind        string         `json:"kind"` // "tool" or "privileged"
	Session     string         `json:"session"`
	Tool        string         `json:"tool"`
	ToolUseID   string         `json:"tool_use_id,omitempty"`
	Summary     string         `json:"summary"`
	Description string         `json:"description,omitempty"`
	Input       map[string]any `json:"input"`
	Since       time.Time      `json:"since"`
}

func approvalOf(a event.Approval, since time.Time) Approval {
	return Approval{ID: a.ID, Kind: a.Kind, Session: a.Session, Tool: a.Tool, ToolUseID: a.ToolUseID,
		Summary: a.Summary, Description: a.Description, Input: a.Input, Since: since}
}

// procView is one process and the tail of its output.
type procView struct {
	id       string
	command  []string
	host     string
	pid      int
	started  time.Time
	ended    time.Time
	exited   bool
	exitCode int
	tail     outputTail
}

// outputTail keeps the newest OutputTail bytes of a process's output, in
// pieces by stream.
type outputTail struct {
	pieces    []outputPiece
	size      int
	truncated bool // older output was dropped
}

type outputPiece struct {
	stream wire.Stream
	data   []byte
}

// add appends data (which the caller may reuse) and drops the oldest
// bytes past the bound.
func (t *outputTail) add(stream wire.Stream, data []byte) {
	if len(data) == 0 {
		return
	}
	if len(data) > OutputTail {
		data = data[len(data)-OutputTail:]
		t.truncated = true
	}
	if n := len(t.pieces); n > 0 && t.pieces[n-1].stream == stream {
		t.pieces[n-1].data = append(t.pieces[n-1].data, data...)
	} else {
		t.pieces = append(t.pieces, outputPiece{stream: stream, data: append([]byte(nil), data...)})
	}
	t.size += len(data)
	for t.size > OutputTail {
		t.truncated = true
		first := &t.pieces[0]
		over := t.size - OutputTail
		if len(first.data) <= over {
			t.size -= len(first.data)
			t.pieces = t.pieces[1:]
			continue
		}
		first.data = first.data[over:]
		t.size -= over
		if cap(first.data) > 2*OutputTail {
			// Let go of the bytes cut off the front.
			first.data = append([]byte(nil), first.data...)
		}
	}
}

// endView is how the run ended.
type endView struct {
	Status   string    `json:"status"`
	ExitCode int       `json:"exit_code"`
	Error    string    `json:"error,omitempty"`
	Time     time.Time `json:"time"`
}

// stateJSON is GET /api/state's answer and the state event's "state".
type stateJSON struct {
	Kind      string        `json:"kind"`  // "run" or "daemon"
	Title     string        `json:"title"` // the recipe, or "daemon"
	Started   time.Time     `json:"started"`
	Now       time.Time     `json:"now"`
	Processes []processJSON `json:"processes"`
	Sessions  []sessionJSON `json:"sessions"`
	Approvals []Approval    `json:"approvals"`
	End       *endView      `json:"end"`
}

type processJSON struct {
	ID      string     `json:"id"`
	Command []string   `json:"command"`
	Host    string     `json:"host,omitempty"`
	Pid     int        `json:"pid,omitempty"`
	State   string     `json:"state"` // "running" or "exited"
	Started time.Time  `json:"started"`
	Ended   *time.Time `json:"ended,omitempty"`
	// ExitCode is null while the process runs (-1: killed by a signal).
	ExitCode *int `json:"exit_code"`
	// Output is the tail of the output, in pieces by stream; truncated
	// says older output was dropped.
	Output    []outputJSON `json:"output"`
	Truncated bool         `json:"output_truncated"`
}

type outputJSON struct {
	Stream string `json:"stream"`
	Data   string `json:"data"`
}

// snapshotLocked is the state now (h.mu held).
func (h *Hub) snapshotLocked() stateJSON {
	s := stateJSON{Kind: h.kind, Title: h.title, Started: h.started, Now: h.now(), End: h.end,
		Processes: make([]processJSON, 0, len(h.procs)), Sessions: make([]sessionJSON, 0, len(h.sessions)),
		Approvals: append([]Approval{}, h.approvals...)}
	for _, p := range h.procs {
		pj := processJSON{ID: p.id, Command: p.command, Host: p.host, Pid: p.pid, State: "running",
			Started: p.started, Output: make([]outputJSON, 0, len(p.tail.pieces)), Truncated: p.tail.truncated}
		if pj.Command == nil {
			pj.Command = []string{}
		}
		if p.exited {
			ended, code := p.ended, p.exitCode
			pj.State, pj.Ended, pj.ExitCode = "exited", &ended, &code
		}
		for _, piece := range p.tail.pieces {
			// The cut may fall inside a character; JSON holds text.
			pj.Output = append(pj.Output, outputJSON{Stream: piece.stream.String(),
				Data: strings.ToValidUTF8(string(piece.data), "\uFFFD")})
		}
		s.Processes = append(s.Processes, pj)
	}
	for _, ss := range h.sessions {
		s.Sessions = append(s.Sessions, ss.json())
	}
	return s
}
