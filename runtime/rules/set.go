package rules

// Request is what a rule is matched against.
type Request struct {
	Tool  string
	Input map[string]any
	// Cwd resolves relative paths in inputs and patterns ("" when unknown:
	// relative paths then match relative patterns only, literally).
	Cwd string
	// Local says the files the request names are on this machine (the
	// session runs on the embedded daemon or a daemon behind a Unix
	// socket): paths are then resolved through symbolic links before they
	// are matched. For a remote host they cannot be, and path rules match
	// the path as written.
	Local bool
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

// GitDefault is the rule Decide reports when it denies a write inside a
// .git directory, or to a file named .git, by Set.DenyGitWrites.
var GitDefault = Rule{Tool: "Edit", Content: "**/.git/**", HasContent: true}

// Set is allow, deny and ask rules.
type Set struct {
	Allow, Deny, Ask []Rule
	// DenyGitWrites denies writes (Write, Edit, MultiEdit, NotebookEdit)
	// inside a .git directory or to a file named .git that no allow rule
	// naming .git covers: a git config with core.fsmonitor, a hook or a
	// .git file pointing elsewhere runs code at the next git command.
	// Without it such writes are only left unmatched (allow rules that do
	// not name .git never cover them), so the next approver decides.
	DenyGitWrites bool
}

// Decide applies the set: a deny rule that touches the request wins, then
// an ask rule, then the .git default (DenyGitWrites), then allow rules that
// cover all of it. The rule returned is the one that decided (for
// messages): GitDefault for the .git default; zero for Allowed when several
// rules covered the parts of a compound command, and for NoMatch.
func (rs Set) Decide(req Request) (Verdict, Rule) {
	s := newSubject(req)
	for _, r := range rs.Deny {
		if r.touches(s) {
			return Denied, r
		}
	}
	for _, r := range rs.Ask {
		if r.touches(s) {
			return Asked, r
		}
	}
	for _, r := range rs.Allow {
		if r.covers(s) {
			return Allowed, r
		}
	}
	if rs.DenyGitWrites && s.gitWrite {
		return Denied, GitDefault
	}
	// A compound command may have its parts allowed by different rules
	// ("go vet ./... && go test ./...").
	if s.shell != nil && s.shell.safe() && len(s.shell.cmds) > 1 && len(rs.Allow) > 0 {
		for _, c := range s.shell.cmds {
			covered := false
			for _, r := range rs.Allow {
				if r.toolMatches(req.Tool) && (!r.HasContent || coversCommand(r.Content, c, true)) {
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
	return NoMatch, Rule{}
}
