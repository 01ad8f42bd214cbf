package gitops

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/seed5ad92d46/sous/daemon/wire"
)

func TestWorktreeCreateIncludeCopiesUntracked(t *testing.T) {
	repo := newRepoWithCommit(t, "main")
	commitFile(t, repo, "config/app.local", "tracked\n") // tracked: the checkout's
	writeFile(t, filepath.Join(repo, ".env"), "TOKEN=x\n")
	if err := os.Chmod(filepath.Join(repo, ".env"), 0o600); err != nil {
		t.Fatal(err)
	}
	writeFile(t, filepath.Join(repo, "config/db.local"), "db\n")
	if err := os.Chmod(filepath.Join(repo, "config/db.local"), 0o751); err != nil {
		t.Fatal(err)
	}
	writeFile(t, filepath.Join(repo, "config/app.local"), "changed, untracked change\n")
	writeFile(t, filepath.Join(repo, "config/other.txt"), "not matched\n")
	if err := os.Symlink("db.local", filepath.Join(repo, "config/link.local")); err != nil {
		t.Fatal(err)
	}
	wt := filepath.Join(t.TempDir(), "wt")
	g := &Git{Dir: repo}
	res, err := g.WorktreeCreate(context.Background(), wire.GitParams{BranchName: "b", WorktreePath: wt,
		Include: []string{".env", "./config/*.local", "missing.*"}})
	if err != nil || !res.Success {
		t.Fatalf("create: %+v, %v", res, err)
	}
	for rel, want := range map[string]struct {
		content string
		mode    os.FileMode
	}{
		".env":             {"TOKEN=x\n", 0o600},
		"config/db.local":  {"db\n", 0o751},
		"config/app.local": {"tracked\n", 0o644},
	} {
		p := filepath.Join(wt, rel)
		b, err := os.ReadFile(p)
		fi, _ := os.Stat(p)
		if err != nil || string(b) != want.content || fi.Mode().Perm() != want.mode {
			t.Errorf("%s: %q %v, %v; want %q %v", rel, b, fi.Mode(), err, want.content, want.mode)
		}
	}
	if target, err := os.Readlink(filepath.Join(wt, "config/link.local")); err != nil || target != "db.local" {
		t.Errorf("link: %q, %v", target, err)
	}
	if _, err := os.Stat(filepath.Join(wt, "config/other.txt")); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("an unmatched file was copied: %v", err)
	}
}

func TestWorktreeCreateIncludeRefusesEscapes(t *testing.T) {
	repo := newRepoWithCommit(t, "main")
	g := &Git{Dir: repo}
	ctx := context.Background()
	for _, glob := range []string{"../x", "/etc/passwd", "config/../../x", ".git/config", "", "a//b", "[", "."} {
		wt := filepath.Join(t.TempDir(), "wt")
		_, err := g.WorktreeCreate(ctx, wire.GitParams{BranchName: "esc", WorktreePath: wt, Include: []string{glob}})
		var we *wire.Error
		if !errors.As(err, &we) || we.Code != wire.CodeInvalidParams || !strings.HasPrefix(we.Message, "include: ") {
			t.Errorf("include %q: %v, want -32602 include: ...", glob, err)
		}
		if _, err := os.Stat(wt); err == nil {
			t.Errorf("include %q: the worktree was made", glob)
		}
	}

	// Symlinks out of the repository are not followed: a directory link
	// matches nothing, a file link fails the create, which leaves nothing.
	outside := t.TempDir()
	writeFile(t, filepath.Join(outside, "secret.local"), "secret\n")
	if err := os.Symlink(outside, filepath.Join(repo, "out")); err != nil {
		t.Fatal(err)
	}
	wt := filepath.Join(t.TempDir(), "wt")
	res, err := g.WorktreeCreate(ctx, wire.GitParams{BranchName: "dirlink", WorktreePath: wt, Include: []string{"out/*.local"}})
	if err != nil || !res.Success {
		t.Fatalf("create: %+v, %v", res, err)
	}
	if _, err := os.Stat(filepath.Join(wt, "out")); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("the link's contents were copied: %v", err)
	}
	if err := os.Symlink(filepath.Join(outside, "secret.local"), filepath.Join(repo, "leak.local")); err != nil {
		t.Fatal(err)
	}
	wt2 := filepath.Join(t.TempDir(), "wt")
	res, err = g.WorktreeCreate(ctx, wire.GitParams{BranchName: "filelink", WorktreePath: wt2, Include: []string{"*.local"}})
	if err != nil || res.Success || res.ErrorCode != ErrCodeIncludeFailed || !strings.Contains(res.Error, "not inside the repository") {
		t.Fatalf("create: %+v, %v", res, err)
	}
	if _, err := os.Stat(wt2); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("the failed create left the worktree: %v", err)
	}
	if out, err := gitTry(repo, "rev-parse", "--verify", "-q", "refs/heads/filelink"); err == nil {
		t.Errorf("the failed create left its branch: %s", out)
	}
}
