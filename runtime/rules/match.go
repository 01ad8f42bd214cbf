package rules

import "strings"

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
func (r Rule) Covers(req Request) bool {
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
	if argv, ok := Argv(req.Input); ok {
		return wordsMatch(r.Content, argv)
	}
	if paths := Paths(req.Input); len(paths) > 0 {
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
func (r Rule) Touches(req Request) bool {
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
	if argv, ok := Argv(req.Input); ok {
		return wordsMatch(r.Content, argv)
	}
	for _, p := range Paths(req.Input) {
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
func shellCommand(req Request) (string, bool) {
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

// Argv is the input's command when it is an argv (privileged commands): a
// list of strings.
func Argv(input map[string]any) ([]string, bool) {
	switch v := input["command"].(type) {
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

// Paths are the input's file paths: file_path, path and notebook_path.
func Paths(input map[string]any) []string {
	var out []string
	for _, k := range []string{"file_path", "path", "notebook_path"} {
		if s, ok := input[k].(string); ok && s != "" {
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
