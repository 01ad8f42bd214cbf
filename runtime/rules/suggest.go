package rules

import (
	"path"
	"regexp"
	"strings"
	"sync"
)

// Suggest is the narrowest useful rule that allows the request, for an
// "always allow" answer at a prompt, in the spirit of what Claude Code
// suggests:
//
//	Bash        the command's first word, and its second when that looks
//	            like a subcommand (not an option or a path): `go test ./...`
//	            gives Bash(go test:*). For a program that runs whatever its
//	            arguments say (sh, sudo, env, xargs, python, ...) the exact
//	            command. Nothing for a line that is not one simple command
//	            the rules can read (a pipeline, a substitution, a
//	            redirection to a file, an assignment, ...).
//	Sudo        the exact command.
//	file tools  the file's directory, Write(/wt/src/**) for /wt/src/a.go;
//	            the path itself when that directory is the root; the
//	            directory given, Grep(/wt/pkg/**), for a "path" input.
//	WebFetch    the url's host, WebFetch(domain:go.dev).
//	other tools the tool.
//
// ok is false when there is no such rule: the prompt then offers no
// "always". The rule always covers the request it came from.
func Suggest(req Request) (Rule, bool) {
	r, ok := suggest(req)
	if !ok {
		return Rule{}, false
	}
	// What the rule says is what it matches: a rule that would not cover
	// its own request is never offered.
	if parsed, err := Parse(r.String()); err != nil || parsed != r || !r.Covers(req) {
		return Rule{}, false
	}
	return r, true
}

// fileTools take a path: their rules are globs.
var fileTools = map[string]bool{
	"Edit": true, "Write": true, "MultiEdit": true, "NotebookEdit": true, "Read": true, "NotebookRead": true,
	"Glob": true, "Grep": true, "LS": true,
}

func suggest(req Request) (Rule, bool) {
	rule := func(content string) (Rule, bool) {
		return Rule{Tool: req.Tool, Content: content, HasContent: true}, true
	}
	switch cmd := req.Input["command"].(type) {
	case string:
		p := parseShell(cmd)
		if !p.safe() || len(p.cmds) != 1 {
			return Rule{}, false
		}
		content, ok := commandRule(p.cmds[0])
		if !ok {
			return Rule{}, false
		}
		return rule(content)
	case nil:
	default:
		argv, ok := Argv(req.Input)
		if !ok || len(argv) == 0 {
			return Rule{}, false
		}
		return rule(quoteWords(argv))
	}
	if req.Tool == "Bash" {
		return Rule{}, false // a Bash request with no command string
	}
	if u, ok := req.Input["url"].(string); ok || req.Tool == "WebFetch" {
		host, ok := urlHost(u)
		if !ok {
			return Rule{}, false
		}
		return rule("domain:" + host)
	}
	if fileTools[req.Tool] || len(Paths(req.Input)) > 0 {
		glob, ok := pathRule(req)
		if !ok {
			return Rule{}, false
		}
		return rule(glob)
	}
	return Rule{Tool: req.Tool}, true
}

// subcommand is a second word worth keeping in a prefix: `test` in
// `go test`, `commit` in `git commit`; not an option, a path or a value.
// Compiled on first use, not at init: every start of sous paid for it
// (docs/PERFORMANCE.md, the start row).
var subcommand = sync.OnceValue(func() *regexp.Regexp { return regexp.MustCompile(`^[A-Za-z][A-Za-z0-9_-]*$`) })

// runsAnything are programs whose arguments can run any command or code:
// a prefix rule on them would allow everything, so they get exact rules.
var runsAnything = map[string]bool{
	"eval": true, "source": true, ".": true, "find": true, "awk": true, "gawk": true, "mawk": true,
	"nawk": true, "sed": true, "perl": true, "python": true, "python2": true, "python3": true,
	"node": true, "nodejs": true, "deno": true, "bun": true, "ruby": true, "php": true, "lua": true,
	"Rscript": true, "osascript": true, "tclsh": true, "expect": true, "ssh": true,
}

// commandRule is the rule content for one simple command.
func commandRule(c command) (string, bool) {
	if len(c) == 0 || !c[0].literal {
		return "", false
	}
	name := path.Base(c[0].text)
	if runsAnything[name] || wrappers[name] || shells[name] {
		for _, w := range c {
			if !w.literal {
				return "", false
			}
		}
		return quoteWords(c.texts()), true
	}
	words := []string{c[0].text}
	if len(c) > 1 && c[1].literal && subcommand().MatchString(c[1].text) {
		words = append(words, c[1].text)
	}
	return quoteWords(words) + ":*", true
}

// pathRule is the glob for a file tool's path.
func pathRule(req Request) (string, bool) {
	var key, p string
	for _, k := range []string{"file_path", "notebook_path", "path"} {
		if s, ok := req.Input[k].(string); ok && s != "" {
			if p != "" && s != p {
				return "", false // two different paths: no one rule
			}
			key, p = k, s
		}
	}
	if p == "" {
		return "", false
	}
	if !path.IsAbs(p) {
		if !path.IsAbs(req.Cwd) {
			return "", false
		}
		p = req.Cwd + "/" + p
	}
	p = path.Clean(p)
	if strings.ContainsAny(p, "*?[\\") {
		return "", false // a pattern character would match more than this path
	}
	dir := path.Dir(p)
	if key == "path" {
		dir = p // a directory to search, list or glob in
	}
	if dir == "/" {
		return p, true
	}
	return dir + "/**", true
}

// plainWord is a word the shell reads as itself, unquoted; compiled on
// first use, as subcommand.
var plainWord = sync.OnceValue(func() *regexp.Regexp { return regexp.MustCompile(`^[A-Za-z0-9_@%+=:,./-]+$`) })

// quoteWords writes words so that the rule's shell parse gives them back.
func quoteWords(words []string) string {
	q := make([]string, len(words))
	for i, w := range words {
		// First, a bare NAME=value is an assignment and a bare "if" or
		// "time" a keyword: quoted, the rule reads back as the same words.
		if plainWord().MatchString(w) && (i > 0 || !isAssignment(w) && !reserved[w]) {
			q[i] = w
		} else {
			q[i] = "'" + strings.ReplaceAll(w, "'", `'\''`) + "'"
		}
	}
	return strings.Join(q, " ")
}
