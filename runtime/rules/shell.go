package rules

import "strings"

// shellParse is a shell command split into simple commands of words.
type shellParse struct {
	cmds [][]string
	// unsafe names the first construct that may run or write something the
	// words do not show ("" when there is none).
	unsafe string
}

func (p shellParse) safe() bool { return p.unsafe == "" }

// parseShell splits a POSIX shell command line into simple commands and
// their words, removing quotes. It reads enough of the shell grammar to
// find every place a command starts; what it does not model it reports as
// unsafe rather than guessing.
func parseShell(s string) shellParse {
	var (
		p       shellParse
		words   []string
		cur     strings.Builder
		inWord  bool
		comment bool
	)
	mark := func(why string) {
		if p.unsafe == "" {
			p.unsafe = why
		}
	}
	endWord := func() {
		if inWord {
			words = append(words, cur.String())
			cur.Reset()
			inWord = false
		}
	}
	endCmd := func() {
		endWord()
		if len(words) > 0 {
			p.cmds = append(p.cmds, words)
		}
		words = nil
	}
	for i := 0; i < len(s); i++ {
		c := s[i]
		if comment {
			if c == '\n' {
				comment = false
				endCmd()
			}
			continue
		}
		switch c {
		case ' ', '\t':
			endWord()
		case '\n', ';':
			endCmd()
		case '&', '|':
			if c == '&' && i+1 < len(s) && s[i+1] == '>' {
				// &>file: both streams to a file.
				endWord()
				i = redirect(s, i+1, mark)
				continue
			}
			if i+1 < len(s) && (s[i+1] == c || c == '|' && s[i+1] == '&') {
				i++
			}
			endCmd()
		case '>', '<':
			// A word of digits right before is the descriptor (2>&1).
			if inWord && isDigits(cur.String()) {
				cur.Reset()
				inWord = false
			}
			endWord()
			if c == '<' {
				if i+1 < len(s) && s[i+1] == '(' {
					mark("process substitution")
				} else {
					mark("input redirection")
				}
				continue
			}
			if i+1 < len(s) && s[i+1] == '(' {
				mark("process substitution")
				continue
			}
			i = redirect(s, i, mark)
		case '(', ')':
			// What runs inside a subshell or a substitution is a command
			// too: a deny rule must see it.
			mark("subshell")
			endCmd()
		case '{', '}':
			// Braces are only special as whole words ("{ a; }"); "x{1,2}"
			// is brace expansion, harmless inside a word.
			if !inWord && (i+1 == len(s) || strings.IndexByte(" \t\n;&|", s[i+1]) >= 0) {
				mark("command group")
				endCmd()
				continue
			}
			cur.WriteByte(c)
			inWord = true
		case '#':
			if !inWord {
				comment = true
				continue
			}
			cur.WriteByte(c)
		case '`':
			mark("command substitution")
			endCmd()
		case '$':
			if i+1 < len(s) && s[i+1] == '(' {
				mark("command substitution")
				endCmd()
				i++
				continue
			}
			cur.WriteByte(c)
			inWord = true
		case '\\':
			if i+1 < len(s) {
				i++
				if s[i] != '\n' { // backslash-newline continues the line
					cur.WriteByte(s[i])
					inWord = true
				}
			}
		case '\'':
			inWord = true
			end := strings.IndexByte(s[i+1:], '\'')
			if end < 0 {
				mark("unterminated quote")
				cur.WriteString(s[i+1:])
				i = len(s)
				continue
			}
			cur.WriteString(s[i+1 : i+1+end])
			i += end + 1
		case '"':
			inWord = true
			i++
			closed := false
			for ; i < len(s); i++ {
				d := s[i]
				if d == '"' {
					closed = true
					break
				}
				switch {
				case d == '\\' && i+1 < len(s) && strings.IndexByte("\"\\$`\n", s[i+1]) >= 0:
					i++
					if s[i] != '\n' {
						cur.WriteByte(s[i])
					}
					continue
				case d == '`', d == '$' && i+1 < len(s) && s[i+1] == '(':
					mark("command substitution")
				}
				cur.WriteByte(d)
			}
			if !closed {
				mark("unterminated quote")
			}
		default:
			cur.WriteByte(c)
			inWord = true
		}
	}
	endCmd()
	return p
}

// redirect reads an output redirection starting at s[i] == '>' and returns
// the index of its last byte. Duplicating a descriptor (>&2) and writing to
// /dev/null are harmless; anything else writes a file the words do not
// show, so it is marked unsafe.
func redirect(s string, i int, mark func(string)) int {
	i++ // past '>'
	if i < len(s) && (s[i] == '>' || s[i] == '|') {
		i++
	}
	if i < len(s) && s[i] == '&' {
		j := i + 1
		for j < len(s) && (s[j] >= '0' && s[j] <= '9' || s[j] == '-') {
			j++
		}
		if j > i+1 && (j == len(s) || strings.IndexByte(" \t\n;&|", s[j]) >= 0) {
			return j - 1
		}
		mark("redirection")
		return i
	}
	for i < len(s) && (s[i] == ' ' || s[i] == '\t') {
		i++
	}
	const devNull = "/dev/null"
	if strings.HasPrefix(s[i:], devNull) {
		j := i + len(devNull)
		if j == len(s) || strings.IndexByte(" \t\n;&|", s[j]) >= 0 {
			return j - 1
		}
	}
	mark("redirection")
	return i - 1
}

func isDigits(s string) bool {
	if s == "" {
		return false
	}
	for _, c := range s {
		if c < '0' || c > '9' {
			return false
		}
	}
	return true
}
