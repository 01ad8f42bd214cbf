package rules

import (
	"os"
	"path/filepath"
	"testing"
)

// TestPathRulesFollowSymlinks: a symlink committed in the tree (docs ->
// an outside directory) does not let an allowed Write(wt/**) land outside
// the tree when the files are local; a deny rule on the outside directory
// sees the write through the link. For a remote host the path is matched
// as written.
func TestPathRulesFollowSymlinks(t *testing.T) {
	t.Parallel()
	root := t.TempDir()
	wt, outside := filepath.Join(root, "wt"), filepath.Join(root, "outside")
	for _, d := range []string{filepath.Join(wt, "src"), outside, filepath.Join(wt, ".git")} {
		if err := os.MkdirAll(d, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	links := map[string]string{
		"docs":    outside,                 // absolute, to a directory outside
		"rel":     "../outside",            // relative
		"dangle":  outside + "/new.txt",    // to a file that does not exist yet
		"chain":   "docs",                  // to another link
		"loop":    "loop",                  // to itself
		"inside":  "src",                   // stays inside
		"gitdir":  ".git",                  // into .git
		"up/back": "../../outside/x",       // under a directory that is created below
		"src/esc": "../../outside/deep/er", // relative, from a subdirectory
	}
	if err := os.MkdirAll(filepath.Join(wt, "up"), 0o755); err != nil {
		t.Fatal(err)
	}
	for name, target := range links {
		if err := os.Symlink(target, filepath.Join(wt, name)); err != nil {
			t.Fatal(err)
		}
	}
	set := Set{
		Allow:         mustRules(t, "allow", "Write("+wt+"/**)"),
		Deny:          mustRules(t, "deny", "Write("+outside+"/secret*)"),
		DenyGitWrites: true,
	}
	write := func(p string, local bool) Request {
		return Request{Tool: "Write", Input: map[string]any{"file_path": p}, Cwd: wt, Local: local}
	}
	tests := []struct {
		path          string
		local, remote Verdict
	}{
		{"src/a.go", Allowed, Allowed},
		{"inside/a.go", Allowed, Allowed},
		{"docs/x.md", NoMatch, Allowed},
		{"rel/x.md", NoMatch, Allowed},
		{"dangle", NoMatch, Allowed},
		{"chain/x.md", NoMatch, Allowed},
		{"loop/x", Denied, Allowed}, // cannot be resolved: every deny rule on paths matches
		{"up/back", NoMatch, Allowed},
		{"src/esc", NoMatch, Allowed},
		{"docs/secret.txt", Denied, Allowed},
		{"chain/secret", Denied, Allowed},
		// The tools clean a path first (wt/src/a.go); the kernel walks docs/..
		// to outside's parent. Two different files: no allow rule covers both.
		{"docs/../src/a.go", NoMatch, Allowed},
		{"gitdir/config", Denied, Allowed}, // lands in .git: the .git default
		{wt + "/new/dir/file", Allowed, Allowed},
	}
	for _, tt := range tests {
		if got, _ := set.Decide(write(tt.path, true)); got != tt.local {
			t.Errorf("local %s: %s, want %s", tt.path, got, tt.local)
		}
		if got, _ := set.Decide(write(tt.path, false)); got != tt.remote {
			t.Errorf("remote %s: %s, want %s", tt.path, got, tt.remote)
		}
	}
	// A rule written through a link matches where the link leads.
	viaLink := Set{Allow: mustRules(t, "allow", "Write("+wt+"/docs/**)")}
	if got, _ := viaLink.Decide(write("docs/x.md", true)); got != Allowed {
		t.Errorf("Write(wt/docs/**) on docs/x.md: %s, want allowed", got)
	}
	if got, _ := viaLink.Decide(write(outside+"/x.md", true)); got != Allowed {
		t.Errorf("Write(wt/docs/**) on outside/x.md (where docs leads): %s, want allowed", got)
	}
	if got, _ := viaLink.Decide(write("src/a.go", true)); got != NoMatch {
		t.Errorf("Write(wt/docs/**) on src/a.go: %s, want no match", got)
	}
}
