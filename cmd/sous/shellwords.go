package main

import (
	"fmt"
	"strings"
	"unicode"
	"unicode/utf8"
)

// shellJoin renders an argv as a POSIX shell would need it typed, as run
// errors show commands: plain words as they are, others in single quotes,
// so that spaces and empty arguments show. A word with a control character
// or bytes that are not UTF-8 (a newline would break a table's row) is
// written $'...', with escapes, as bash, zsh and ksh read it.
func shellJoin(argv []string) string {
	words := make([]string, len(argv))
	for i, a := range argv {
		words[i] = shellWord(a)
	}
	return strings.Join(words, " ")
}

// shellWord quotes one word for shellJoin.
func shellWord(s string) string {
	switch {
	case s != "" && !strings.ContainsAny(s, " \t\n'\"\\$`|&;<>()*?[]#~!{}") && printable(s):
		return s
	case printable(s):
		return "'" + strings.ReplaceAll(s, "'", `'\''`) + "'"
	}
	return dollarQuote(s)
}

// dollarQuote writes s as $'...', with escapes for control characters,
// invisible ones and bytes that are not UTF-8, as bash, zsh and ksh read
// it: what a table shows of s then fits on its line and says what s holds.
func dollarQuote(s string) string {
	var b strings.Builder
	b.WriteString("$'")
	for i := 0; i < len(s); {
		r, size := utf8.DecodeRuneInString(s[i:])
		switch {
		case r == utf8.RuneError && size == 1:
			fmt.Fprintf(&b, `\x%02x`, s[i])
		case r == '\n':
			b.WriteString(`\n`)
		case r == '\t':
			b.WriteString(`\t`)
		case r == '\r':
			b.WriteString(`\r`)
		case r == '\'' || r == '\\':
			b.WriteByte('\\')
			b.WriteRune(r)
		case r < 0x20 || r == 0x7f:
			fmt.Fprintf(&b, `\x%02x`, r)
		case r >= 0x80 && r < 0xa0 || invisible(r): // C1 controls, format characters
			fmt.Fprintf(&b, `\u%04x`, r)
		default:
			b.WriteString(s[i : i+size])
		}
		i += size
	}
	b.WriteByte('\'')
	return b.String()
}

// printable reports whether s is UTF-8 without control characters (C1
// ones included) or characters that change how a line reads without
// showing (invisible).
func printable(s string) bool {
	if !utf8.ValidString(s) {
		return false
	}
	for _, r := range s {
		if r < 0x20 || r == 0x7f || r >= 0x80 && r < 0xa0 || invisible(r) {
			return false
		}
	}
	return true
}

// invisible reports format characters (bidirectional overrides,
// zero-width characters) and the Unicode line and paragraph separators,
// as the approval prompt escapes them.
func invisible(r rune) bool {
	return unicode.Is(unicode.Cf, r) || r == '\u2028' || r == '\u2029'
}
