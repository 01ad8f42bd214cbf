package rules

import "testing"

// TestGitWritesNeedARuleThatNamesGit: with DenyGitWrites (permissions()),
// a write inside .git or to a file named .git is denied unless an allow
// rule that names .git covers it; without it (sous run --allow), allow
// rules that do not name .git just do not cover it.
func TestGitWritesNeedARuleThatNamesGit(t *testing.T) {
	t.Parallel()
	broad := mustRules(t, "allow", "Write(/wt/**)", "Edit", "MultiEdit(/wt/**)", "NotebookEdit(**)")
	explicit := mustRules(t, "allow", "Write(/wt/.git/hooks/**)", "Edit(**/.git)")
	req := func(tool, p string) Request {
		return Request{Tool: tool, Input: map[string]any{"file_path": p, "notebook_path": p}, Cwd: "/wt"}
	}
	gitWrites := []Request{
		req("Write", "/wt/.git/config"), req("Write", ".git/hooks/pre-commit"), req("Edit", "/wt/.git"),
		req("MultiEdit", "/wt/sub/.git/config"), req("NotebookEdit", "/wt/.GIT/x.ipynb"),
		req("Write", "/wt/src/../.git/config"), req("Edit", "/wt/vendor/mod/.git"),
	}
	for _, r := range gitWrites {
		if v, rule := (Set{Allow: broad, DenyGitWrites: true}).Decide(r); v != Denied || rule != GitDefault {
			t.Errorf("permissions(): %s %v: %s by %s, want denied by the .git default", r.Tool, r.Input["file_path"], v, rule)
		}
		if v, _ := (Set{Allow: broad}).Decide(r); v != NoMatch {
			t.Errorf("--allow: %s %v: %s, want no match (the prompt decides)", r.Tool, r.Input["file_path"], v)
		}
	}
	for _, r := range []Request{req("Write", "/wt/.git/hooks/pre-commit"), req("Edit", "/wt/sub/.git")} {
		if v, _ := (Set{Allow: explicit, DenyGitWrites: true}).Decide(r); v != Allowed {
			t.Errorf("%s %v: %s, want allowed by a rule that names .git", r.Tool, r.Input["file_path"], v)
		}
	}
	if v, _ := (Set{Allow: explicit, DenyGitWrites: true}).Decide(req("Write", "/wt/.git/config")); v != Denied {
		t.Errorf("Write(/wt/.git/hooks/**) let /wt/.git/config through: %s", v)
	}
	// Not writes into .git: reading it, and names that only look alike.
	for _, r := range []Request{
		{Tool: "Read", Input: map[string]any{"file_path": "/wt/.git/config"}},
		req("Write", "/wt/.gitignore"), req("Write", "/wt/.github/workflows/ci.yml"), req("Write", "/wt/x.git/y"),
	} {
		if v, _ := (Set{Allow: append(broad, mustRules(t, "allow", "Read")...), DenyGitWrites: true}).Decide(r); v != Allowed {
			t.Errorf("%s %v: %s, want allowed", r.Tool, r.Input["file_path"], v)
		}
	}
}
