package rules

import "strings"

// Scanning helpers of the shell model: what bash does to a line before it
// reads it, finding where an expansion ends, character classes.

// joinLines removes every backslash-newline that bash removes before it
// reads a line: everywhere but inside single quotes, $'...' and comments.
// So `$\<newline>{x@P}` is `${x@P}`, as bash runs it.
func joinLines(s string) string {
	if !strings.Contains(s, "\\\n") {
		return s
	}
	const (
		normal = iota
		single
		ansiC
		double
		comment
	)
	b := make([]byte, 0, len(s))
	state := normal
	dollars := 0 // unescaped '$' just before, in normal state: $' is ANSI-C after an odd run
	for i := 0; i < len(s); i++ {
		c := s[i]
		run := dollars
		dollars = 0
		switch state {
		case normal, double:
			switch {
			case c == '\\' && i+1 < len(s) && s[i+1] == '\n':
				i++
				dollars = run // the dollar still stands before what follows
				continue
			case c == '\\' && i+1 < len(s):
				b = append(b, c, s[i+1])
				i++
				continue
			case c == '"' && state == normal:
				state = double
			case c == '"':
				state = normal
			case state == double:
			case c == '$':
				dollars = run + 1
			case c == '\'' && run%2 == 1:
				state = ansiC
			case c == '\'':
				state = single
			case c == '#' && (len(b) == 0 || isMeta(b[len(b)-1])):
				state = comment
			}
		case single:
			if c == '\'' {
				state = normal
			}
		case ansiC:
			if c == '\\' && i+1 < len(s) {
				b = append(b, c, s[i+1])
				i++
				continue
			}
			if c == '\'' {
				state = normal
			}
		case comment:
			if c == '\n' {
				state = normal
			}
		}
		b = append(b, c)
	}
	return string(b)
}

// matchClose finds the close that balances open in s from i, where depth
// opens are pending, skipping quotes, escapes and nested expansions. It is
// for constructs that are unsafe anyway: it only has to find their end
// well enough for deny rules to read what follows. -1: none.
func matchClose(s string, i int, open, close byte, depth int) int {
	for ; i < len(s); i++ {
		switch c := s[i]; c {
		case '\\':
			i++
		case '\'':
			end := strings.IndexByte(s[i+1:], '\'')
			if end < 0 {
				return -1
			}
			i += end + 1
		case '"':
			for i++; i < len(s) && s[i] != '"'; i++ {
				switch {
				case s[i] == '\\':
					i++
				case s[i] == '$' && i+1 < len(s) && (s[i+1] == '(' || s[i+1] == '{'):
					o, cl := s[i+1], byte(')')
					if o == '{' {
						cl = '}'
					}
					if i = matchClose(s, i+2, o, cl, 1); i < 0 {
						return -1
					}
				}
			}
			if i >= len(s) {
				return -1
			}
		case '`':
			for i++; i < len(s) && s[i] != '`'; i++ {
				if s[i] == '\\' {
					i++
				}
			}
			if i >= len(s) {
				return -1
			}
		case '$':
			if i+1 < len(s) && s[i+1] == '\'' { // $'...': a backslash escapes a quote
				for i += 2; i < len(s) && s[i] != '\''; i++ {
					if s[i] == '\\' {
						i++
					}
				}
				if i >= len(s) {
					return -1
				}
				continue
			}
			if i+1 < len(s) && (s[i+1] == '(' || s[i+1] == '{' || s[i+1] == '[') {
				o := s[i+1]
				cl := map[byte]byte{'(': ')', '{': '}', '[': ']'}[o]
				if i = matchClose(s, i+2, o, cl, 1); i < 0 {
					return -1
				}
			}
		case open:
			depth++
		case close:
			depth--
			if depth == 0 {
				return i
			}
		}
	}
	return -1
}

func isAlpha(c byte) bool { return c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' }
func isDigit(c byte) bool { return c >= '0' && c <= '9' }
func isHex(c byte) bool   { return isDigit(c) || c >= 'a' && c <= 'f' || c >= 'A' && c <= 'F' }

func hexValue(c byte) int {
	switch {
	case isDigit(c):
		return int(c - '0')
	case c >= 'a':
		return int(c-'a') + 10
	}
	return int(c-'A') + 10
}

func isDigits(s string) bool {
	if s == "" {
		return false
	}
	for i := 0; i < len(s); i++ {
		if !isDigit(s[i]) {
			return false
		}
	}
	return true
}
