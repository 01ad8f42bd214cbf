package view

import (
	"fmt"
	"strings"
	"time"

	"github.com/charmbracelet/x/ansi"

	"github.com/seed5ad92d46/sous/runtime/event"
)

// The colours of "[id] " prefixes, one per event.ColorSlots: the basic and
// bright ANSI colours that read on dark and light backgrounds alike, red
// left out (it says "failed"). Basic ANSI colours follow the terminal's
// own palette, so they suit its theme.
var idColors = func() []string {
	var out []string
	for _, c := range []ansi.BasicColor{ansi.Cyan, ansi.Magenta, ansi.Yellow, ansi.Green, ansi.Blue,
		ansi.BrightCyan, ansi.BrightMagenta, ansi.BrightYellow, ansi.BrightGreen, ansi.BrightBlue} {
		out = append(out, ansi.NewStyle().ForegroundColor(c).String())
	}
	return out
}()

// Styles used in the status area and the summary.
var (
	Reset  = ansi.ResetStyle
	faint  = ansi.NewStyle().Faint().String()
	bold   = ansi.NewStyle().Bold().String()
	red    = ansi.NewStyle().ForegroundColor(ansi.Red).String()
	green  = ansi.NewStyle().ForegroundColor(ansi.Green).String()
	yellow = ansi.NewStyle().ForegroundColor(ansi.Yellow).String()
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
	s = ansi.Strip(s)
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
	if ansi.StringWidth(s) <= width {
		return s
	}
	return ansi.Truncate(s, width, "…")
}
