package runtime

import (
	"bytes"
	"encoding/json"
	"fmt"
	"strings"
	"time"

	"github.com/seed5ad92d46/sous/daemon/wire"
	"github.com/seed5ad92d46/sous/runtime/event"
	"github.com/seed5ad92d46/sous/runtime/view"
)

// humanSink writes the human output: what the processes echo on stdout
// and stderr, "[id] "-prefixed once several echo at once; the recipe's
// print, errors, approval and hook lines on stderr. Off a terminal and
// without flags, these are exactly the lines sous always wrote. It writes
// through a view.Screen, which on a terminal keeps the status area under
// the lines.
type humanSink struct {
	screen view.Screen
	state  *event.State
	// quiet leaves out what is not the recipe's print, a failure or the
	// summary: the echo, approval and hook lines.
	quiet bool
	// verbose adds a line as each process starts and ends and as each
	// agent turn ends.
	verbose bool
	// color colours the "[id] " prefixes on stdout and stderr (index
	// streamSlot).
	color [2]bool
	buf   []byte

	// The lines of spawned processes held until the recipe settles
	// (event.Settle): in the order they came, across processes and
	// streams, their bytes one after another in heldData.
	held     []heldPiece
	heldData []byte
}

// heldPiece is one held output event; its Data is heldData[start:end].
// A line of sous's own about a held process (--verbose's exit line) is
// held too, so that it follows the process's lines: line says so.
type heldPiece struct {
	id         string
	stream     wire.Stream
	start, end int
	midLine    bool
	last       bool
	line       bool
}

// Handle implements event.Sink.
func (h *humanSink) Handle(at time.Time, e event.Event) {
	switch e := e.(type) {
	case *event.Log:
		h.line(e.Text)
	case *event.Error:
		h.line(e.Text)
	case *event.Failure:
		h.line(e.Text)
	case *event.Progress:
		if l := e.LostHost; l != nil {
			h.line(fmt.Sprintf("sous: parallel: lost %s for good (%s); moving its %d unfinished tasks to the pool's other hosts",
				l.Target, l.Error, l.Moved))
		}
	case *event.Prompt:
		h.screen.Write(wire.Stderr, append(h.buf[:0], e.Text...))
	case *event.Output:
		switch {
		case h.quiet:
		case h.state.Holding && h.state.Held(e.ID):
			h.hold(e)
		default:
			h.output(e)
		}
	case *event.Settle:
		h.release()
	case *event.Spawn:
		if e.Lost > 0 {
			// Otherwise silent: the recipe would read an output that starts
			// in the middle as if it were all of it.
			why := ""
			if e.Host == "embedded" {
				why = " (sous run's own daemon keeps the newest 4 MiB of each process's output; `sous daemon` spills the rest to disk)"
			}
			h.line(fmt.Sprintf("sous: reattach %s: the daemon no longer had %d frames of the output asked for; the replay starts after them%s",
				e.ID, e.Lost, why))
		}
		if h.verbose {
			verb := "started"
			if e.Reattached {
				verb = "reattached"
			}
			h.line(visible(fmt.Sprintf("sous: [%s] %s: %s", e.ID, verb, strings.Join(e.Command, " "))))
		}
	case *event.Exit:
		if h.verbose {
			if p := h.state.Proc(e.ID); p != nil {
				text := visible(fmt.Sprintf("sous: [%s] exited with code %d after %s", e.ID, e.ExitCode, view.Duration(p.Ended.Sub(p.Started))))
				if !h.quiet && h.state.Holding && h.state.Held(e.ID) {
					h.holdLine(e.ID, text)
				} else {
					h.line(text)
				}
			}
		}
	case *event.Agent:
		if h.verbose {
			h.turnLine(e)
		}
	case *event.Approval:
		if !h.quiet {
			h.line(approvalLine(e))
		}
	case *event.Hook:
		if !h.quiet && len(e.Output) > 0 {
			h.line(hookLine(e))
		}
	case *event.Tool:
		if !h.quiet {
			h.line(toolLine(e))
		}
	}
}

// output writes a chunk of a process's output, with "[id] " before each
// line once several processes echo (State.Prefixed), but not before the
// rest of a line whose first piece went out already.
func (h *humanSink) output(e *event.Output) {
	if !h.state.Prefixed {
		if !e.Last {
			h.screen.Write(e.Stream, e.Data)
			return
		}
		h.buf = append(append(h.buf[:0], e.Data...), '\n')
		h.screen.Write(e.Stream, h.buf)
		return
	}
	color := ""
	if h.color[streamSlot(e.Stream)] {
		color = view.ProcColor(h.state, e.ID)
	}
	b := h.buf[:0]
	data := e.Data
	first := true
	for first || len(data) > 0 {
		n := bytes.IndexByte(data, '\n') + 1
		if n == 0 {
			n = len(data)
		}
		if !first || !e.MidLine {
			b = appendPrefix(b, e.ID, color)
		}
		b = append(b, data[:n]...)
		data = data[n:]
		first = false
	}
	if e.Last {
		b = append(b, '\n')
	}
	h.buf = b
	h.screen.Write(e.Stream, b)
}

// hold keeps a copy of e until the recipe settles: e's Data is the
// publisher's, valid only while the event is handled.
func (h *humanSink) hold(e *event.Output) {
	start := len(h.heldData)
	h.heldData = append(h.heldData, e.Data...)
	h.held = append(h.held, heldPiece{id: e.ID, stream: e.Stream, start: start, end: len(h.heldData),
		midLine: e.MidLine, last: e.Last})
}

// holdLine keeps a line of sous's own about held process id until the
// process's lines before it go out.
func (h *humanSink) holdLine(id, text string) {
	start := len(h.heldData)
	h.heldData = append(h.heldData, text...)
	h.held = append(h.held, heldPiece{id: id, stream: wire.Stderr, start: start, end: len(h.heldData), line: true})
}

// release writes the held lines in the order they came, now that
// State.Prefixed says whether they carry their ids.
func (h *humanSink) release() {
	for _, p := range h.held {
		data := h.heldData[p.start:p.end]
		if p.line {
			h.buf = append(append(h.buf[:0], data...), '\n')
			h.screen.Write(wire.Stderr, h.buf)
			continue
		}
		h.output(&event.Output{ID: p.id, Stream: p.stream, Data: data, MidLine: p.midLine, Last: p.last})
	}
	h.held = h.held[:0]
	if cap(h.heldData) > event.MaxHeld {
		h.heldData = nil // a flood's buffer is not kept for the rest of the run
	} else {
		h.heldData = h.heldData[:0]
	}
}

// appendPrefix appends "[id] ", coloured when color is an SGR sequence.
func appendPrefix(b []byte, id, color string) []byte {
	if color == "" {
		b = append(b, '[')
		b = append(b, id...)
		return append(b, "] "...)
	}
	b = append(b, color...)
	b = append(b, '[')
	b = append(b, id...)
	b = append(b, ']')
	b = append(b, view.Reset...)
	return append(b, ' ')
}

// line writes text and a newline to stderr.
func (h *humanSink) line(text string) {
	h.buf = append(append(h.buf[:0], text...), '\n')
	h.screen.Write(wire.Stderr, h.buf)
}

// turnLine is --verbose's line for the end of an agent turn, e.g.
//
//	sous: session 1a2b3c4d: turn success after 3.2s, $0.0123 (total $0.0400)
func (h *humanSink) turnLine(e *event.Agent) {
	var m struct {
		Type       string  `json:"type"`
		Subtype    string  `json:"subtype"`
		DurationMS float64 `json:"duration_ms"`
		CostUSD    float64 `json:"total_cost_usd"`
	}
	if e.Session == "" || json.Unmarshal(e.Message, &m) != nil || m.Type != "result" {
		return
	}
	total := 0.0
	if s := h.state.Session(e.Session); s != nil {
		total = s.Cost
	}
	d := time.Duration(m.DurationMS * float64(time.Millisecond))
	h.line(visible(fmt.Sprintf("sous: session %s: turn %s after %s, %s (session total %s)",
		shortSession(e.Session), m.Subtype, view.Duration(d), view.Cost(m.CostUSD), view.Cost(total))))
}

// approvalLine is the line of a decision, such as
//
//	approval: deny Bash rm -rf /tmp/x (by default: no approver allowed this request) [session 1a2b3c4d]
//
// The summary and the message come from the request: escaped, they cannot
// redraw the terminal's lines.
func approvalLine(a *event.Approval) string {
	decision := "deny"
	if a.Allow {
		decision = "allow"
	}
	line := "approval: " + decision + " " + a.Tool
	if a.Summary != "" {
		line += " " + a.Summary
	}
	line += " (by " + a.By
	if !a.Allow && a.Message != "" {
		line += ": " + a.Message
	}
	line += ")" + sessionTag(a.Session)
	return visible(line)
}

// hookLine is the line of a hook that answered, in the approval line's
// style, such as
//
//	hook: PreToolUse deny Bash rm -rf /tmp/x (no deleting here) [session 1a2b3c4d]
func hookLine(h *event.Hook) string {
	verdict, why := hookVerdict(h.Output)
	line := "hook: " + h.Event + " " + verdict
	if h.Tool != "" {
		line += " " + h.Tool
		if h.Summary != "" {
			line += " " + h.Summary
		}
	}
	if why != "" {
		line += " (" + why + ")"
	}
	return visible(line + sessionTag(h.Session))
}

// sessionTag is " [session 1a2b3c4d]" (the id's first 8 characters), or ""
// without a session.
func sessionTag(session string) string {
	if session == "" {
		return ""
	}
	return " [session " + shortSession(session) + "]"
}

// shortSession is the start of a session id, enough to tell the run's
// sessions apart on a line.
func shortSession(id string) string {
	if len(id) > 8 {
		return id[:8]
	}
	return id
}

// toolLine is one call of a session's own tool, in the approval line's
// style:
//
//	tool: mcp__sous__add ok [session 1a2b3c4d]
func toolLine(t *event.Tool) string {
	verdict := " ok"
	if !t.OK {
		verdict = " error"
	}
	return visible("tool: " + t.Tool + verdict + sessionTag(t.Session))
}
