package gitops

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/seed5ad92d46/sous/daemon/wire"
)

// wantCode checks that err is a JSON-RPC error with code whose message
// contains want.
func wantCode(t *testing.T, err error, code int, want string) {
	t.Helper()
	var we *wire.Error
	if !errors.As(err, &we) || we.Code != code || !strings.Contains(we.Message, want) {
		t.Fatalf("error %v, want code %d containing %q", err, code, want)
	}
}

func TestDiffAgainstHeadAndBase(t *testing.T) {
	repo := newRepoWithCommit(t, "main")
	base := gitT(t, repo, "rev-parse", "HEAD")
	commitFile(t, repo, "b.txt", "b\n")
	writeFile(t, filepath.Join(repo, "a.txt"), "a2\n")
	g := &Git{Dir: repo}
	ctx := context.Background()

	res, err := g.Diff(ctx, wire.GitDiffParams{Path: repo})
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(res.Diff, "-a\n+a2\n") || strings.Contains(res.Diff, "b.txt") {
		t.Fatalf("diff against HEAD:\n%s", res.Diff)
	}
	res, err = g.Diff(ctx, wire.GitDiffParams{Path: repo, Base: base, Stat: true})
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(res.Diff, "a.txt | 2 +-") || !strings.Contains(res.Diff, "b.txt | 1 +") ||
		!strings.Contains(res.Diff, "2 files changed") {
		t.Fatalf("stat against base:\n%s", res.Diff)
	}
	_, err = g.Diff(ctx, wire.GitDiffParams{Path: repo, Base: "--output=/tmp/x"})
	wantCode(t, err, wire.CodeInvalidParams, `base "--output=/tmp/x" starts with '-'`)
	_, err = g.Diff(ctx, wire.GitDiffParams{Path: t.TempDir()})
	wantCode(t, err, wire.CodeGitFailed, "not a git repository")
}

func TestCommitAllAndNothingToCommit(t *testing.T) {
	repo := newRepoWithCommit(t, "main")
	g := &Git{Dir: repo}
	ctx := context.Background()
	writeFile(t, filepath.Join(repo, "new.txt"), "new\n")
	writeFile(t, filepath.Join(repo, "a.txt"), "changed\n")

	_, err := g.Commit(ctx, wire.GitCommitParams{Path: repo, Message: "staged only"})
	wantCode(t, err, wire.CodeGitFailed, "git.commit: git commit: nothing to commit (nothing is staged; all=True stages every change)")

	res, err := g.Commit(ctx, wire.GitCommitParams{Path: repo, Message: "the change", All: true})
	if err != nil {
		t.Fatal(err)
	}
	if head := gitT(t, repo, "rev-parse", "HEAD"); res.Commit != head {
		t.Fatalf("commit %q, HEAD %q", res.Commit, head)
	}
	if files := gitT(t, repo, "show", "--name-only", "--format=%s", "HEAD"); files != "the change\n\na.txt\nnew.txt" {
		t.Fatalf("commit holds %q", files)
	}
	_, err = g.Commit(ctx, wire.GitCommitParams{Path: repo, Message: "again", All: true})
	wantCode(t, err, wire.CodeGitFailed, "nothing to commit")
	_, err = g.Commit(ctx, wire.GitCommitParams{Path: repo, All: true})
	wantCode(t, err, wire.CodeInvalidParams, "message is required")
}

// conflictRepo has main and "other" changing a.txt differently, and a
// branch "clean" that adds c.txt.
func conflictRepo(t *testing.T) string {
	repo := newRepoWithCommit(t, "main")
	gitT(t, repo, "branch", "other")
	gitT(t, repo, "branch", "clean")
	commitFile(t, repo, "a.txt", "main's\n")
	gitT(t, repo, "checkout", "-q", "other")
	commitFile(t, repo, "a.txt", "other's\n")
	gitT(t, repo, "checkout", "-q", "clean")
	commitFile(t, repo, "c.txt", "c\n")
	gitT(t, repo, "checkout", "-q", "main")
	return repo
}

func TestMergeConflictAbortsAndReports(t *testing.T) {
	for _, squash := range []bool{false, true} {
		t.Run(map[bool]string{false: "merge", true: "squash"}[squash], func(t *testing.T) {
			repo := conflictRepo(t)
			g := &Git{Dir: repo}
			before := gitT(t, repo, "rev-parse", "HEAD")
			res, err := g.Merge(context.Background(), wire.GitMergeParams{Repo: repo, Branch: "other", Squash: squash})
			if err != nil {
				t.Fatal(err)
			}
			if res.OK || res.Commit != "" || !slices.Equal(res.Conflicts, []string{"a.txt"}) {
				t.Fatalf("result %+v", res)
			}
			if st := gitT(t, repo, "status", "--porcelain"); st != "" {
				t.Fatalf("repo not clean after the abort: %q", st)
			}
			if after := gitT(t, repo, "rev-parse", "HEAD"); after != before {
				t.Fatalf("HEAD moved: %s -> %s", before, after)
			}
			if _, err := os.Stat(filepath.Join(repo, ".git", "MERGE_HEAD")); err == nil {
				t.Fatal("MERGE_HEAD left behind")
			}
		})
	}
}

func TestMergeSquashCommitsOnce(t *testing.T) {
	repo := conflictRepo(t)
	g := &Git{Dir: repo}
	ctx := context.Background()
	res, err := g.Merge(ctx, wire.GitMergeParams{Repo: repo, Branch: "clean", Squash: true, Message: "squashed clean"})
	if err != nil {
		t.Fatal(err)
	}
	if !res.OK || res.Commit != gitT(t, repo, "rev-parse", "HEAD") || len(res.Conflicts) != 0 {
		t.Fatalf("result %+v", res)
	}
	if parents := gitT(t, repo, "log", "-1", "--format=%P %s"); strings.Count(parents, " ") != 2 || !strings.HasSuffix(parents, "squashed clean") {
		t.Fatalf("squash commit: %q (want one parent and the message)", parents)
	}
	// Merged already: no commit, HEAD answered.
	again, err := g.Merge(ctx, wire.GitMergeParams{Repo: repo, Branch: "clean", Squash: true})
	if err != nil || !again.OK || again.Commit != res.Commit {
		t.Fatalf("second squash: %+v, %v", again, err)
	}
	_, err = g.Merge(ctx, wire.GitMergeParams{Repo: repo, Branch: "-n"})
	wantCode(t, err, wire.CodeInvalidParams, `branch "-n" starts with '-'`)
	_, err = g.Merge(ctx, wire.GitMergeParams{Repo: repo, Branch: "nope"})
	wantCode(t, err, wire.CodeGitFailed, "git.merge: git merge:")
}

func TestPushToBareRemote(t *testing.T) {
	repo := newRepoWithCommit(t, "main")
	bare := realPath(t, t.TempDir())
	gitT(t, bare, "init", "-q", "--bare")
	gitT(t, repo, "remote", "add", "origin", bare)
	gitT(t, repo, "checkout", "-q", "-b", "feature")
	commitFile(t, repo, "f.txt", "f\n")
	g := &Git{Dir: repo}
	ctx := context.Background()

	res, err := g.Push(ctx, wire.GitPushParams{Path: repo})
	if err != nil {
		t.Fatal(err)
	}
	if res != (wire.GitPushResult{Success: true, Remote: "origin", Branch: "feature"}) {
		t.Fatalf("result %+v", res)
	}
	if got, want := gitT(t, bare, "rev-parse", "refs/heads/feature"), gitT(t, repo, "rev-parse", "HEAD"); got != want {
		t.Fatalf("remote has %s, want %s", got, want)
	}
	if _, err := g.Push(ctx, wire.GitPushParams{Path: repo, Branch: "main"}); err != nil {
		t.Fatal(err)
	}
	gitT(t, bare, "rev-parse", "refs/heads/main")

	_, err = g.Push(ctx, wire.GitPushParams{Path: repo, Remote: "--receive-pack=touch /tmp/x"})
	wantCode(t, err, wire.CodeInvalidParams, "starts with '-'")
	// The repository's config does not choose the program run for a path
	// remote, and ext:: (a command line as a URL) is no transport.
	marker := filepath.Join(t.TempDir(), "ran")
	gitT(t, repo, "config", "remote.origin.receivepack", "touch "+marker+"; git-receive-pack")
	if _, err := g.Push(ctx, wire.GitPushParams{Path: repo}); err != nil {
		t.Fatal(err)
	}
	gitT(t, repo, "remote", "add", "evil", "ext::sh -c touch% "+marker)
	_, err = g.Push(ctx, wire.GitPushParams{Path: repo, Remote: "evil"})
	wantCode(t, err, wire.CodeGitFailed, "transport 'ext' not allowed")
	if _, err := os.Stat(marker); err == nil {
		t.Fatal("a program the repository's config named ran")
	}
}
