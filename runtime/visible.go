package runtime

import (
	"fmt"
	"strings"
	"unicode"
	"unicode/utf8"
)

// visible shows s with every character that could move the cursor, redraw
// a line or reorder text escaped, so that what a terminal shows is what s
// says: a command that carries "\r" or an escape sequence cannot paint
// itself as something harmless at a prompt. Control characters become \n,
// \r, \t or \x1b; format characters such as bidirectional overrides
// become \u202e; bytes that are not UTF-8 become \xff. Everything else,
// backslashes included, is shown as it is.
func visible(s string) string {
	clean := true
	for _, r := range s {
		if needsEscape(r) {
			clean = false
			break
		}
	}
	if clean && utf8.ValidString(s) {
		return s
	}
	var b strings.Builder
	for i := 0; i < len(s); {
		r, size := utf8.DecodeRuneInString(s[i:])
		switch {
		case r == utf8.RuneError && size == 1:
			fmt.Fprintf(&b, `\x%02x`, s[i])
		case r == '\n':
			b.WriteString(`\n`)
		case r == '\r':
			b.WriteString(`\r`)
		case r == '\t':
			b.WriteString(`\t`)
		case r < 0x80 && needsEscape(r):
			fmt.Fprintf(&b, `\x%02x`, r)
		case needsEscape(r):
			fmt.Fprintf(&b, `\u%04x`, r)
		default:
			b.WriteString(s[i : i+size])
		}
		i += size
	}
	return b.String()
}

// needsEscape reports the characters visible escapes: C0 and C1 controls,
// DEL, format characters (bidirectional controls, zero-width characters)
// and the Unicode line and paragraph separators.
func needsEscape(r rune) bool {
	return r < 0x20 || r == 0x7f || r >= 0x80 && r < 0xa0 ||
		unicode.Is(unicode.Cf, r) || r == '\u2028' || r == '\u2029'
}
