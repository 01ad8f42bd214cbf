package view

import (
	"fmt"
	"strings"
	"time"

	"github.com/seed5ad92d46/sous/daemon/wire"
	"github.com/seed5ad92d46/sous/runtime/event"
	"github.com/seed5ad92d46/sous/runtime/view/ansitext"
)

// Row is one process or session of the summary.
type Row struct {
	Kind     string // "process" or "session"
	ID       string
	Color    int    // a process's colour slot
	Status   string // "ok", "failed", "killed", "running"; a session's last turn's subtype when not ok
	OK       bool
	Duration time.Duration
	ExitCode *int // processes that exited
	Turns    int
	Cost     float64
	Denials  int
}

// Rows lists every process and session of the run, as the summary shows
// them.
func Rows(s *event.State) []Row {
	end := s.Ended
	var rows []Row
	for _, p := range s.Procs {
		r := Row{Kind: "process", ID: p.ID, Color: p.Color}
		switch {
		case !p.Exited && p.Host == "embedded":
			// sous run's own daemon stops what still runs when the run ends.
			r.Status, r.Duration = "stopped", end.Sub(p.Started)
		case !p.Exited:
			r.Status, r.Duration = "running", end.Sub(p.Started) // on its daemon
		default:
			code := p.ExitCode
			r.ExitCode, r.Duration = &code, p.Ended.Sub(p.Started)
			switch code {
			case 0:
				r.Status, r.OK = "ok", true
			case -1:
				r.Status = "killed"
			default:
				r.Status = "failed"
			}
		}
		rows = append(rows, r)
	}
	for _, ss := range s.Sessions {
		r := Row{Kind: "session", ID: ss.ID, Duration: ss.Duration, Turns: ss.Turns, Cost: ss.Cost, Denials: ss.Denials}
		switch {
		case ss.InTurn:
			r.Status = "in a turn"
		case ss.Turns == 0:
			r.Status, r.OK = "no turn", true
		case ss.OK:
			r.Status, r.OK = "ok", true
		default:
			r.Status = ss.Subtype
			if r.Status == "" {
				r.Status = "error"
			}
		}
		rows = append(rows, r)
	}
	return rows
}

// maxSummaryRows bounds the rows the terminal summary shows: past it, the
// rows that are not ok and the first ok ones, then how many more were ok.
const maxSummaryRows = 30

// Summary is the final summary on the terminal (or with --verbose): a
// sink that writes it when the run ends, after the status area is gone.
type Summary struct {
	Screen Screen
	State  *event.State
	Color  bool
	// Width, when set, cuts lines to the terminal's width.
	Width func() int
}

// Handle implements event.Sink.
func (s *Summary) Handle(_ time.Time, e event.Event) {
	end, ok := e.(*event.End)
	if !ok {
		return
	}
	if end.Status == "ok" && len(s.State.Procs) == 0 && len(s.State.Sessions) == 0 {
		return // a recipe that only printed: nothing to sum up
	}
	width := 0
	if s.Width != nil {
		width = s.Width() - 1
	}
	s.Screen.Write(wire.Stderr, []byte(RenderSummary(s.State, s.Color, width)))
}

// RenderSummary is the summary as text, each line cut to width cells (0:
// not cut):
//
//	─ failed after 12.3s (exit code 1) · 2 processes · 1 session · $0.0421 · 1 denial
//	  [a]               ok       2.1s  exit 0
//	  [b]               failed   1.0s  exit 2
//	  session 1a2b3c4d  ok       8.0s  2 turns  $0.0421  1 denial
//	─ failure at fanout.star:12: sh("make test")
//	  sh: command failed ...
//	  stderr of [b]:
//	  │ make: *** [all] Error 2
func RenderSummary(s *event.State, color bool, width int) string {
	var lines []string
	add := func(l string) {
		if width > 0 {
			l = truncate(l, width)
		}
		if strings.Contains(l, "\x1b[") {
			l += Reset
		}
		lines = append(lines, l)
	}
	end := s.End
	if end == nil {
		return ""
	}
	rows := Rows(s)
	status := end.Status
	statusStyle := green
	if status != "ok" {
		statusStyle = red
	}
	head := "─ " + paint(color, statusStyle+bold, status) + " after " + Duration(s.Ended.Sub(s.Started))
	if end.ExitCode != 0 {
		head += fmt.Sprintf(" (exit code %d)", end.ExitCode)
	}
	head += counts(s)
	add(head)

	shown := rows
	hiddenOK := 0
	if len(rows) > maxSummaryRows {
		shown = nil
		okRoom := maxSummaryRows
		for _, r := range rows {
			if !r.OK {
				okRoom--
			}
		}
		for _, r := range rows {
			if r.OK && okRoom <= 0 {
				hiddenOK++
				continue
			}
			if r.OK {
				okRoom--
			}
			shown = append(shown, r)
		}
	}
	labelWidth, statusWidth, durWidth := 0, 0, 0
	for _, r := range shown {
		labelWidth = max(labelWidth, min(ansitext.StringWidth(rowLabel(r)), 24))
		statusWidth = max(statusWidth, len(r.Status))
		durWidth = max(durWidth, len(Duration(r.Duration)))
	}
	for _, r := range shown {
		label := truncate(rowLabel(r), labelWidth)
		pad := strings.Repeat(" ", max(0, labelWidth-ansitext.StringWidth(label)))
		if r.Kind == "process" {
			label = paint(color, IDColor(r.Color), label)
		}
		st := fmt.Sprintf("%-*s", statusWidth, r.Status)
		if !r.OK {
			st = paint(color, red, st)
		}
		line := fmt.Sprintf("  %s%s  %s  %*s", label, pad, st, durWidth, Duration(r.Duration))
		if r.ExitCode != nil {
			line += fmt.Sprintf("  exit %d", *r.ExitCode)
		}
		if r.Kind == "session" {
			line += fmt.Sprintf("  %d %s  %s", r.Turns, plural(r.Turns, "turn", "turns"), Cost(r.Cost))
			if r.Denials > 0 {
				line += fmt.Sprintf("  %d %s", r.Denials, plural(r.Denials, "denial", "denials"))
			}
		}
		add(line)
	}
	if hiddenOK > 0 {
		add(fmt.Sprintf("  … and %d more ok", hiddenOK))
	}
	if end.Status != "ok" {
		for _, l := range failureLines(s) {
			add(l)
		}
	}
	return strings.Join(lines, "\n") + "\n"
}

// counts is " · 2 processes · 1 session · $0.0421 · 1 denial", each part
// only when there is something to count.
func counts(s *event.State) string {
	var b strings.Builder
	if n := len(s.Procs); n > 0 {
		fmt.Fprintf(&b, " · %d %s", n, plural(n, "process", "processes"))
	}
	if n := len(s.Sessions); n > 0 {
		fmt.Fprintf(&b, " · %d %s", n, plural(n, "session", "sessions"))
	}
	switch {
	case s.MaxCost > 0: // sous run --max-cost
		fmt.Fprintf(&b, " · %s of %s budget", Cost(s.Cost()), Cost(s.MaxCost))
	case len(s.Sessions) > 0:
		fmt.Fprintf(&b, " · %s", Cost(s.Cost()))
	}
	if n := len(s.Denials); n > 0 {
		fmt.Fprintf(&b, " · %d %s", n, plural(n, "denial", "denials"))
	}
	return b.String()
}

func rowLabel(r Row) string {
	if r.Kind == "session" {
		return "session " + short(r.ID)
	}
	return "[" + r.ID + "]"
}

// maxTailLines is how much of a failed process's stderr the failure shows.
const maxTailLines = 8

// failureLines says where and why the run failed: the recipe line, the
// error's message, and the end of the stderr of the last process that
// failed.
func failureLines(s *event.State) []string {
	end := s.End
	var out []string
	where := "─ failure"
	switch end.Status {
	case "interrupted":
		where = "─ interrupted"
	case "error":
		where = "─ error"
	}
	if end.File != "" && end.Line > 0 {
		where += fmt.Sprintf(" at %s:%d", end.File, end.Line)
		if src := strings.TrimSpace(end.Source); src != "" {
			where += ": " + sanitize(src)
		}
	}
	out = append(out, where)
	msg := strings.Split(strings.TrimSpace(end.Error), "\n")
	if end.Error == end.Status {
		msg = nil // "interrupted" says nothing the heading does not
	}
	if len(msg) > maxTailLines {
		msg = append(msg[:maxTailLines], "…")
	}
	for _, l := range msg {
		if l = strings.TrimRight(l, " "); l != "" {
			out = append(out, "  "+sanitize(l))
		}
	}
	if p := s.LastFailed; p != nil && len(p.StderrTail) > 0 {
		out = append(out, fmt.Sprintf("  stderr of [%s] (exit code %d):", p.ID, p.ExitCode))
		for _, l := range TailLines(p.StderrTail, maxTailLines) {
			out = append(out, "  │ "+sanitize(l))
		}
	}
	return out
}

// TailLines is the last n lines of b (a cut first line is left out when
// b was cut at its start).
func TailLines(b []byte, n int) []string {
	text := strings.TrimRight(string(b), "\r\n")
	lines := strings.Split(text, "\n")
	if len(b) >= event.MaxStderrTail && len(lines) > 1 {
		lines = lines[1:] // cut in the middle
	}
	if len(lines) > n {
		lines = lines[len(lines)-n:]
	}
	return lines
}

func plural(n int, one, many string) string {
	if n == 1 {
		return one
	}
	return many
}
