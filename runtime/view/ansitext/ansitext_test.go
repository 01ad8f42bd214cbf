package ansitext

import (
	"bytes"
	"testing"

	"github.com/charmbracelet/x/ansi"
	"github.com/charmbracelet/x/ansi/parser"
)

// The copy's table is the parser's, byte for byte.
func TestTableIsXAnsiParsers(t *testing.T) {
	if !bytes.Equal(table(), parser.GenerateTransitionTable()) {
		t.Fatal("the transition table differs from x/ansi/parser's")
	}
}

// samples are what the status area is given (process output, agent text,
// its own SGR-painted labels) and what could break a copy: every kind of
// escape sequence, cut ones, C1 controls, wide and combined characters,
// invalid UTF-8.
var samples = []string{
	"",
	"plain ascii text",
	"\x1b[36mcyan\x1b[m and \x1b[1;31mbold red\x1b[0m",
	"\x1b]8;;https://example.com\x07link\x1b]8;;\x07 after",
	"\x1b]0;title\x1b\\rest",
	"\x1bP1$r0m\x1b\\dcs then text",
	"\x1b_apc string\x1b\\ and \x1b^pm\x9c and \x1bXsos\x18x",
	"\x9b31mC1 CSI\x9bm \x9d0;t\x9c",
	"cut CSI at the end \x1b[3",
	"cut OSC at the end \x1b]0;abc",
	"tabs\tand\nnewlines\r\nand \x7f del \x00 nul",
	"日本語のテキスト、幅が二つ",
	"emoji 👍🏽 family 👨‍👩‍👧‍👦 flag 🇫🇷 keycap 1️⃣",
	"e\u0301 combining, zero\u200bwidth, \u2028 line sep",
	"ambiguous: ①②③ αβγ ─│┌",
	"invalid \xff\xfe utf8 \xc3 and \xe2\x82 cut",
	"\x1b[1m日本\x1b[m語 \x1b]8;;u\x07👍\x1b]8;;\x07 wide and painted",
	"\x1bc\x1b7\x1b8\x1b(B\x1b#8 escapes with intermediates",
	"\x1b[?25l\x1b[2J\x1b[H\x1b[>1;2c\x1b[1 q",
	"✓ build  3.2s  \x1b[2m$0.0123\x1b[m",
}

func TestStripIsXAnsis(t *testing.T) {
	for _, s := range samples {
		if got, want := Strip(s), ansi.Strip(s); got != want {
			t.Errorf("Strip(%q) = %q, x/ansi %q", s, got, want)
		}
	}
}

func TestStringWidthIsXAnsis(t *testing.T) {
	for _, s := range samples {
		if got, want := StringWidth(s), ansi.StringWidth(s); got != want {
			t.Errorf("StringWidth(%q) = %d, x/ansi %d", s, got, want)
		}
	}
}

func TestTruncateIsXAnsis(t *testing.T) {
	for _, s := range samples {
		for width := -1; width <= ansi.StringWidth(s)+1; width++ {
			for _, tail := range []string{"", "…", "..."} {
				if got, want := Truncate(s, width, tail), ansi.Truncate(s, width, tail); got != want {
					t.Errorf("Truncate(%q, %d, %q) = %q, x/ansi %q", s, width, tail, got, want)
				}
			}
		}
	}
}

// FuzzSameAsXAnsi holds the copy to x/ansi on any input: `go test -fuzz
// FuzzSameAsXAnsi ./runtime/view/ansitext`; the samples are its seeds.
func FuzzSameAsXAnsi(f *testing.F) {
	for _, s := range samples {
		f.Add(s, 5)
	}
	f.Fuzz(func(t *testing.T, s string, width int) {
		width %= 200
		if got, want := Strip(s), ansi.Strip(s); got != want {
			t.Fatalf("Strip(%q) = %q, x/ansi %q", s, got, want)
		}
		if got, want := StringWidth(s), ansi.StringWidth(s); got != want {
			t.Fatalf("StringWidth(%q) = %d, x/ansi %d", s, got, want)
		}
		if got, want := Truncate(s, width, "…"), ansi.Truncate(s, width, "…"); got != want {
			t.Fatalf("Truncate(%q, %d) = %q, x/ansi %q", s, width, got, want)
		}
	})
}
