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
		if strings.HasPrefix(w.text, "%") {
			// A job specification: bash runs `%1 &` as bg %1 and any
			// other `%...` as fg, whatever the quoting (FuzzShellModelMatchesBash).
			l.mark("a job specification " + w.raw + " (bash runs fg or bg)")
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
	case !target.literal || target.text != "/dev/null":
		l.mark("a redirection to a file")
	}
}
