package builtins

import (
	"fmt"
	"strings"
)

// dotenvVar is one assignment of a .env file.
type dotenvVar struct {
	Key, Value string
}

// dotenvError is a .env file's mistake, at the line it starts on.
type dotenvError struct {
	Line int
	Msg  string
}

func (e *dotenvError) Error() string { return fmt.Sprintf("line %d: %s", e.Line, e.Msg) }

// parseDotenv reads the text of a .env file, the subset every dotenv
// reader agrees on:
//
//	# a comment, and blank lines
//	KEY=value            # the value is trimmed; " #" starts a comment
//	export KEY=value     # as a shell would source it
//	KEY='single quoted'  # as written: no escapes, may span lines
//	KEY="double quoted"  # \n \r \t \" \\ \$ are escapes, may span lines
//	KEY=                 # the empty string
//
// Nothing is expanded: ${OTHER} stays as written. A later assignment of
// a key wins, as when a shell sources the file. Anything else is an error
// naming its line.
func parseDotenv(text string) ([]dotenvVar, error) {
	var vars []dotenvVar
	text = strings.TrimPrefix(text, "\ufeff") // an editor's byte order mark
	line := 1
	for text != "" {
		start := line
		var cur string
		cur, text = cutLine(text)
		line++
		trimmed := strings.TrimSpace(cur)
		if trimmed == "" || trimmed[0] == '#' {
			continue
		}
		if rest, ok := strings.CutPrefix(trimmed, "export"); ok && rest != "" && (rest[0] == ' ' || rest[0] == '\t') {
			trimmed = strings.TrimSpace(rest)
		}
		key, value, ok := strings.Cut(trimmed, "=")
		key = strings.TrimSpace(key)
		if !ok {
			return nil, &dotenvError{start, fmt.Sprintf("want KEY=value, got %q", trimmed)}
		}
		if !validEnvName(key) {
			return nil, &dotenvError{start, fmt.Sprintf("%q is not a variable name (letters, digits and _, not starting with a digit)", key)}
		}
		value = strings.TrimLeft(value, " \t")
		if value != "" && (value[0] == '"' || value[0] == '\'') {
			// A quoted value may go on over the next lines: put them
			// back and read to the closing quote.
			var v, after string
			var err error
			v, after, line, err = readQuoted(value, text, line)
			if err != nil {
				return nil, &dotenvError{start, err.Error()}
			}
			text = after
			vars = append(vars, dotenvVar{key, v})
			continue
		}
		if i := strings.Index(value, " #"); i >= 0 {
			value = value[:i]
		} else if i := strings.Index(value, "\t#"); i >= 0 {
			value = value[:i]
		}
		vars = append(vars, dotenvVar{key, strings.TrimSpace(value)})
	}
	return vars, nil
}

// cutLine splits text after its first line (a "\r\n" or "\n" ends it).
func cutLine(text string) (line, rest string) {
	line, rest, _ = strings.Cut(text, "\n")
	return strings.TrimSuffix(line, "\r"), rest
}

// readQuoted reads the quoted value that starts value (the rest of its
// line) and may go on in next (the lines after it). It returns the value,
// what follows its line, and the number of the line after it.
func readQuoted(value, next string, line int) (v, after string, nextLine int, err error) {
	quote := value[0]
	s := value[1:]
	var b strings.Builder
	for {
		i := 0
		for ; i < len(s); i++ {
			c := s[i]
			if c == quote {
				break
			}
			if c == '\\' && quote == '"' && i+1 < len(s) {
				i++
				switch s[i] {
				case 'n':
					b.WriteByte('\n')
				case 'r':
					b.WriteByte('\r')
				case 't':
					b.WriteByte('\t')
				case '"', '\\', '$', '`', '\'':
					b.WriteByte(s[i])
				default: // not an escape: kept as written
					b.WriteByte('\\')
					b.WriteByte(s[i])
				}
				continue
			}
			b.WriteByte(c)
		}
		if i < len(s) { // the closing quote
			if rest := strings.TrimSpace(s[i+1:]); rest != "" && rest[0] != '#' {
				return "", "", 0, fmt.Errorf("unexpected %q after the closing quote", rest)
			}
			return b.String(), next, line, nil
		}
		if next == "" {
			return "", "", 0, fmt.Errorf("the value's %c quote is never closed", quote)
		}
		// The value goes on over the next line, newline included.
		var l string
		l, next = cutLine(next)
		line++
		b.WriteByte('\n')
		s = l
	}
}

// validEnvName reports whether s names a variable: [A-Za-z_][A-Za-z0-9_]*.
func validEnvName(s string) bool {
	if s == "" {
		return false
	}
	for i, c := range s {
		switch {
		case c == '_', 'a' <= c && c <= 'z', 'A' <= c && c <= 'Z':
		case '0' <= c && c <= '9' && i > 0:
		default:
			return false
		}
	}
	return true
}
