package gitops

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/seed5ad92d46/sous/daemon/wire"
)

// markers is a directory the hostile programs of a test leave files in:
// any file there means git ran a program the repository named.
type markers string

func newMarkers(t *testing.T) markers { return markers(t.TempDir()) }

// cmd is a shell command that leaves the marker name.
func (m markers) cmd(name string) string {
	return "touch '" + filepath.Join(string(m), name) + "'"
}

// none fails t, after what, if any marker exists.
func (m markers) none(t *testing.T, what string) {
	t.Helper()
	ents, err := os.ReadDir(string(m))
	if err != nil {
		t.Fatal(err)
	}
	for _, e := range ents {
		t.Errorf("after %s: git ran the repository's program %q", what, e.Name())
		os.Remove(filepath.Join(string(m), e.Name()))
	}
}

// linkedWorktree makes a repository with a commit and a linked worktree of
// it on branch feat, as the daemon does, and returns both.
func linkedWorktree(t *testing.T) (repo, wt string) {
	t.Helper()
	repo = newRepoWithCommit(t, "main")
	wt = filepath.Join(realPath(t, t.TempDir()), "wt")
	if res := create(t, &Git{}, wire.GitParams{BaseRepo: repo, BranchName: "feat", WorktreePath: wt}); !res.Success {
		t.Fatalf("WorktreeCreate = %+v", res)
	}
	return repo, wt
}

// plantGitDir makes dir a git dir whose config runs the marker "fsmonitor"
// on every index refresh, as an agent that may write files could.
func plantGitDir(t *testing.T, dir string, m markers) {
	t.Helper()
	gitT(t, filepath.Dir(dir), "init", "-q", "--bare", dir)
	gitT(t, dir, "config", "core.bare", "false")
	gitT(t, dir, "config", "core.fsmonitor", m.cmd("fsmonitor")+"; echo")
}

// queryAll runs the path queries on path and returns their errors.
func queryAll(g *Git, path string) map[string]error {
	ctx := context.Background()
	errs := map[string]error{}
	_, errs["Info"] = g.Info(ctx, path)
	_, errs["Status"] = g.Status(ctx, path)
	_, errs["Branches"] = g.Branches(ctx, path)
	return errs
}

// The attack of an agent that may write in its worktree and nothing else: a
// git dir of its own inside the worktree, with a config that names a
// program, and the worktree's .git pointed at it. No git the daemon runs
// for the worktree may run the program; the queries refuse the worktree.
func TestPlantedGitDirInWorktreeIsRefused(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name  string
		plant func(t *testing.T, wt string, m markers)
		want  string
	}{
		{"gitdir inside the worktree", func(t *testing.T, wt string, m markers) {
			plantGitDir(t, filepath.Join(wt, "evil"), m)
			writeFile(t, filepath.Join(wt, ".git"), "gitdir: evil\n")
		}, "inside the worktree itself"},
		{"linked-worktree shape inside the worktree", func(t *testing.T, wt string, m markers) {
			plantGitDir(t, filepath.Join(wt, "evil"), m)
			gd := filepath.Join(wt, "evil", "worktrees", "x")
			writeFile(t, filepath.Join(gd, "commondir"), "../..\n")
			writeFile(t, filepath.Join(gd, "HEAD"), "ref: refs/heads/main\n")
			writeFile(t, filepath.Join(gd, "gitdir"), filepath.Join(wt, ".git")+"\n")
			writeFile(t, filepath.Join(wt, ".git"), "gitdir: "+gd+"\n")
		}, "inside the worktree itself"},
		{"commondir pointing elsewhere", func(t *testing.T, wt string, m markers) {
			outside := realPath(t, t.TempDir())
			plantGitDir(t, filepath.Join(outside, "common"), m)
			gd := filepath.Join(outside, "elsewhere", "x")
			writeFile(t, filepath.Join(gd, "commondir"), filepath.Join(outside, "common")+"\n")
			writeFile(t, filepath.Join(gd, "HEAD"), "ref: refs/heads/main\n")
			writeFile(t, filepath.Join(wt, ".git"), "gitdir: "+gd+"\n")
		}, "not in the worktrees directory"},
		{"symlinked .git into the worktree", func(t *testing.T, wt string, m markers) {
			plantGitDir(t, filepath.Join(wt, "evil"), m)
			if err := os.Remove(filepath.Join(wt, ".git")); err != nil {
				t.Fatal(err)
			}
			if err := os.Symlink("evil", filepath.Join(wt, ".git")); err != nil {
				t.Fatal(err)
			}
		}, "inside the worktree itself"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			repo, wt := linkedWorktree(t)
			m := newMarkers(t)
			tc.plant(t, wt, m)
			writeFile(t, filepath.Join(wt, "a.txt"), "changed\n")
			g := &Git{}
			for method, err := range queryAll(g, wt) {
				if err == nil || !strings.Contains(err.Error(), tc.want) {
					t.Errorf("%s(worktree) = %v, want a refusal saying %q", method, err, tc.want)
				}
			}
			m.none(t, "the queries")
			// The planted git dir itself is a repository like any other
			// (git finds it as a bare one): it may be queried, and runs
			// nothing either.
			queryAll(g, filepath.Join(wt, "evil"))
			m.none(t, "the queries of the planted git dir")
			res := remove(t, g, wire.GitParams{BaseRepo: repo, WorktreePath: wt, Strict: true})
			if res.Success || res.ErrorCode != wire.ErrCodeNotAWorktree {
				t.Errorf("strict WorktreeRemove = %+v, want %s", res, wire.ErrCodeNotAWorktree)
			}
			if !exists(filepath.Join(wt, "a.txt")) {
				t.Error("the refused strict removal deleted the worktree")
			}
			m.none(t, "strict WorktreeRemove")
			if res := remove(t, g, wire.GitParams{BaseRepo: repo, WorktreePath: wt}); !res.Success {
				t.Errorf("lenient WorktreeRemove = %+v, want success (it runs git in the repository)", res)
			}
			m.none(t, "lenient WorktreeRemove")
		})
	}
}

// A repository whose own config names programs (an agent that could write
// its .git, or a .git directory planted in place of a worktree's .git file,
// which nothing can tell from a real one): no git the daemon runs starts
// them, whatever the call.
func TestRepositoryConfigRunsNoPrograms(t *testing.T) {
	t.Parallel()
	repo := newRepoWithCommit(t, "main")
	m := newMarkers(t)
	writeFile(t, filepath.Join(repo, ".gitattributes"), "*.txt filter=evil\n")
	gitT(t, repo, "add", ".gitattributes")
	gitT(t, repo, "commit", "-q", "-m", "attributes")
	for key, value := range map[string]string{
		"core.fsmonitor":            m.cmd("fsmonitor") + "; echo",
		"filter.evil.clean":         m.cmd("clean") + "; cat",
		"filter.evil.smudge":        m.cmd("smudge") + "; cat",
		"filter.Evil.Cased.clean":   m.cmd("cased") + "; cat",
		"core.sshCommand":           m.cmd("ssh"),
		"core.pager":                m.cmd("pager"),
		"credential.helper":         "!" + m.cmd("credential"),
		"core.alternateRefsCommand": m.cmd("alternates"),
		"include.path":              filepath.Join(repo, "included.cfg"),
		"gpg.program":               m.cmd("gpg"),
		"diff.external":             m.cmd("diff"),
		"remote.origin.uploadpack":  m.cmd("uploadpack"),
		"remote.origin.url":         repo,
	} {
		gitT(t, repo, "config", key, value)
	}
	// A driver defined in a file the repository's config includes.
	writeFile(t, filepath.Join(repo, "included.cfg"), "[filter \"evil\"]\n\tprocess = "+m.cmd("process")+"\n")
	for _, hook := range []string{"post-checkout", "reference-transaction", "post-index-change"} {
		p := filepath.Join(repo, ".git", "hooks", hook)
		writeFile(t, p, "#!/bin/sh\n"+m.cmd(hook)+"\n")
		if err := os.Chmod(p, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	// A changed stat makes status hash the file again: through the clean
	// filter.
	old := time.Now().Add(-time.Hour)
	if err := os.Chtimes(filepath.Join(repo, "a.txt"), old, old); err != nil {
		t.Fatal(err)
	}
	g := &Git{}
	for method, err := range queryAll(g, repo) {
		if err != nil {
			t.Errorf("%s: %v", method, err)
		}
	}
	m.none(t, "the queries")

	wt := filepath.Join(realPath(t, t.TempDir()), "wt")
	if res := create(t, g, wire.GitParams{BaseRepo: repo, BranchName: "feat", WorktreePath: wt}); !res.Success {
		t.Fatalf("WorktreeCreate = %+v", res)
	}
	m.none(t, "WorktreeCreate")
	writeFile(t, filepath.Join(wt, "a.txt"), "changed\n")
	for method, err := range queryAll(g, wt) {
		if err != nil {
			t.Errorf("%s(worktree): %v", method, err)
		}
	}
	m.none(t, "the queries of the worktree")
	if res := remove(t, g, wire.GitParams{BaseRepo: repo, WorktreePath: wt, Strict: true}); res.Success || res.ErrorCode != wire.ErrCodeWorktreeDirty {
		t.Errorf("strict WorktreeRemove of a dirty worktree = %+v", res)
	}
	m.none(t, "strict WorktreeRemove")
	writeFile(t, filepath.Join(wt, "a.txt"), "a\n") // as committed, with a new stat: status hashes it again
	if res := remove(t, g, wire.GitParams{BaseRepo: repo, WorktreePath: wt, Strict: true}); !res.Success {
		t.Errorf("strict WorktreeRemove of a clean worktree = %+v", res)
	}
	m.none(t, "strict WorktreeRemove")
	if res := create(t, g, wire.GitParams{BaseRepo: repo, BranchName: "feat2", WorktreePath: wt}); !res.Success {
		t.Fatalf("WorktreeCreate = %+v", res)
	}
	if res := remove(t, g, wire.GitParams{BaseRepo: repo, WorktreePath: wt}); !res.Success {
		t.Errorf("WorktreeRemove = %+v", res)
	}
	m.none(t, "WorktreeRemove")

	// The worktree's .git file replaced by a .git directory of the same
	// repository's making: nothing tells it from a main worktree, so the
	// call goes ahead, and still runs nothing.
	wt2 := filepath.Join(realPath(t, t.TempDir()), "wt2")
	if err := os.MkdirAll(wt2, 0o755); err != nil {
		t.Fatal(err)
	}
	gitT(t, wt2, "init", "-q")
	gitT(t, wt2, "config", "core.fsmonitor", m.cmd("planted-fsmonitor")+"; echo")
	writeFile(t, filepath.Join(wt2, "x"), "x")
	for method, err := range queryAll(g, wt2) {
		if err != nil {
			t.Errorf("%s(planted .git directory): %v", method, err)
		}
	}
	m.none(t, "the queries of a planted .git directory")
}
