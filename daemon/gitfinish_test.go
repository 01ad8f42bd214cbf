package daemon

import (
	"os/exec"
	"strings"
	"testing"

	"github.com/seed5ad92d46/sous/daemon/wire"
)

// git.diff, git.commit, git.merge and git.push are methods and features; a
// daemon with them disabled neither lists nor knows them.
func TestGitFinishMethodsDisabled(t *testing.T) {
	t.Parallel()
	d := startDaemon(t, Config{DisableFeatures: wire.GitMethods})
	c := d.dial()
	caps := c.result("server.capabilities", "")
	for _, m := range wire.GitMethods {
		if strings.Contains(caps, `"`+m+`"`) {
			t.Errorf("capabilities list %s: %s", m, caps)
		}
		c.wantError(m, `{"path":"."}`, wire.CodeMethodNotFound, "Unknown method: "+m)
	}
}

func TestGitCommitOverSocket(t *testing.T) {
	t.Parallel()
	repo := t.TempDir()
	for _, args := range [][]string{{"init", "-q", "-b", "main"}, {"config", "user.name", "T"}, {"config", "user.email", "t@example.com"}} {
		if out, err := exec.Command("git", append([]string{"-C", repo}, args...)...).CombinedOutput(); err != nil {
			t.Fatalf("git %v: %v: %s", args, err, out)
		}
	}
	d := startDaemon(t, Config{})
	c := d.dial()
	c.wantError("git.commit", mustJSON(map[string]any{"path": repo, "message": "m", "all": true}), wire.CodeGitFailed,
		"git.commit: git commit: nothing to commit")
	c.wantError("git.merge", mustJSON(map[string]any{"repo": repo, "branch": "-x"}), wire.CodeInvalidParams,
		`git.merge: branch "-x" starts with '-': git would take it for an option`)
}
