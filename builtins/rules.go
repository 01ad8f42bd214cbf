package builtins

import (
	"fmt"
	"net/url"
	"path"
	"strings"
	"unicode"
)

// This file is the approval rule matcher: Claude Code's permission rule
// syntax, used by permissions() in recipes and by `sous run --allow/--deny`.
// It is pure (no I/O, no Starlark) so that it can be table-tested and
// fuzzed on its own.
//
//	"Read"                  any use of the tool
//	"Bash(go test:*)"       a command whose words start with `go test`
//	"Bash(make)"            exactly the command `make`
//	"Write(/abs/prefix/**)" a glob on the tool's file_path, path or
//	                        notebook_path (`**` spans directories, `*` and `?`
//	                        stay within one); relative patterns and paths are
//	                        taken from the session's cwd
//	"WebFetch(domain:x.io)" a url on x.io or a subdomain of it
//	"mcp__server"           every tool of that MCP server
//
// Commands are compared word by word after shell quote removal, so
// `go  "test"` is `go test`. A shell command (Bash's string "command") is
// split at unquoted ;, &&, ||, |, & and newlines. An allow rule covers the
// command only when every part is covered by an allow rule and nothing in
// it runs or writes what the words do not show: command substitution ($(...)
// or backquotes, even inside double quotes), process substitution, a
// subshell or group, a here-document, or a redirection other than to a file
// descriptor or /dev/null. A deny or ask rule applies when it matches the
// whole command or any part of it. This makes allow rules strict and deny
// rules broad; deny rules remain best effort (a command can always hide
// another behind `sh -c` or an alias), so deny is no sandbox.
//
// Privileged commands (tool "Sudo") carry an argv ({"command": [...]}): no
// shell reads it, so it is compared as one command, never split.

// Rule is one parsed rule.
type Rule struct {
	Tool string
	// Content is what is between the parentheses ("" with HasContent false:
	// any use of the tool).
	Content    string
	HasContent bool
}

// ParseRule parses "Tool" or "Tool(content)".
func ParseRule(s string) (Rule, error) {
	s = strings.TrimSpace(s)
	open := strings.IndexByte(s, '(')
	tool := s
	var r Rule
	if open >= 0 {
		if !strings.HasSuffix(s, ")") {
			return Rule{}, fmt.Errorf("rule %q: want Tool or Tool(content), with the content closed by a final ')'", s)
		}
		tool = s[:open]
		r.Content = strings.TrimSpace(s[open+1 : len(s)-1])
		r.HasContent = true
		if r.Content == "" {
			return Rule{}, fmt.Errorf("rule %q: empty parentheses; write %q for any use of the tool", s, tool)
		}
	}
	if tool == "" {
		return Rule{}, fmt.Errorf("rule %q: no tool name", s)
	}
	for _, c := range tool {
		if !(c == '_' || c == '-' || c == '.' || c < unicode.MaxASCII && (unicode.IsLetter(c) || unicode.IsDigit(c))) {
			return Rule{}, fmt.Errorf("rule %q: tool name %q: want letters, digits, '_', '-' or '.'", s, tool)
		}
	}
	r.Tool = tool
	return r, nil
}

// String is the rule in Claude Code's syntax.
func (r Rule) String() string {
	if !r.HasContent {
		return r.Tool
	}
	return r.Tool + "(" + r.Content + ")"
}

// RuleRequest is what a rule is matched against.
type RuleRequest struct {
	Tool  string
	Input map[string]any
	// Cwd resolves relative paths in inputs and patterns ("" when unknown:
	// relative paths then match relative patterns only, literally).
	Cwd string
}

// Verdict is what a rule set says about a request.
type Verdict int

const (
	NoMatch Verdict = iota // no rule applies
	Allowed
	Denied
	Asked // an ask rule: the next approver decides
)

func (v Verdict) String() string {
	return [...]string{"no match", "allow", "deny", "ask"}[v]
}

// RuleSet is allow, deny and ask rules.
type RuleSet struct {
	Allow, Deny, Ask []Rule
}

// ParseRules parses rule strings; errors name the list and index.
func ParseRules(list string, rules []string) ([]Rule, error) {
	out := make([]Rule, len(rules))
	for i, s := range rules {
		r, err := ParseRule(s)
		if err != nil {
			return nil, fmt.Errorf("%s[%d]: %w", list, i, err)
		}
		out[i] = r
	}
	return out, nil
}

// Decide applies the set: a deny rule that touches the request wins, then
// an ask rule, then allow rules that cover all of it. The rule returned is
// the one that decided (for messages); it is zero for Allowed when several
// rules covered the parts of a compound command, and for NoMatch.
func (rs RuleSet) Decide(req RuleRequest) (Verdict, Rule) {
	for _, r := range rs.Deny {
		if r.Touches(req) {
			return Denied, r
		}
	}
	for _, r := range rs.Ask {
		if r.Touches(req) {
			return Asked, r
		}
	}
	if len(rs.Allow) == 0 {
		return NoMatch, Rule{}
	}
	for _, r := range rs.Allow {
		if r.Covers(req) {
			return Allowed, r
		}
	}
	// A compound command may have its parts allowed by different rules
	// ("go vet ./... && go test ./...").
	if sh, ok := shellCommand(req); ok {
		p := parseShell(sh)
		if p.safe() && len(p.cmds) > 1 {
			for _, words := range p.cmds {
				covered := false
				for _, r := range rs.Allow {
					if r.toolMatches(req.Tool) && (!r.HasContent || wordsMatch(r.Content, words)) {
						covered = true
						break
					}
				}
				if !covered {
					return NoMatch, Rule{}
				}
			}
			return Allowed, Rule{}
		}
	}
	return NoMatch, Rule{}
}

// toolMatches compares tool names; "mcp__server" covers the server's tools.
func (r Rule) toolMatches(tool string) bool {
	if r.Tool == tool {
		return true
	}
	return !r.HasContent && strings.HasPrefix(r.Tool, "mcp__") && strings.Count(r.Tool, "__") == 1 &&
		strings.HasPrefix(tool, r.Tool+"__")
}

// Covers reports whether all of the request falls under the rule: what an
// allow rule needs.
func (r Rule) Covers(req RuleRequest) bool {
	if !r.toolMatches(req.Tool) {
		return false
	}
	if !r.HasContent {
		return true
	}
	if sh, ok := shellCommand(req); ok {
		p := parseShell(sh)
		if !p.safe() || len(p.cmds) == 0 {
			return false
		}
		for _, words := range p.cmds {
			if !wordsMatch(r.Content, words) {
				return false
			}
		}
		return true
	}
	if argv, ok := argvCommand(req); ok {
		return wordsMatch(r.Content, argv)
	}
	if paths := inputPaths(req); len(paths) > 0 {
		for _, p := range paths {
			if !pathMatch(r.Content, p, req.Cwd) {
				return false
			}
		}
		return true
	}
	if u, ok := req.Input["url"].(string); ok {
		return domainMatch(r.Content, u)
	}
	return false
}

// Touches reports whether any part of the request falls under the rule:
// what a deny or ask rule needs.
func (r Rule) Touches(req RuleRequest) bool {
	if !r.toolMatches(req.Tool) {
		return false
	}
	if !r.HasContent {
		return true
	}
	if sh, ok := shellCommand(req); ok {
		if wordsMatch(r.Content, strings.Fields(sh)) {
			return true
		}
		for _, words := range parseShell(sh).cmds {
			if wordsMatch(r.Content, words) || wordsMatch(r.Content, stripKeywords(words)) {
				return true
			}
		}
		return false
	}
	if argv, ok := argvCommand(req); ok {
		return wordsMatch(r.Content, argv)
	}
	for _, p := range inputPaths(req) {
		if pathMatch(r.Content, p, req.Cwd) {
			return true
		}
	}
	if u, ok := req.Input["url"].(string); ok {
		return domainMatch(r.Content, u)
	}
	return false
}

// shellCommand is the input's command when it is a shell string (Bash).
func shellCommand(req RuleRequest) (string, bool) {
	s, ok := req.Input["command"].(string)
	return s, ok
}

// isShellKeyword reports the words that may lead a simple command without
// being its program ("then rm -rf x", "! rm x").
func isShellKeyword(w string) bool {
	switch w {
	case "if", "then", "else", "elif", "do", "while", "until", "!", "time":
		return true
	}
	return false
}

// stripKeywords drops the reserved words that lead a command, for deny
// rules: "if true; then rm -rf x; fi" holds the command "rm -rf x".
func stripKeywords(words []string) []string {
	for len(words) > 0 && isShellKeyword(words[0]) {
		words = words[1:]
	}
	return words
}

// argvCommand is the input's command when it is an argv (privileged
// commands): a list of strings.
func argvCommand(req RuleRequest) ([]string, bool) {
	switch v := req.Input["command"].(type) {
	case []string:
		return v, true
	case []any:
		out := make([]string, len(v))
		for i, x := range v {
			s, ok := x.(string)
			if !ok {
				return nil, false
			}
			out[i] = s
		}
		return out, true
	}
	return nil, false
}

// inputPaths are the input's file paths.
func inputPaths(req RuleRequest) []string {
	var out []string
	for _, k := range []string{"file_path", "path", "notebook_path"} {
		if s, ok := req.Input[k].(string); ok && s != "" {
			out = append(out, s)
		}
	}
	return out
}

// wordsMatch compares a command's words with a rule's content: "go test:*"
// is a prefix of whole words, anything else the exact command.
func wordsMatch(content string, words []string) bool {
	prefix, isPrefix := strings.CutSuffix(content, ":*")
	want := parseShell(prefix)
	if len(want.cmds) != 1 {
		// Content that is not one plain command ("a; b", "") never
		// matches: a rule is about one command.
		return isPrefix && strings.TrimSpace(prefix) == "" && len(words) > 0
	}
	rw := want.cmds[0]
	if len(words) < len(rw) || !isPrefix && len(words) != len(rw) {
		return false
	}
	for i := range rw {
		if words[i] != rw[i] {
			return false
		}
	}
	return true
}

// pathMatch matches a path against a glob after making both absolute (from
// cwd) and clean, so "/wt/../etc/passwd" is "/etc/passwd".
func pathMatch(pattern, p, cwd string) bool {
	if !path.IsAbs(p) {
		if cwd == "" || !path.IsAbs(cwd) {
			if path.IsAbs(pattern) {
				return false
			}
		} else {
			p = path.Join(cwd, p)
		}
	}
	if !path.IsAbs(pattern) && cwd != "" && path.IsAbs(cwd) {
		pattern = cwd + "/" + pattern
	}
	return globMatch(cleanPattern(pattern), path.Clean(p))
}

// cleanPattern cleans a glob like a path but keeps a trailing "/**".
func cleanPattern(p string) string {
	if strings.HasSuffix(p, "/**") {
		return strings.TrimSuffix(path.Clean(strings.TrimSuffix(p, "/**")), "/") + "/**"
	}
	return path.Clean(p)
}

// globMatch matches slash-separated segments: "**" is any number of
// segments (none included), other segments are path.Match patterns.
func globMatch(pattern, name string) bool {
	return segMatch(strings.Split(pattern, "/"), strings.Split(name, "/"))
}

func segMatch(pat, name []string) bool {
	for len(pat) > 0 {
		if pat[0] == "**" {
			rest := pat[1:]
			for len(rest) > 0 && rest[0] == "**" {
				rest = rest[1:]
			}
			if len(rest) == 0 {
				return true
			}
			for i := 0; i <= len(name); i++ {
				if segMatch(rest, name[i:]) {
					return true
				}
			}
			return false
		}
		if len(name) == 0 {
			return false
		}
		// "a**b" within one segment is "a*b".
		seg := strings.ReplaceAll(pat[0], "**", "*")
		if ok, err := path.Match(seg, name[0]); err != nil || !ok {
			return false
		}
		pat, name = pat[1:], name[1:]
	}
	return len(name) == 0
}

// domainMatch handles "domain:example.com" for url inputs.
func domainMatch(content, raw string) bool {
	d, ok := strings.CutPrefix(content, "domain:")
	if !ok || d == "" {
		return false
	}
	u, err := url.Parse(raw)
	if err != nil {
		return false
	}
	host := strings.ToLower(u.Hostname())
	d = strings.ToLower(d)
	return host == d || strings.HasSuffix(host, "."+d)
}

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
