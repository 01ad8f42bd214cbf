package rules

import (
	"path"
	"slices"
	"strings"
	"testing"
)

// FuzzRuleDecide checks the properties that make rules safe to rely on,
// for any command, path or url. It runs no shell (CI runs it 50,000
// times); TestShellModelMatchesBash and FuzzShellModelMatchesBash hold
// the model to real bash.
//   - deny wins: a rule both allowed and denied never allows;
//   - a path glob never allows a path outside its tree, whatever the dots;
//   - an allowed prefix never lets a second command through a separator
//     unless the input hides it in quotes, escapes or a comment;
//   - a deny rule that matches a command also matches it behind sudo, env
//     or an assignment;
//   - what the model calls one literal command, quoted again, reads back
//     as the same words (the "always" rules are written that way);
//   - a suggested rule allows its own request and nothing appended to it.
func FuzzRuleDecide(f *testing.F) {
	for _, s := range []string{"./...", "-run X", "'a b'", `"$(id)"`, "a#b", "\\", "x\ny", "../..", "a/**/b", "`id`", "2>&1", "&>", "{ x; }",
		`$'\' '; rm x #'`, "${_@P}", "$[_]", "${!x}", "${x:_:1}", "rm", "sudo rm x", "https://go.dev./x", "https://a@b/"} {
		f.Add(s, s)
	}
	both := Set{
		Allow: mustRules(f, "allow", "Bash(go test:*)", "Write(/wt/**)", "WebFetch(domain:go.dev)"),
		Deny:  mustRules(f, "deny", "Bash(go test:*)", "Write(/wt/**)", "WebFetch(domain:go.dev)"),
	}
	allow := Set{Allow: mustRules(f, "allow", "Bash(go test:*)", "Write(/wt/**)", "Read")}
	denyRm := Set{Deny: mustRules(f, "deny", "Bash(rm:*)")}
	f.Fuzz(func(t *testing.T, cmd, p string) {
		for _, c := range []string{cmd, "go test " + cmd} {
			if v, _ := both.Decide(bash(c)); v == Allowed {
				t.Errorf("deny lost to allow for %q", c)
			}
		}
		if v, _ := both.Decide(file("Write", p)); v == Allowed {
			t.Errorf("deny lost to allow for path %q", p)
		}
		if v, _ := both.Decide(Request{Tool: "WebFetch", Input: map[string]any{"url": p}}); v == Allowed {
			t.Errorf("deny lost to allow for url %q", p)
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
		if v, _ := denyRm.Decide(bash(cmd)); v == Denied {
			for _, c := range []string{"sudo " + cmd, "env -i " + cmd, "FOO=1 " + cmd, "nohup " + cmd} {
				if v, _ := denyRm.Decide(bash(c)); v != Denied {
					t.Errorf("Bash(rm:*) denies %q but not %q", cmd, c)
				}
			}
		}
		if parsed := parseShell(cmd); parsed.safe() && len(parsed.cmds) > 0 && !strings.ContainsRune(cmd, 0) {
			var lines []string
			for _, c := range parsed.cmds {
				if !slices.ContainsFunc(c, func(w word) bool { return !w.literal }) {
					lines = append(lines, quoteWords(c.texts()))
				}
			}
			again := parseShell(strings.Join(lines, "\n"))
			if !again.safe() || len(again.cmds) != len(lines) {
				t.Errorf("%q: its literal commands quoted again, %q, read back as %q (%s)", cmd, lines, again.texts(), again.unsafe)
			}
			for i := range min(len(lines), len(again.cmds)) {
				if q := parseShell(lines[i]); !slices.EqualFunc(q.texts(), again.texts()[i:i+1], slices.Equal[[]string]) {
					t.Errorf("%q: %q reads back as %q", cmd, lines[i], q.texts())
				}
			}
		}
		if r, ok := Suggest(bash(cmd)); ok {
			if v, _ := (Set{Allow: []Rule{r}}).Decide(bash(cmd)); v != Allowed {
				t.Errorf("Suggest(%q) = %s, which does not allow it", cmd, r)
			}
			for _, more := range []string{"; touch x", "\ntouch x", " && touch x", " | touch x", " $(touch x)", " > x"} {
				if v, _ := (Set{Allow: []Rule{r}}).Decide(bash(cmd + more)); v == Allowed && !strings.ContainsAny(cmd, "#'\"\\`") {
					t.Errorf("Suggest(%q) = %s, which also allows %q", cmd, r, cmd+more)
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
