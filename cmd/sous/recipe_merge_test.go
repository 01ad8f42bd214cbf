package main

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// agent-merge.star against a real repository: of four changes, one merges,
// one fails its tests, one merges and the last conflicts with it; a change
// that fails and one that changes nothing are reported too. The merged
// work reaches a bare remote, and worktrees and branches are gone after.
func TestRecipeAgentMerge(t *testing.T) {
	t.Parallel()
	repo, bare := finishRepo(t)
	// .env is ignored, as a secret's file should be: commit(all=True)
	// would commit it otherwise.
	writeTreeAt(t, repo, map[string]string{".env": "SECRET=1\n", ".gitignore": ".env\n"})
	gitIn(t, repo, "add", ".gitignore")
	gitIn(t, repo, "commit", "-q", "-m", "ignore .env")
	changes := filepath.Join(t.TempDir(), "changes")
	if err := os.WriteFile(changes, []byte(strings.Join([]string{
		"# one per line",
		"echo one > one.txt",
		"echo broken > BROKEN",
		"echo a > README",
		"echo b > README",
		"exit 3",
		"true",
		"grep -q SECRET=1 .env && echo env > env.txt",
	}, "\n")), 0o644); err != nil {
		t.Fatal(err)
	}
	into := filepath.Join(t.TempDir(), "trees")
	o := sous(t, "run", recipe("agent-merge.star"), "-a", "repo="+repo, "-a", "changes="+changes,
		"-a", "test=test ! -e BROKEN", "-a", "include=.env", "-a", "push=origin", "-a", "into="+into)
	o.expect(t, 1,
		"1: merged as ",
		"(1 file changed, 1 insertion(+)): echo one > one.txt",
		"2: tests failed (exit code 1): echo broken > BROKEN",
		"3: merged as ",
		"4: conflicts in README, not merged: echo b > README",
		"5: the change failed (exit code 3): exit 3",
		"6: no change: true",
		"7: merged as ",
		"pushed main to origin",
		"fail: 3 of 7 changes merged")
	if got := gitIn(t, repo, "log", "--format=%s", "-3"); got != "agent-merge: grep -q SECRET=1 .env && echo env > env.txt\nagent-merge: echo a > README\nagent-merge: echo one > one.txt" {
		t.Errorf("main's log:\n%s", got)
	}
	if got, want := gitIn(t, bare, "rev-parse", "refs/heads/main"), gitIn(t, repo, "rev-parse", "main"); got != want {
		t.Errorf("the remote's main is %s, want %s", got, want)
	}
	if st := gitIn(t, repo, "status", "--porcelain"); st != "" {
		t.Errorf("the repository is left with %q", st)
	}
	if br := gitIn(t, repo, "branch", "--list", "agent-merge/*"); br != "" {
		t.Errorf("branches left: %s", br)
	}
	if _, err := os.Stat(into); !os.IsNotExist(err) {
		t.Errorf("%s is left: %v", into, err)
	}
}
