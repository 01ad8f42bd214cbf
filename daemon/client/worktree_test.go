package client_test

import (
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"testing"
	"time"

	"github.com/seed5ad92d46/sous/daemon"
	"github.com/seed5ad92d46/sous/daemon/client"
	"github.com/seed5ad92d46/sous/daemon/wire"
)

// gitClients returns a client of a daemon with the git extensions
// (embedded) and one of a daemon that hides them, as one from before them.
func gitClients(t *testing.T) map[string]*client.Client {
	t.Helper()
	_, emb := embeddedDaemon(t)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	sock := startDaemon(t, daemon.Config{DisableFeatures: []string{wire.FeatureWorktreeRemoveStrict, wire.FeatureWorktreeCreateNewBranch}})
	old, err := client.DialUnix(ctx, sock, testToken, client.Options{ReconnectTimeout: -1})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { old.Close() })
	return map[string]*client.Client{"new": emb, "old": old}
}

// gitRepo makes a repository with one commit (a.txt) and a branch dev.
func gitRepo(t *testing.T) string {
	t.Helper()
	if _, err := exec.LookPath("git"); err != nil {
		t.Skip("git not found on PATH")
	}
	dir, err := filepath.EvalSymlinks(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	for _, args := range [][]string{
		{"init", "-q", "-b", "main"},
		{"-c", "user.name=t", "-c", "user.email=t@e", "commit", "-q", "--allow-empty", "-m", "first"},
		{"branch", "dev"},
	} {
		cmd := exec.Command("git", args...)
		cmd.Dir = dir
		cmd.Env = append(os.Environ(), "GIT_CONFIG_GLOBAL=/dev/null", "GIT_CONFIG_NOSYSTEM=1")
		if out, err := cmd.CombinedOutput(); err != nil {
			t.Fatalf("git %v: %v\n%s", args, err, out)
		}
	}
	return dir
}

// CreateWorktree says whether it made the branch and RemoveWorktree
// refuses, unless forced, what removing would lose: with the daemon's
// extensions, and with the client's fallbacks on a daemon without them.
func TestWorktreeCreateAndSafeRemove(t *testing.T) {
	t.Parallel()
	for name, c := range gitClients(t) {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			ctx := context.Background()
			repo := gitRepo(t)
			tmp := t.TempDir()
			for _, tc := range []struct {
				branch    string
				newBranch bool
			}{{"dev", false}, {"topic", true}} {
				wt := filepath.Join(tmp, tc.branch)
				res, err := c.CreateWorktree(ctx, wire.GitParams{BaseRepo: repo, BranchName: tc.branch, WorktreePath: wt, SourceBranch: "main"})
				if err != nil || !res.Success || res.NewBranch == nil || *res.NewBranch != tc.newBranch {
					t.Fatalf("CreateWorktree(%s) = %+v, %v; want newBranch %v", tc.branch, res, err, tc.newBranch)
				}
			}
			wt := filepath.Join(tmp, "topic")
			if err := os.WriteFile(filepath.Join(wt, "notes"), []byte("unsaved"), 0o644); err != nil {
				t.Fatal(err)
			}
			res, err := c.RemoveWorktree(ctx, wire.GitParams{BaseRepo: repo, WorktreePath: wt}, false)
			if err != nil || res.Success || res.ErrorCode != wire.ErrCodeWorktreeDirty || !slices.Equal(res.Changes, []string{"?? notes"}) {
				t.Errorf("RemoveWorktree(dirty) = %+v, %v; want worktree_dirty with [?? notes]", res, err)
			}
			if _, err := os.Stat(filepath.Join(wt, "notes")); err != nil {
				t.Fatalf("the refused removal lost the change: %v", err)
			}
			plain := t.TempDir()
			res, err = c.RemoveWorktree(ctx, wire.GitParams{BaseRepo: repo, WorktreePath: plain}, false)
			if err != nil || res.Success || res.ErrorCode != wire.ErrCodeNotAWorktree {
				t.Errorf("RemoveWorktree(a plain directory) = %+v, %v; want not_a_worktree", res, err)
			}
			res, err = c.RemoveWorktree(ctx, wire.GitParams{BaseRepo: repo, WorktreePath: wt}, true)
			if err != nil || !res.Success {
				t.Errorf("RemoveWorktree(force) = %+v, %v", res, err)
			}
			if _, err := os.Stat(wt); !os.IsNotExist(err) {
				t.Errorf("the forced removal left %s: %v", wt, err)
			}
			res, err = c.RemoveWorktree(ctx, wire.GitParams{BaseRepo: repo, WorktreePath: filepath.Join(tmp, "dev")}, false)
			if err != nil || !res.Success {
				t.Errorf("RemoveWorktree(clean) = %+v, %v", res, err)
			}
		})
	}
}
