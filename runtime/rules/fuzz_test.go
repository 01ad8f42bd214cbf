package rules

import (
	"path"
	"strings"
	"testing"
)

// FuzzRuleDecide checks the properties that make rules safe to rely on,
// for any command and any path:
//   - deny wins: a rule both allowed and denied never allows;
//   - a path glob never allows a path outside its tree, whatever the dots;
//   - an allowed prefix never lets a second command through a separator
//     unless the input hides it in quotes, escapes or a comment.
func FuzzRuleDecide(f *testing.F) {
	for _, s := range []string{"./...", "-run X", "'a b'", `"$(id)"`, "a#b", "\\", "x\ny", "../..", "a/**/b", "`id`", "2>&1", "&>", "{ x; }"} {
		f.Add(s, s)
	}
	both := Set{Allow: mustRules(f, "allow", "Bash(go test:*)", "Write(/wt/**)"), Deny: mustRules(f, "deny", "Bash(go test:*)", "Write(/wt/**)")}
	allow := Set{Allow: mustRules(f, "allow", "Bash(go test:*)", "Write(/wt/**)", "Read")}
	f.Fuzz(func(t *testing.T, cmd, p string) {
		for _, c := range []string{cmd, "go test " + cmd} {
			if v, _ := both.Decide(bash(c)); v == Allowed {
				t.Errorf("deny lost to allow for %q", c)
			}
		}
		if v, _ := both.Decide(file("Write", p)); v == Allowed {
			t.Errorf("deny lost to allow for path %q", p)
		}
		if v, _ := allow.Decide(Request{Tool: "Write", Input: map[string]any{"file_path": p}, Cwd: "/wt"}); v == Allowed {
			abs := p
			if !strings.HasPrefix(abs, "/") {
				abs = "/wt/" + abs
			}
			if c := path.Clean(abs); c != "/wt" && !strings.HasPrefix(c, "/wt/") {
				t.Errorf("Write(/wt/**) allowed %q (%s)", p, c)
			}
		}
		if !strings.ContainsAny(cmd, "'\"\\#`") {
			for _, sep := range []string{"; ", " && ", " || ", " | ", "\n", " & ", " |& "} {
				c := "go test " + cmd + sep + "rm -rf /"
				if v, _ := allow.Decide(bash(c)); v == Allowed {
					t.Errorf("Bash(go test:*) allowed %q", c)
				}
			}
		}
		if r, err := Parse(cmd); err == nil {
			if again, err := Parse(r.String()); err != nil || again != r {
				t.Errorf("Parse(%q) = %+v, but its String %q parses to %+v, %v", cmd, r, r.String(), again, err)
			}
		}
	})
}
