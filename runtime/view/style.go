package view

import (
	"fmt"
	"strings"
	"time"

	"github.com/seed5ad92d46/sous/runtime/event"
	"github.com/seed5ad92d46/sous/runtime/view/ansitext"
)

// The colours of "[id] " prefixes, one per event.ColorSlots: the basic and
// bright ANSI colours that read on dark and light backgrounds alike, red
// left out (it says "failed"). Basic ANSI colours follow the terminal's
// own palette, so they suit its theme. Cyan, magenta, yellow, green, blue,
// then the bright ones.
var idColors = [...]string{"\x1b[36m", "\x1b[35m", "\x1b[33m", "\x1b[32m", "\x1b[34m",
	"\x1b[96m", "\x1b[95m", "\x1b[93m", "\x1b[92m", "\x1b[94m"}

// Styles used in the status area and the summary: SGR sequences written
// out (x/ansi's NewStyle builds the same ones; style_test.go holds them to
// it), so that nothing is built at package init.
const (
	Reset  = "\x1b[m"
	faint  = "\x1b[2m"
	bold   = "\x1b[1m"
	red    = "\x1b[31m"
	green  = "\x1b[32m"
	yellow = "\x1b[33m"
)

// IDColor is the SGR sequence of a colour slot (event.Proc.Color).
func IDColor(slot int) string { return idColors[slot%len(idColors)] }

// ProcColor is the colour of the process id in state s: its slot, or the
// id's own when s has no such process.
func ProcColor(s *event.State, id string) string {
	if p := s.Proc(id); p != nil {
		return IDColor(p.Color)
	}
	return IDColor(event.ColorOf(id))
}

// paint wraps s in style when on.
func paint(on bool, style, s string) string {
	if !on || style == "" {
		return s
	}
	return style + s + Reset
}

// Duration is d for people: "850ms", "3.2s", "1m05s", "2h03m".
func Duration(d time.Duration) string {
	switch {
	case d < 0:
		d = 0
		fallthrough
	case d < time.Second:
		return fmt.Sprintf("%dms", d.Milliseconds())
	case d < time.Minute:
		return fmt.Sprintf("%.1fs", d.Seconds())
	case d < time.Hour:
		return fmt.Sprintf("%dm%02ds", int(d.Minutes()), int(d.Seconds())%60)
	}
	return fmt.Sprintf("%dh%02dm", int(d.Hours()), int(d.Minutes())%60)
}

// Elapsed is d in whole seconds for the status area, which redraws when
// it changes: "0s", "42s", "3m07s", "2h03m".
func Elapsed(d time.Duration) string {
	switch {
	case d < time.Minute:
		return fmt.Sprintf("%ds", int(max(d, 0).Seconds()))
	case d < time.Hour:
		return fmt.Sprintf("%dm%02ds", int(d.Minutes()), int(d.Seconds())%60)
	}
	return fmt.Sprintf("%dh%02dm", int(d.Hours()), int(d.Minutes())%60)
}

// Cost is an amount of US dollars: "$0.0123".
func Cost(usd float64) string { return fmt.Sprintf("$%.4f", usd) }

// sanitize makes text from a process or an agent safe to show on one
// line of the terminal: escape sequences go, other control characters
// become spaces, so nothing it carries can move the cursor or repaint the
// status area.
func sanitize(s string) string {
	s = ansitext.Strip(s)
	return strings.Map(func(r rune) rune {
		if r < 0x20 || r == 0x7f || r >= 0x80 && r < 0xa0 || r == '\u2028' || r == '\u2029' ||
			r >= '\u200b' && r <= '\u200f' || r >= '\u202a' && r <= '\u202e' || r >= '\u2066' && r <= '\u2069' {
			return ' '
		}
		return r
	}, s)
}

// truncate cuts s (which may hold SGR sequences) to width cells, with "…"
// when cut.
func truncate(s string, width int) string {
	if width <= 0 {
		return ""
	}
	if ansitext.StringWidth(s) <= width {
		return s
	}
	return ansitext.Truncate(s, width, "…")
}
