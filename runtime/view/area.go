package view

import (
	"fmt"
	"path/filepath"
	"strings"
	"time"

	"github.com/seed5ad92d46/sous/runtime/event"
	"github.com/seed5ad92d46/sous/runtime/view/ansitext"
)

// areaItem is one line of the status area before it is laid out.
type areaItem struct {
	label, labelStyle string
	since             time.Time
	detail            string
	tail              string // after the detail, faint (a session's cost)
}

// renderArea appends the status area for s at now, laid out for a
// terminal of cols × rows, each line ending in "\n", and returns it with
// the number of lines. Nothing runs and nothing waits: no area at all.
//
//	─ fanout.star · 12s · 2 running · 1 waiting · $0.0210
//	[a]                3s  compiling foo.c
//	session 1a2b3c4d  12s  Bash: go test ./... · $0.0210
//	approval           2s  waiting: Bash rm -rf /tmp/x [session 1a2b3c4d]
func renderArea(b []byte, s *event.State, now time.Time, cols, rows int, color bool) ([]byte, int) {
	var items []areaItem
	running := 0
	for _, p := range s.Procs {
		if !p.Running() {
			continue
		}
		running++
		detail := strings.TrimSpace(sanitize(string(p.LastLine)))
		if detail == "" {
			detail = "$ " + sanitize(strings.Join(p.Command, " "))
		}
		items = append(items, areaItem{label: "[" + p.ID + "]", labelStyle: IDColor(p.Color), since: p.Started, detail: detail})
	}
	for _, ss := range s.Sessions {
		if !ss.InTurn {
			continue
		}
		running++
		detail := sanitize(ss.Activity)
		if ss.LastText != "" && ss.Activity == "thinking" {
			detail += ": " + sanitize(ss.LastText)
		}
		items = append(items, areaItem{label: "session " + short(ss.ID), since: ss.TurnStarted, detail: detail,
			tail: Cost(ss.Cost)})
	}
	for _, p := range s.Pending {
		what := sanitize(p.Tool + " " + p.Summary)
		if p.Session != "" {
			what += " [session " + short(p.Session) + "]"
		}
		items = append(items, areaItem{label: "approval", labelStyle: yellow, since: p.Since, detail: "waiting: " + what})
	}
	if len(items) == 0 || cols < 8 || rows < 3 {
		return b, 0
	}
	width := cols - 1 // never the last column: a terminal may wrap there
	// At most half the screen, so the output keeps room to scroll.
	maxItems := max(1, rows/2-1)
	more := 0
	if len(items) > maxItems {
		more = len(items) - (maxItems - 1)
		items = items[:maxItems-1]
	}

	header := "─ " + filepath.Base(s.Recipe) + " · " + Elapsed(now.Sub(s.Started))
	if running > 0 {
		header += fmt.Sprintf(" · %d running", running)
	}
	if len(s.Pending) > 0 {
		header += fmt.Sprintf(" · %d waiting", len(s.Pending))
	}
	switch {
	case s.MaxCost > 0: // sous run --max-cost: how near the cap the run is
		header += " · " + Cost(s.Cost()) + " of " + Cost(s.MaxCost)
	case len(s.Sessions) > 0:
		header += " · " + Cost(s.Cost())
	}
	b = appendAreaLine(b, paint(color, faint, truncate(header, width)))

	labelWidth := 0
	for _, it := range items {
		labelWidth = max(labelWidth, min(ansitext.StringWidth(it.label), 24))
	}
	for _, it := range items {
		label := truncate(it.label, labelWidth)
		pad := strings.Repeat(" ", max(0, labelWidth-ansitext.StringWidth(label)))
		line := paint(color, it.labelStyle, label) + pad + fmt.Sprintf(" %5s  ", Elapsed(now.Sub(it.since)))
		line += it.detail
		if it.tail != "" {
			line += paint(color, faint, " · "+it.tail)
		}
		b = appendAreaLine(b, truncate(line, width))
	}
	lines := len(items) + 1
	if more > 0 {
		b = appendAreaLine(b, paint(color, faint, truncate(fmt.Sprintf("… and %d more", more), width)))
		lines++
	}
	return b, lines
}

// appendAreaLine appends a line of the area: its text, then a reset of
// any style it left on (a cut may drop the reset), then the newline.
func appendAreaLine(b []byte, line string) []byte {
	b = append(b, line...)
	if strings.Contains(line, "\x1b[") {
		b = append(b, Reset...)
	}
	return append(b, '\n')
}

// short is the start of a session id.
func short(id string) string {
	if len(id) > 8 {
		return id[:8]
	}
	return id
}
