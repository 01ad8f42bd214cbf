package ansitext

import (
	"os"
	"strconv"
	"strings"
	"sync"

	"github.com/clipperhouse/displaywidth"
	"github.com/clipperhouse/uax29/v2/graphemes"
)

// widths measures grapheme clusters as x/ansi does: East Asian ambiguous
// characters are wide only when RUNEWIDTH_EASTASIAN says so. x/ansi reads
// the variable at its init; here, on first use.
var widths = sync.OnceValue(func() *displaywidth.Options {
	ea, err := strconv.ParseBool(os.Getenv("RUNEWIDTH_EASTASIAN"))
	return &displaywidth.Options{EastAsianWidth: err == nil && ea}
})

// firstGraphemeCluster is the first grapheme cluster of s and its width in
// cells.
func firstGraphemeCluster(s string) (string, int) {
	cluster := graphemes.FromString(s).First()
	return cluster, widths().String(cluster)
}

// Strip removes the escape sequences from s: x/ansi's Strip.
func Strip(s string) string {
	var (
		buf    strings.Builder
		ri, rw int // the UTF-8 sequence being copied: bytes done, its length
		pstate = groundState
	)
	t := table()
	for i := range len(s) {
		if pstate == utf8State {
			// Copy the rest of the rune's bytes, then back to the ground.
			buf.WriteByte(s[i])
			ri++
			if ri < rw {
				continue
			}
			pstate = groundState
			ri, rw = 0, 0
			continue
		}
		st, act := t.transition(pstate, s[i])
		switch act {
		case collectAction:
			if st == utf8State {
				rw = utf8ByteLen(s[i])
				buf.WriteByte(s[i])
				ri++
			}
		case printAction, executeAction:
			buf.WriteByte(s[i])
		}
		if pstate != utf8State {
			pstate = st
		}
	}
	return buf.String()
}

// StringWidth is the number of cells s takes on a terminal, its escape
// sequences left out and its grapheme clusters measured: x/ansi's
// StringWidth.
func StringWidth(s string) int {
	if s == "" {
		return 0
	}
	t := table()
	pstate := groundState
	width := 0
	for i := 0; i < len(s); i++ {
		st, act := t.transition(pstate, s[i])
		if act == printAction || st == utf8State {
			cluster, w := firstGraphemeCluster(s[i:])
			width += w
			i += len(cluster) - 1
			pstate = groundState
			continue
		}
		pstate = st
	}
	return width
}

// Truncate cuts s to length cells, ending it with tail when cut; escape
// sequences are kept whole, also past the cut: x/ansi's Truncate.
func Truncate(s string, length int, tail string) string {
	if StringWidth(s) <= length {
		return s
	}
	length -= StringWidth(tail)
	if length < 0 {
		return ""
	}
	t := table()
	var (
		buf      strings.Builder
		curWidth int
		ignoring bool // past the cut: only escape sequences are kept
		pstate   = groundState
		i        int
	)
	for i < len(s) {
		st, act := t.transition(pstate, s[i])
		if st == utf8State {
			cluster, width := firstGraphemeCluster(s[i:])
			i += len(cluster)
			curWidth += width
			if ignoring {
				continue
			}
			if curWidth > length {
				ignoring = true
				buf.WriteString(tail)
				continue
			}
			buf.WriteString(cluster)
			pstate = groundState
			continue
		}
		switch act {
		case printAction:
			if curWidth >= length && !ignoring {
				ignoring = true
				buf.WriteString(tail)
			}
			if ignoring {
				i++
				continue
			}
			curWidth++
			buf.WriteByte(s[i])
			i++
		case executeAction:
			// Such as \n: left out past the cut.
			if ignoring {
				i++
				continue
			}
			buf.WriteByte(s[i])
			i++
		default:
			buf.WriteByte(s[i])
			i++
		}
		pstate = st
		if curWidth > length && !ignoring {
			ignoring = true
			buf.WriteString(tail)
		}
	}
	return buf.String()
}

// utf8ByteLen is the length of the UTF-8 sequence b starts, -1 when b
// starts none.
func utf8ByteLen(b byte) int {
	switch {
	case b <= 0x7F:
		return 1
	case b >= 0xC0 && b <= 0xDF:
		return 2
	case b >= 0xE0 && b <= 0xEF:
		return 3
	case b >= 0xF0 && b <= 0xF7:
		return 4
	}
	return -1
}
