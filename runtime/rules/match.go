package rules

import "strings"

// editTools are the tools an Edit rule applies to: as in Claude Code, Edit
// rules cover every built-in tool that edits files.
var editTools = map[string]bool{"Edit": true, "Write": true, "MultiEdit": true, "NotebookEdit": true}

// subject is a request read once for all the rules of a set.
type subject struct {
	req   Request
	shell *shellParse // Bash's command string, parsed
	argv  []string    // a privileged command
	isArg bool
	paths []pathForms
	url   string
	isURL bool
	// gitWrite: an edit tool writes inside .git or to a file named .git.
	gitWrite bool
}

func newSubject(req Request) *subject {
	s := &subject{req: req}
	if sh, ok := req.Input["command"].(string); ok {
		p := parseShell(sh)
		s.shell = &p
	} else if argv, ok := Argv(req.Input); ok {
		s.argv, s.isArg = argv, true
	}
	for _, p := range Paths(req.Input) {
		f := newPathForms(p, req.Cwd, req.Local)
		s.paths = append(s.paths, f)
		if editTools[req.Tool] && f.inGit() {
			s.gitWrite = true
		}
	}
	s.url, s.isURL = req.Input["url"].(string)
	return s
}

// toolMatches compares tool names: "Edit" covers every edit tool,
// "mcp__server" covers the server's tools.
func (r Rule) toolMatches(tool string) bool {
	if r.Tool == tool || r.Tool == "Edit" && editTools[tool] {
		return true
	}
	return !r.HasContent && strings.HasPrefix(r.Tool, "mcp__") && strings.Count(r.Tool, "__") == 1 &&
		strings.HasPrefix(tool, r.Tool+"__")
}

// namesGit reports a rule whose pattern names .git: only such a rule
// covers a write inside .git.
func (r Rule) namesGit() bool {
	if !r.HasContent {
		return false
	}
	for _, seg := range strings.Split(r.Content, "/") {
		if strings.EqualFold(seg, ".git") {
			return true
		}
	}
	return false
}

// Covers reports whether all of the request falls under the rule: what an
// allow rule needs.
func (r Rule) Covers(req Request) bool { return r.covers(newSubject(req)) }

func (r Rule) covers(s *subject) bool {
	if !r.toolMatches(s.req.Tool) || s.gitWrite && !r.namesGit() {
		return false
	}
	if !r.HasContent {
		return true
	}
	switch {
	case s.shell != nil:
		if !s.shell.safe() || len(s.shell.cmds) == 0 {
			return false
		}
		for _, c := range s.shell.cmds {
			if !coversCommand(r.Content, c, true) {
				return false
			}
		}
		return true
	case s.isArg:
		return coversCommand(r.Content, argvCommand(s.argv), false)
	case len(s.paths) > 0:
		for _, p := range s.paths {
			if !p.allowedBy(r.Content) {
				return false
			}
		}
		return true
	case s.isURL:
		return allowsURL(r.Content, s.url)
	}
	return false
}

// Touches reports whether any part of the request falls under the rule:
// what a deny or ask rule needs.
func (r Rule) Touches(req Request) bool { return r.touches(newSubject(req)) }

func (r Rule) touches(s *subject) bool {
	if !r.toolMatches(s.req.Tool) {
		return false
	}
	if !r.HasContent {
		return true
	}
	switch {
	case s.shell != nil:
		sh := s.req.Input["command"].(string)
		if touchesWords(r.Content, strings.Fields(sh), 0) {
			return true
		}
		for _, c := range s.shell.cmds {
			if touchesWords(r.Content, c.texts(), 0) {
				return true
			}
		}
		return false
	case s.isArg:
		return touchesWords(r.Content, s.argv, 0)
	}
	for _, p := range s.paths {
		if p.deniedBy(r.Content) {
			return true
		}
	}
	if s.isURL {
		return deniesURL(r.Content, s.url)
	}
	return false
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

// argvCommand is an argv as a command: no shell reads it, so each string
// is one word as it is.
func argvCommand(argv []string) command {
	c := make(command, len(argv))
	for i, a := range argv {
		c[i] = word{text: a, raw: a, literal: true}
	}
	return c
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

// ruleCommand reads a rule's content: "go test:*" is the prefix `go test`,
// anything else the exact command. ok is false for content that is not one
// plain command ("a; b", "echo $(id)"), which never matches, except the
// empty prefix ":*" (any command: words is empty, prefix true).
func ruleCommand(content string) (words command, prefix, ok bool) {
	rest, prefix := strings.CutSuffix(content, ":*")
	if prefix && strings.TrimSpace(rest) == "" {
		return nil, true, true
	}
	p := parseShell(rest)
	if !p.safe() || len(p.cmds) != 1 {
		return nil, false, false
	}
	return p.cmds[0], prefix, true
}

// coversCommand reports whether a rule's content allows a simple command:
// its words start with the rule's (prefix) or are the rule's (exact). In a
// shell command a word compares equal only when bash passes it as written
// (both literal with the same text), or when rule and command write the
// same expansion the same way ("ls $DIR" for "Bash(ls $DIR)"). An argv is
// compared string by string.
func coversCommand(content string, c command, shell bool) bool {
	rw, prefix, ok := ruleCommand(content)
	if !ok || len(c) == 0 || len(c) < len(rw) || !prefix && len(c) != len(rw) {
		return false
	}
	for i, w := range rw {
		same := w.text == c[i].text
		if shell {
			same = w.literal && c[i].literal && same || !w.literal && !c[i].literal && w.raw == c[i].raw
		}
		if !same {
			return false
		}
	}
	return true
}
