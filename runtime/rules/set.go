package rules

// Request is what a rule is matched against.
type Request struct {
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

// Set is allow, deny and ask rules.
type Set struct {
	Allow, Deny, Ask []Rule
}

// Decide applies the set: a deny rule that touches the request wins, then
// an ask rule, then allow rules that cover all of it. The rule returned is
// the one that decided (for messages); it is zero for Allowed when several
// rules covered the parts of a compound command, and for NoMatch.
func (rs Set) Decide(req Request) (Verdict, Rule) {
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
