package view

import (
	"testing"

	"github.com/charmbracelet/x/ansi"
)

// The styles are written out so that nothing is built at package init;
// they are x/ansi's, as they were when it built them.
func TestStylesAreXAnsis(t *testing.T) {
	want := []ansi.BasicColor{ansi.Cyan, ansi.Magenta, ansi.Yellow, ansi.Green, ansi.Blue,
		ansi.BrightCyan, ansi.BrightMagenta, ansi.BrightYellow, ansi.BrightGreen, ansi.BrightBlue}
	if len(idColors) != len(want) {
		t.Fatalf("%d id colours, want %d", len(idColors), len(want))
	}
	for i, c := range want {
		if w := ansi.NewStyle().ForegroundColor(c).String(); idColors[i] != w {
			t.Errorf("id colour %d = %q, x/ansi %q", i, idColors[i], w)
		}
	}
	for _, s := range []struct{ name, got, want string }{
		{"Reset", Reset, ansi.ResetStyle},
		{"faint", faint, ansi.NewStyle().Faint().String()},
		{"bold", bold, ansi.NewStyle().Bold().String()},
		{"red", red, ansi.NewStyle().ForegroundColor(ansi.Red).String()},
		{"green", green, ansi.NewStyle().ForegroundColor(ansi.Green).String()},
		{"yellow", yellow, ansi.NewStyle().ForegroundColor(ansi.Yellow).String()},
		{"eraseScreenBelow", eraseScreenBelow, ansi.EraseScreenBelow},
	} {
		if s.got != s.want {
			t.Errorf("%s = %q, x/ansi %q", s.name, s.got, s.want)
		}
	}
	for n := 0; n <= 30; n++ {
		if got, w := cursorUp(n), ansi.CursorUp(n); got != w {
			t.Errorf("cursorUp(%d) = %q, x/ansi %q", n, got, w)
		}
	}
}
