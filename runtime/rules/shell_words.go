package rules

import "strings"

// Reading words: quotes, escapes and expansions, as bash reads them.

// readWord reads an unquoted word up to the next metacharacter.
func (l *lexer) readWord() word {
	start := l.i
	var b strings.Builder
	lit := true
	for l.i < len(l.s) {
		c := l.s[l.i]
		if isMeta(c) {
			break
		}
		switch c {
		case '\\':
			switch {
			case l.i+1 == len(l.s):
				// A backslash that ends the input usually stays (`echo a\`
				// prints "a\"), but not always: after a quoted newline bash
				// drops it (`'<newline>'\` ran the word "<newline>",
				// FuzzShellModelMatchesBash). When in doubt, no match.
				l.mark("a backslash at the end of the command")
				b.WriteByte('\\')
				l.i++
			case l.s[l.i+1] == '\n':
				l.i += 2 // a line continuation
			default:
				b.WriteByte(l.s[l.i+1])
				l.i += 2
			}
		case '\'':
			end := strings.IndexByte(l.s[l.i+1:], '\'')
			if end < 0 {
				l.mark("an unterminated quote")
				b.WriteString(l.s[l.i+1:])
				l.i = len(l.s)
				continue
			}
			b.WriteString(l.s[l.i+1 : l.i+1+end])
			l.i += end + 2
		case '"':
			if !l.readDouble(&b) {
				lit = false
			}
		case '$':
			if !l.readDollar(&b, false) {
				lit = false
			}
		case '`':
			l.readBackquote(&b, false)
			lit = false
		case '*', '?', '[', '{', '}', '~':
			// A glob, a brace expansion or a tilde: the words bash passes
			// depend on the files, the environment or the pattern.
			b.WriteByte(c)
			l.i++
			lit = false
		case 0:
			l.mark("a NUL byte")
			l.i++
		default:
			b.WriteByte(c)
			l.i++
		}
	}
	return word{text: b.String(), raw: l.s[start:l.i], literal: lit}
}

// readDouble reads a double-quoted string at l.s[l.i] == '"'. It reports
// whether its text is literal.
func (l *lexer) readDouble(b *strings.Builder) bool {
	lit := true
	l.i++
	for l.i < len(l.s) {
		c := l.s[l.i]
		switch c {
		case '"':
			l.i++
			return lit
		case '\\':
			if l.i+1 < len(l.s) && strings.IndexByte("$`\"\\\n", l.s[l.i+1]) >= 0 {
				if l.s[l.i+1] != '\n' {
					b.WriteByte(l.s[l.i+1])
				}
				l.i += 2
				continue
			}
			b.WriteByte('\\')
			l.i++
		case '$':
			if !l.readDollar(b, true) {
				lit = false
			}
		case '`':
			l.readBackquote(b, true)
			lit = false
		case 0:
			l.mark("a NUL byte")
			l.i++
		default:
			b.WriteByte(c)
			l.i++
		}
	}
	l.mark("an unterminated quote")
	return false
}

// readDollar reads what starts at l.s[l.i] == '$': an expansion, an ANSI-C
// or locale quote, or a plain dollar sign. It reports whether the text it
// wrote is literal. Plain parameters ($x, ${x}, $1, $@, $_) only expand a
// value; everything else that can evaluate something is unsafe:
// substitutions, arithmetic, and any ${...} beyond a plain name (a
// subscript, an offset or length, an indirection, an @ transformation all
// evaluate text as arithmetic or as a prompt, which can run commands).
func (l *lexer) readDollar(b *strings.Builder, inDouble bool) bool {
	s := l.s
	if l.i+1 >= len(s) {
		b.WriteByte('$')
		l.i++
		return true
	}
	start := l.i
	switch n := s[l.i+1]; {
	case n == '\'' && !inDouble:
		return l.readANSIC(b)
	case n == '"' && !inDouble:
		// Translated by the locale's message catalog, and the translation
		// is expanded again.
		l.mark("a locale-translated string $\"...\"")
		l.i++
		l.readDouble(b)
		return false
	case n == '(':
		arith := l.i+2 < len(s) && s[l.i+2] == '('
		end := matchClose(s, l.i+2, '(', ')', 1)
		if end < 0 {
			l.nested(s[l.i+2:], "an unterminated substitution")
			l.i = len(s)
		} else {
			why := "command substitution"
			if arith {
				why = "arithmetic expansion"
			}
			l.nested(s[l.i+2:end], why)
			l.i = end + 1
		}
	case n == '[':
		end := matchClose(s, l.i+2, '[', ']', 1)
		if end < 0 {
			l.nested(s[l.i+2:], "an unterminated substitution")
			l.i = len(s)
		} else {
			l.nested(s[l.i+2:end], "arithmetic expansion $[...]")
			l.i = end + 1
		}
	case n == '{':
		end := matchClose(s, l.i+2, '{', '}', 1)
		if end < 0 {
			l.nested(s[l.i+2:], "an unterminated parameter expansion")
			l.i = len(s)
			break
		}
		if inner := s[l.i+2 : end]; !isPlainParam(inner) {
			l.nested(inner, "the parameter expansion ${"+inner+"}")
		}
		l.i = end + 1
	case n == '_' || isAlpha(n):
		l.i += 2
		for l.i < len(s) && (s[l.i] == '_' || isAlpha(s[l.i]) || isDigit(s[l.i])) {
			l.i++
		}
	case isDigit(n) || strings.IndexByte("@*#?-$!", n) >= 0:
		l.i += 2
	default:
		b.WriteByte('$')
		l.i++
		return true
	}
	b.WriteString(s[start:l.i])
	return false
}

// isPlainParam reports the inside of ${...} that only names a parameter.
func isPlainParam(s string) bool {
	if len(s) == 1 && strings.IndexByte("@*#?-$!_", s[0]) >= 0 {
		return true
	}
	if isDigits(s) {
		return true
	}
	for i := 0; i < len(s); i++ {
		if !(s[i] == '_' || isAlpha(s[i]) || i > 0 && isDigit(s[i])) {
			return false
		}
	}
	return s != ""
}

// readANSIC reads $'...' at l.s[l.i] == '$', decoding its escapes as bash
// does. Escapes whose value depends on the locale or that end the string
// early (\u, \U, \c, a NUL) make the text not literal.
func (l *lexer) readANSIC(b *strings.Builder) bool {
	s := l.s
	lit := true
	l.i += 2
	for l.i < len(s) {
		c := s[l.i]
		if c == '\'' {
			l.i++
			return lit
		}
		if c != '\\' || l.i+1 == len(s) {
			if c == 0 {
				l.mark("a NUL byte")
			}
			b.WriteByte(c)
			l.i++
			continue
		}
		e := s[l.i+1]
		l.i += 2
		switch e {
		case 'a':
			b.WriteByte('\a')
		case 'b':
			b.WriteByte('\b')
		case 'e', 'E':
			b.WriteByte(0x1b)
		case 'f':
			b.WriteByte('\f')
		case 'n':
			b.WriteByte('\n')
		case 'r':
			b.WriteByte('\r')
		case 't':
			b.WriteByte('\t')
		case 'v':
			b.WriteByte('\v')
		case '\\', '\'', '"', '?':
			b.WriteByte(e)
		case 'x':
			v, n := 0, 0
			for n < 2 && l.i < len(s) && isHex(s[l.i]) {
				v = v*16 + hexValue(s[l.i])
				l.i++
				n++
			}
			switch {
			case n == 0:
				b.WriteString(`\x`)
			case v == 0:
				lit = false // the string ends at a NUL
			default:
				b.WriteByte(byte(v))
			}
		case '0', '1', '2', '3', '4', '5', '6', '7':
			v, n := int(e-'0'), 1
			for n < 3 && l.i < len(s) && s[l.i] >= '0' && s[l.i] <= '7' {
				v = v*8 + int(s[l.i]-'0')
				l.i++
				n++
			}
			if v == 0 || v > 0o377 {
				lit = false
			}
			b.WriteByte(byte(v))
		case 'u', 'U', 'c':
			// Locale-dependent (\u, \U) or a control character that may be
			// NUL (\c@): the value is not sure. Consume the hex digits or
			// the character so that the quote still ends where bash ends it.
			lit = false
			if e == 'c' {
				if l.i < len(s) && s[l.i] != '\'' {
					l.i++
				}
				break
			}
			max := 4
			if e == 'U' {
				max = 8
			}
			for n := 0; n < max && l.i < len(s) && isHex(s[l.i]); n++ {
				l.i++
			}
		default:
			b.WriteByte('\\')
			b.WriteByte(e)
		}
	}
	l.mark("an unterminated quote")
	return false
}

// readBackquote reads `...` at l.s[l.i] == '`'.
func (l *lexer) readBackquote(b *strings.Builder, inDouble bool) {
	s := l.s
	start := l.i
	var inner strings.Builder
	l.i++
	for l.i < len(s) && s[l.i] != '`' {
		if s[l.i] == '\\' && l.i+1 < len(s) && (strings.IndexByte("$`\\", s[l.i+1]) >= 0 || inDouble && s[l.i+1] == '"') {
			l.i++
		}
		inner.WriteByte(s[l.i])
		l.i++
	}
	why := "command substitution"
	if l.i >= len(s) {
		why = "an unterminated substitution"
	} else {
		l.i++
	}
	l.nested(inner.String(), why)
	b.WriteString(s[start:l.i])
}

// readTarget reads the word after a redirection operator.
func (l *lexer) readTarget() word {
	if l.i < len(l.s) && isMeta(l.s[l.i]) {
		return word{}
	}
	return l.readWord()
}
