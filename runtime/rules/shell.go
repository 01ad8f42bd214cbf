package rules

import "strings"

// The shell model: what bash does with a command line, read far enough to
// know every simple command it runs and the words it passes, or to know
// that it cannot tell. An allow rule relies on the first; whatever the
// model does not follow exactly makes the line unsafe, which no allow rule
// covers (the next approver decides). Deny rules use what the model could
// read, safe or not, as a best effort.

// word is one word of a simple command after quote removal.
type word struct {
	text string
	// raw is the word as written, quotes and all.
	raw string
	// literal: text is exactly what bash passes. False when an expansion
	// (a parameter, a tilde, a glob or brace pattern, an escape whose value
	// depends on the locale) may change it.
	literal bool
}

// command is a simple command: its words, without assignments or
// redirections.
type command []word

// texts are the command's words after quote removal.
func (c command) texts() []string {
	out := make([]string, len(c))
	for i, w := range c {
		out[i] = w.text
	}
	return out
}

// shellParse is a shell command line split into simple commands.
type shellParse struct {
	cmds []command
	// unsafe names the first construct that may run or write something the
	// words do not show, or that the model does not follow ("" when there
	// is none).
	unsafe string
}

func (p shellParse) safe() bool { return p.unsafe == "" }

// maxNesting bounds how deep substitutions are read for deny rules.
const maxNesting = 8

// parseShell splits a bash command line into simple commands and their
// words, removing quotes.
func parseShell(s string) shellParse {
	var p shellParse
	l := lexer{s: joinLines(s), out: &p}
	l.run()
	return p
}

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

// lexer reads one command list (the line, or the inside of a
// substitution) into out.
type lexer struct {
	s     string
	i     int
	depth int
	out   *shellParse

	words command
	// redirected: the current command has a redirection (so it is not
	// empty even without words).
	redirected bool
	// needCmd: an operator that must be followed by a command (|, &&, ||)
	// was read and no command came yet.
	needCmd bool
	// afterTime: the last word was the keyword time, which takes -p.
	afterTime bool
}

func (l *lexer) mark(why string) {
	if l.out.unsafe == "" {
		l.out.unsafe = why
	}
}

// nested reads the inside of a substitution: its commands are commands too
// (a deny rule must see them), and it makes the line unsafe.
func (l *lexer) nested(inner, why string) {
	l.mark(why)
	if l.depth >= maxNesting {
		return
	}
	n := lexer{s: inner, depth: l.depth + 1, out: l.out}
	n.run()
}

// endCmd ends the current simple command. op is the operator that ends it
// ("" at the end of the input or a newline).
func (l *lexer) endCmd(op string) {
	empty := len(l.words) == 0 && !l.redirected
	if len(l.words) > 0 {
		l.out.cmds = append(l.out.cmds, l.words)
	}
	if !empty {
		l.needCmd = false
	}
	l.words, l.redirected = nil, false
	if op == "" {
		// A newline may follow |, && or ||; the end of the input may not.
		if l.i >= len(l.s) && l.needCmd {
			l.mark("a command line that ends in an operator")
		}
		return
	}
	if empty {
		l.mark("an operator with no command before it (" + op + ")")
	}
	l.needCmd = op == "|" || op == "|&" || op == "&&" || op == "||"
}

// isBlank reports bash's blanks: only space and tab separate words.
func isBlank(c byte) bool { return c == ' ' || c == '\t' }

// isMeta reports the characters that end an unquoted word.
func isMeta(c byte) bool {
	return isBlank(c) || strings.IndexByte("\n;&|<>()", c) >= 0
}

func (l *lexer) run() {
	for l.i < len(l.s) {
		c := l.s[l.i]
		switch {
		case isBlank(c):
			l.i++
		case c == '\\' && l.i+1 < len(l.s) && l.s[l.i+1] == '\n':
			l.i += 2 // a line continuation between words
		case c == '\n':
			l.i++
			l.endCmd("")
		case c == '#':
			// A comment: only at the start of a word, which is where the
			// loop stands. The newline that ends it ends the command.
			for l.i < len(l.s) && l.s[l.i] != '\n' {
				l.i++
			}
		case c == ';':
			l.i++
			if l.i < len(l.s) && (l.s[l.i] == ';' || l.s[l.i] == '&') {
				l.mark("a case terminator (" + l.s[l.i-1:l.i+1] + ")")
				l.i++
			}
			l.endCmd(";")
		case c == '&':
			switch {
			case strings.HasPrefix(l.s[l.i:], "&>"):
				l.redirect()
			case strings.HasPrefix(l.s[l.i:], "&&"):
				l.i += 2
				l.endCmd("&&")
			default:
				l.i++
				l.endCmd("&")
			}
		case c == '|':
			op := "|"
			if l.i+1 < len(l.s) && (l.s[l.i+1] == '|' || l.s[l.i+1] == '&') {
				op = l.s[l.i : l.i+2]
			}
			l.i += len(op)
			l.endCmd(op)
		case c == '<' || c == '>':
			l.redirect()
		case c == '(' || c == ')':
			// A subshell, an arithmetic command, a function definition: what
			// runs inside is a command too, so the reading goes on.
			l.mark("a subshell or group")
			l.i++
			l.endCmd("")
		default:
			l.word()
		}
	}
	l.endCmd("")
}

// reserved are bash's reserved words: at the start of a command they are
// syntax, not a program.
var reserved = map[string]bool{
	"!": true, "[[": true, "]]": true, "{": true, "}": true, "case": true, "coproc": true, "do": true,
	"done": true, "elif": true, "else": true, "esac": true, "fi": true, "for": true, "function": true,
	"if": true, "in": true, "select": true, "then": true, "time": true, "until": true, "while": true,
}

// word reads one word and files it: a command word, a descriptor before a
// redirection, a reserved word or an assignment.
func (l *lexer) word() {
	w := l.readWord()
	if l.i < len(l.s) && (l.s[l.i] == '<' || l.s[l.i] == '>') {
		switch {
		case isDigits(w.raw):
			return // 2>&1: the descriptor of the redirection that follows
		case len(w.raw) > 2 && w.raw[0] == '{' && w.raw[len(w.raw)-1] == '}':
			l.mark("a redirection to a descriptor variable")
			return
		}
	}
	afterTime := l.afterTime
	l.afterTime = false
	if len(l.words) == 0 {
		if afterTime && (w.raw == "-p" || w.raw == "--") {
			return // time's own option
		}
		if reserved[w.raw] {
			l.afterTime = w.raw == "time"
			// Compound commands, negation, time: the model does not follow
			// them; the words after are read on as a command, for deny
			// rules ("if true; then rm -rf x; fi" runs "rm -rf x").
			l.mark("the shell keyword " + w.raw)
			if w.raw == "{" || w.raw == "}" {
				l.endCmd("")
			}
			return
		}
		if isAssignment(w.raw) {
			// FOO=1 cmd: the environment changes what cmd does, and
			// a[expr]=1 evaluates expr. The word stays, for deny rules to
			// skip.
			l.mark("a variable assignment")
		}
	}
	l.words = append(l.words, w)
}

// isAssignment reports a word bash reads as an assignment at the start of
// a command: NAME=..., NAME+=..., NAME[...]=....
func isAssignment(raw string) bool {
	n := 0
	for n < len(raw) && (raw[n] == '_' || isAlpha(raw[n]) || n > 0 && isDigit(raw[n])) {
		n++
	}
	if n == 0 || n == len(raw) {
		return false
	}
	rest := raw[n:]
	if rest[0] == '[' {
		end := strings.IndexByte(rest, ']')
		if end < 0 {
			return false
		}
		rest = rest[end+1:]
	}
	return strings.HasPrefix(rest, "=") || strings.HasPrefix(rest, "+=")
}

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
				b.WriteByte('\\') // a backslash that ends the line stays
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

// redirect reads a redirection at l.s[l.i] ('<', '>' or "&>"). Duplicating
// or closing a descriptor (>&2, >&-) and writing to /dev/null show nothing
// new; every other redirection reads or writes a file the words do not
// show, so it is unsafe.
func (l *lexer) redirect() {
	s := l.s
	l.redirected = true
	if s[l.i] != '&' && l.i+1 < len(s) && s[l.i+1] == '(' {
		end := matchClose(s, l.i+2, '(', ')', 1)
		if end < 0 {
			l.nested(s[l.i+2:], "process substitution")
			l.i = len(s)
			return
		}
		l.nested(s[l.i+2:end], "process substitution")
		l.i = end + 1
		return
	}
	var op string
	for _, o := range []string{"&>>", "&>", "<<<", "<<-", "<<", "<&", "<>", "<", ">>", ">|", ">&", ">"} {
		if strings.HasPrefix(s[l.i:], o) {
			op = o
			break
		}
	}
	l.i += len(op)
	for l.i < len(s) && isBlank(s[l.i]) {
		l.i++
	}
	target := l.readTarget()
	switch {
	case target.raw == "":
		l.mark("a redirection with no target")
	case op[0] == '<':
		l.mark("an input redirection or here-document")
	case op == ">&" && target.literal && (isDigits(target.text) || target.text == "-"):
	case op == ">&" || !target.literal || target.text != "/dev/null":
		l.mark("a redirection to a file")
	}
}

// readTarget reads the word after a redirection operator.
func (l *lexer) readTarget() word {
	if l.i < len(l.s) && isMeta(l.s[l.i]) {
		return word{}
	}
	return l.readWord()
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
