package gitops

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/seed5ad92d46/sous/daemon/wire"
	"github.com/seed5ad92d46/sous/internal/testutil"
)

func create(t *testing.T, g *Git, p wire.GitParams) wire.WorktreeResult {
	t.Helper()
	res, err := g.WorktreeCreate(context.Background(), p)
	if err != nil {
		t.Fatalf("WorktreeCreate(%+v): %v", p, err)
	}
	return res
}

func remove(t *testing.T, g *Git, p wire.GitParams) wire.WorktreeResult {
	t.Helper()
	res, err := g.WorktreeRemove(context.Background(), p)
	if err != nil {
		t.Fatalf("WorktreeRemove(%+v): %v", p, err)
	}
	return res
}

// headOf is the branch checked out in dir.
func headOf(t *testing.T, dir string) string {
	t.Helper()
	return gitT(t, dir, "symbolic-ref", "--short", "HEAD")
}

// registered reports whether git lists path as a worktree of repo.
func registered(t *testing.T, repo, path string) bool {
	t.Helper()
	for _, line := range strings.Split(gitT(t, repo, "worktree", "list", "--porcelain"), "\n") {
		if line == "worktree "+path {
			return true
		}
	}
	return false
}

func TestWorktreeCreateDefaultSource(t *testing.T) {
	t.Parallel()
	repo := newRepoWithCommit(t, "trunk")
	wt := filepath.Join(realPath(t, t.TempDir()), "wt")
	res := create(t, &Git{}, wire.GitParams{BaseRepo: repo, BranchName: "feat", WorktreePath: wt})
	want := `{"success":true,"path":` + jstr(wt) + `,"sourceBranch":"trunk"}`
	if got := jsonOf(t, res); got != want {
		t.Fatalf("WorktreeCreate = %s, want %s", got, want)
	}
	if got := headOf(t, wt); got != "feat" {
		t.Errorf("worktree HEAD = %q, want feat", got)
	}
	if !exists(filepath.Join(wt, "a.txt")) {
		t.Error("worktree was not checked out")
	}
	if gitT(t, repo, "rev-parse", "feat") != gitT(t, repo, "rev-parse", "trunk") {
		t.Error("feat does not start at trunk")
	}
}

func TestWorktreeCreateDaemonDirAndRelativePath(t *testing.T) {
	t.Parallel()
	repo := newRepoWithCommit(t, "main")
	g := &Git{Dir: repo} // no baseRepo: the daemon's directory is the repo
	res := create(t, g, wire.GitParams{BranchName: "feat", WorktreePath: "../rel-wt"})
	if !res.Success || res.Path != "../rel-wt" || res.SourceBranch != "main" {
		t.Fatalf("WorktreeCreate = %+v, want success, path as given, source main", res)
	}
	wt := filepath.Join(filepath.Dir(repo), "rel-wt")
	t.Cleanup(func() { os.RemoveAll(wt) })
	if got := headOf(t, wt); got != "feat" {
		t.Errorf("worktree HEAD = %q, want feat", got)
	}
	if r := remove(t, g, wire.GitParams{WorktreePath: "../rel-wt"}); !r.Success || exists(wt) {
		t.Errorf("WorktreeRemove(relative) = %+v, exists afterwards: %v", r, exists(wt))
	}
}

func TestWorktreeCreateExplicitSource(t *testing.T) {
	t.Parallel()
	repo := newRepoWithCommit(t, "main")
	gitT(t, repo, "checkout", "-q", "-b", "dev")
	commitFile(t, repo, "dev.txt", "d\n")
	gitT(t, repo, "checkout", "-q", "main")
	wt := filepath.Join(t.TempDir(), "wt")
	res := create(t, &Git{}, wire.GitParams{BaseRepo: repo, BranchName: "feat", WorktreePath: wt, SourceBranch: "dev"})
	if !res.Success || res.SourceBranch != "dev" {
		t.Fatalf("WorktreeCreate = %+v, want success from dev", res)
	}
	if !exists(filepath.Join(wt, "dev.txt")) {
		t.Error("worktree is not based on dev")
	}
}

func TestWorktreeCreateDetachedSource(t *testing.T) {
	t.Parallel()
	repo := newRepoWithCommit(t, "main")
	commitFile(t, repo, "b.txt", "b\n")
	gitT(t, repo, "checkout", "-q", "--detach", "HEAD~1")
	sha := gitT(t, repo, "rev-parse", "HEAD")
	wt := filepath.Join(t.TempDir(), "wt")
	res := create(t, &Git{}, wire.GitParams{BaseRepo: repo, BranchName: "feat", WorktreePath: wt})
	if !res.Success || res.SourceBranch != sha {
		t.Fatalf("WorktreeCreate = %+v, want success with sourceBranch %s", res, sha)
	}
	if got := gitT(t, wt, "rev-parse", "HEAD"); got != sha {
		t.Errorf("worktree at %s, want %s", got, sha)
	}
}

func TestWorktreeCreateExistingBranch(t *testing.T) {
	t.Parallel()
	repo := newRepoWithCommit(t, "main")
	gitT(t, repo, "branch", "old")
	oldSHA := gitT(t, repo, "rev-parse", "old")
	commitFile(t, repo, "b.txt", "b\n") // main moves on; old must not follow
	wt := filepath.Join(t.TempDir(), "wt")
	res := create(t, &Git{}, wire.GitParams{BaseRepo: repo, BranchName: "old", WorktreePath: wt})
	if !res.Success || res.SourceBranch != "main" {
		t.Fatalf("WorktreeCreate(existing branch) = %+v, want success", res)
	}
	if got := headOf(t, wt); got != "old" {
		t.Errorf("worktree HEAD = %q, want old", got)
	}
	if got := gitT(t, repo, "rev-parse", "old"); got != oldSHA {
		t.Errorf("existing branch moved from %s to %s", oldSHA, got)
	}

	// The recipe cycle: remove the worktree, create it again for the same branch.
	if r := remove(t, &Git{}, wire.GitParams{BaseRepo: repo, WorktreePath: wt}); !r.Success {
		t.Fatalf("WorktreeRemove = %+v", r)
	}
	if res := create(t, &Git{}, wire.GitParams{BaseRepo: repo, BranchName: "old", WorktreePath: wt}); !res.Success {
		t.Fatalf("re-create = %+v", res)
	}
}

func TestWorktreeCreateBranchCheckedOutElsewhere(t *testing.T) {
	t.Parallel()
	repo := newRepoWithCommit(t, "main")
	wt := filepath.Join(t.TempDir(), "wt")
	res := create(t, &Git{}, wire.GitParams{BaseRepo: repo, BranchName: "main", WorktreePath: wt})
	if res.Success || res.ErrorCode != wire.ErrCodeWorktreeAddFailed ||
		!strings.HasPrefix(res.Error, "git worktree add failed: ") || !strings.Contains(res.Error, "already checked out") {
		t.Errorf("WorktreeCreate(branch of the main worktree) = %+v, want worktree_add_failed", res)
	}
}

func TestWorktreeCreateRequiredParams(t *testing.T) {
	t.Parallel()
	g := &Git{Dir: t.TempDir()}
	for _, c := range []struct {
		p    wire.GitParams
		want string
	}{
		{wire.GitParams{}, "branchName is required"},
		{wire.GitParams{WorktreePath: "wt"}, "branchName is required"},
		{wire.GitParams{BranchName: "b"}, "worktreePath is required"},
	} {
		_, err := g.WorktreeCreate(context.Background(), c.p)
		var we *wire.Error
		if !errors.As(err, &we) || we.Code != wire.CodeInvalidParams || we.Message != c.want {
			t.Errorf("WorktreeCreate(%+v) err = %v, want -32602 %q", c.p, err, c.want)
		}
	}
}

func TestWorktreeCreateNotARepo(t *testing.T) {
	t.Parallel()
	needGit(t)
	dir := t.TempDir()
	const want = `{"success":false,"error":"not a git repository","errorCode":"not_a_repo"}`
	for _, g := range []*Git{{Dir: dir}, {Dir: filepath.Join(dir, "missing")}} {
		wt := filepath.Join(dir, "wt")
		res := create(t, g, wire.GitParams{BranchName: "b", WorktreePath: wt})
		if got := jsonOf(t, res); got != want {
			t.Errorf("WorktreeCreate in %s = %s, want %s", g.Dir, got, want)
		}
		if exists(wt) {
			t.Errorf("WorktreeCreate in %s created %s", g.Dir, wt)
		}
	}
	// baseRepo wins over the daemon directory.
	repo := newRepoWithCommit(t, "main")
	res := create(t, &Git{Dir: repo}, wire.GitParams{BaseRepo: dir, BranchName: "b", WorktreePath: filepath.Join(dir, "wt")})
	if got := jsonOf(t, res); got != want {
		t.Errorf("WorktreeCreate with a non-repo baseRepo = %s, want %s", got, want)
	}
}

func TestWorktreeCreateAddFailed(t *testing.T) {
	t.Parallel()
	repo := newRepoWithCommit(t, "main")
	g := &Git{}

	taken := t.TempDir()
	writeFile(t, filepath.Join(taken, "keep.txt"), "mine")
	res := create(t, g, wire.GitParams{BaseRepo: repo, BranchName: "feat", WorktreePath: taken})
	if res.Success || res.ErrorCode != wire.ErrCodeWorktreeAddFailed ||
		!strings.HasPrefix(res.Error, "git worktree add failed: ") || !strings.Contains(res.Error, "already exists") {
		t.Errorf("WorktreeCreate(non-empty dir) = %+v, want worktree_add_failed ... already exists", res)
	}
	if strings.HasSuffix(res.Error, "\n") || strings.HasSuffix(res.Error, " ") {
		t.Errorf("error not trimmed: %q", res.Error)
	}
	if b, err := os.ReadFile(filepath.Join(taken, "keep.txt")); err != nil || string(b) != "mine" {
		t.Errorf("existing directory was disturbed: %q, %v", b, err)
	}
	if gitT(t, repo, "branch", "--list", "feat") != "" {
		t.Error("failed add left the new branch behind")
	}

	res = create(t, g, wire.GitParams{BaseRepo: repo, BranchName: "feat", WorktreePath: filepath.Join(t.TempDir(), "wt"), SourceBranch: "no-such-branch"})
	if res.Success || res.ErrorCode != wire.ErrCodeWorktreeAddFailed {
		t.Errorf("WorktreeCreate(bad source) = %+v, want worktree_add_failed", res)
	}

	res = create(t, g, wire.GitParams{BaseRepo: repo, BranchName: "bad..name", WorktreePath: filepath.Join(t.TempDir(), "wt")})
	if res.Success || res.ErrorCode != wire.ErrCodeWorktreeAddFailed || !strings.Contains(res.Error, "not a valid branch name") {
		t.Errorf("WorktreeCreate(bad branch name) = %+v, want worktree_add_failed", res)
	}

	// A branch name that looks like an option stays a name.
	res = create(t, g, wire.GitParams{BaseRepo: repo, BranchName: "--force", WorktreePath: filepath.Join(t.TempDir(), "wt")})
	if res.Success || res.ErrorCode != wire.ErrCodeWorktreeAddFailed {
		t.Errorf("WorktreeCreate(branch \"--force\") = %+v, want worktree_add_failed", res)
	}
}

// git worktree add passes the new branch and its source on to `git branch`
// with no "--": "-D" beside "feature" would delete feature, a source "-m"
// would rename the current branch. Both are refused and nothing changes.
func TestWorktreeCreateOptionLikeNames(t *testing.T) {
	t.Parallel()
	repo := newRepoWithCommit(t, "main")
	gitT(t, repo, "branch", "feature")
	g := &Git{}
	before := gitT(t, repo, "for-each-ref", "--format=%(refname) %(objectname)", "refs/heads")

	for _, tc := range []struct {
		branch, source, want string
	}{
		{"-D", "feature", "git worktree add failed: '-D' is not a valid branch name"},
		{"-m", "", "git worktree add failed: '-m' is not a valid branch name"},
		{"renamed", "-m", "git worktree add failed: invalid reference: -m"},
		{"x", "--orphan", "git worktree add failed: invalid reference: --orphan"},
	} {
		wt := filepath.Join(t.TempDir(), "wt")
		res := create(t, g, wire.GitParams{BaseRepo: repo, BranchName: tc.branch, SourceBranch: tc.source, WorktreePath: wt})
		if res.Success || res.ErrorCode != wire.ErrCodeWorktreeAddFailed || res.Error != tc.want {
			t.Errorf("WorktreeCreate(branch %q, source %q) = %+v, want %q", tc.branch, tc.source, res, tc.want)
		}
		if _, err := os.Lstat(wt); !errors.Is(err, os.ErrNotExist) {
			t.Errorf("WorktreeCreate(branch %q, source %q) left %s: %v", tc.branch, tc.source, wt, err)
		}
	}
	if after := gitT(t, repo, "for-each-ref", "--format=%(refname) %(objectname)", "refs/heads"); after != before {
		t.Errorf("branches changed:\n%s\nwant\n%s", after, before)
	}
	if got := headOf(t, repo); got != "main" {
		t.Errorf("HEAD of the repository is %q, want main", got)
	}
}

func TestWorktreeCreateOrphanOnUnbornHEAD(t *testing.T) {
	t.Parallel()
	repo := newRepo(t, "trunk")
	wt := filepath.Join(realPath(t, t.TempDir()), "wt")
	res := create(t, &Git{}, wire.GitParams{BaseRepo: repo, BranchName: "feat", WorktreePath: wt})
	if got, want := jsonOf(t, res), `{"success":true,"path":`+jstr(wt)+`}`; got != want {
		t.Fatalf("WorktreeCreate(unborn) = %s, want %s", got, want)
	}
	if got := headOf(t, wt); got != "feat" {
		t.Errorf("worktree HEAD = %q, want feat", got)
	}
	if _, err := gitTry(wt, "rev-parse", "--verify", "-q", "HEAD"); err == nil {
		t.Error("worktree HEAD has a commit; want an unborn branch")
	}
	if st := gitT(t, wt, "status", "--porcelain"); st != "" {
		t.Errorf("orphan worktree not empty and clean: %q", st)
	}
	if entries, _ := os.ReadDir(wt); len(entries) != 1 { // just .git
		t.Errorf("orphan worktree has files: %v", entries)
	}
	// Nothing in the worktree still names a placeholder commit.
	wtGitDir := gitT(t, wt, "rev-parse", "--absolute-git-dir")
	for _, f := range []string{"logs/HEAD", "ORIG_HEAD"} {
		if exists(filepath.Join(wtGitDir, f)) {
			t.Errorf("orphan worktree has %s", f)
		}
	}
	if !registered(t, repo, wt) {
		t.Error("orphan worktree is not registered with git")
	}

	// The first commit starts the branch with no history.
	commitFile(t, wt, "first.txt", "1\n")
	if n := gitT(t, wt, "rev-list", "--count", "feat"); n != "1" {
		t.Errorf("feat has %s commits, want 1", n)
	}
	if r := remove(t, &Git{}, wire.GitParams{BaseRepo: repo, WorktreePath: wt}); !r.Success || exists(wt) {
		t.Errorf("WorktreeRemove(orphan) = %+v", r)
	}
}

func TestWorktreeCreateOrphanRefusals(t *testing.T) {
	t.Parallel()
	repo := newRepo(t, "trunk")
	g := &Git{}
	// The main worktree already sits on the unborn trunk.
	wt := filepath.Join(t.TempDir(), "wt")
	res := create(t, g, wire.GitParams{BaseRepo: repo, BranchName: "trunk", WorktreePath: wt})
	if res.Success || res.ErrorCode != wire.ErrCodeWorktreeAddFailed || !strings.Contains(res.Error, "already checked out") {
		t.Errorf("WorktreeCreate(unborn trunk again) = %+v, want worktree_add_failed", res)
	}
	for _, name := range []string{"bad..name", "-x", "HEAD"} {
		res = create(t, g, wire.GitParams{BaseRepo: repo, BranchName: name, WorktreePath: wt})
		if res.Success || res.ErrorCode != wire.ErrCodeWorktreeAddFailed {
			t.Errorf("WorktreeCreate(unborn, branch %q) = %+v, want worktree_add_failed", name, res)
		}
	}
	if exists(wt) {
		t.Error("refused orphan create left a directory")
	}
	taken := t.TempDir()
	writeFile(t, filepath.Join(taken, "f"), "x")
	res = create(t, g, wire.GitParams{BaseRepo: repo, BranchName: "feat", WorktreePath: taken})
	if res.Success || res.ErrorCode != wire.ErrCodeWorktreeAddFailed || !strings.Contains(res.Error, "already exists") {
		t.Errorf("WorktreeCreate(unborn, non-empty dir) = %+v, want worktree_add_failed", res)
	}
}

func TestWorktreeRemove(t *testing.T) {
	t.Parallel()
	repo := newRepoWithCommit(t, "main")
	g := &Git{}
	wt := filepath.Join(realPath(t, t.TempDir()), "wt")
	create(t, g, wire.GitParams{BaseRepo: repo, BranchName: "feat", WorktreePath: wt})
	// Dirty it: remove is lenient and forces.
	writeFile(t, filepath.Join(wt, "a.txt"), "changed\n")
	writeFile(t, filepath.Join(wt, "untracked"), "u\n")

	res := remove(t, g, wire.GitParams{BaseRepo: repo, WorktreePath: wt})
	if got := jsonOf(t, res); got != `{"success":true}` {
		t.Fatalf("WorktreeRemove = %s, want {\"success\":true}", got)
	}
	if exists(wt) || registered(t, repo, wt) {
		t.Errorf("worktree still present: dir %v, registered %v", exists(wt), registered(t, repo, wt))
	}
	// Removing it again, and removing a path that never existed, succeed.
	for _, p := range []string{wt, filepath.Join(t.TempDir(), "never")} {
		if got := jsonOf(t, remove(t, g, wire.GitParams{BaseRepo: repo, WorktreePath: p})); got != `{"success":true}` {
			t.Errorf("WorktreeRemove(%s) = %s, want success", p, got)
		}
	}
}

func TestWorktreeRemoveAlreadyDeletedDir(t *testing.T) {
	t.Parallel()
	repo := newRepoWithCommit(t, "main")
	g := &Git{}
	wt := filepath.Join(realPath(t, t.TempDir()), "wt")
	create(t, g, wire.GitParams{BaseRepo: repo, BranchName: "feat", WorktreePath: wt})
	if err := os.RemoveAll(wt); err != nil {
		t.Fatal(err)
	}
	if res := remove(t, g, wire.GitParams{BaseRepo: repo, WorktreePath: wt}); !res.Success {
		t.Fatalf("WorktreeRemove(deleted dir) = %+v, want success", res)
	}
	if registered(t, repo, wt) {
		t.Error("stale worktree metadata left behind")
	}
	// The branch is free for a new worktree at the same path.
	if res := create(t, g, wire.GitParams{BaseRepo: repo, BranchName: "feat", WorktreePath: wt}); !res.Success {
		t.Errorf("re-create after remove = %+v", res)
	}
}

func TestWorktreeRemoveUnregisteredWorktreeDir(t *testing.T) {
	t.Parallel()
	repo := newRepoWithCommit(t, "main")
	g := &Git{}
	wt := filepath.Join(realPath(t, t.TempDir()), "wt")
	create(t, g, wire.GitParams{BaseRepo: repo, BranchName: "feat", WorktreePath: wt})
	// Lose git's metadata (as a manual prune or a crash would): git no
	// longer calls wt a working tree, but its .git file still points here.
	if err := os.RemoveAll(filepath.Join(repo, ".git", "worktrees")); err != nil {
		t.Fatal(err)
	}
	if res := remove(t, g, wire.GitParams{BaseRepo: repo, WorktreePath: wt}); !res.Success {
		t.Fatalf("WorktreeRemove(orphaned worktree dir) = %+v, want success", res)
	}
	if exists(wt) {
		t.Error("worktree directory still exists")
	}
}

func TestWorktreeRemoveRefusals(t *testing.T) {
	t.Parallel()
	repo := newRepoWithCommit(t, "main")
	g := &Git{}

	// Not a repository.
	dir := t.TempDir()
	res := remove(t, g, wire.GitParams{BaseRepo: dir, WorktreePath: filepath.Join(dir, "wt")})
	if got, want := jsonOf(t, res), `{"success":false,"error":"not a git repository","errorCode":"not_a_repo"}`; got != want {
		t.Errorf("WorktreeRemove(non-repo) = %s, want %s", got, want)
	}

	// worktreePath is required: "" would mean the daemon directory.
	_, err := (&Git{Dir: repo}).WorktreeRemove(context.Background(), wire.GitParams{})
	var we *wire.Error
	if !errors.As(err, &we) || we.Code != wire.CodeInvalidParams || we.Message != "worktreePath is required" {
		t.Errorf("WorktreeRemove({}) err = %v, want -32602 worktreePath is required", err)
	}

	// The main worktree, by its path and through a subdirectory-free alias.
	for _, p := range []string{repo, repo + "/."} {
		res = remove(t, g, wire.GitParams{BaseRepo: repo, WorktreePath: p})
		if res.Success || res.ErrorCode != ErrCodeWorktreeRemoveFailed {
			t.Errorf("WorktreeRemove(main worktree %s) = %+v, want failure", p, res)
		}
	}
	if !exists(filepath.Join(repo, "a.txt")) || !exists(filepath.Join(repo, ".git")) {
		t.Fatal("main worktree was damaged")
	}

	// An unrelated directory is not git's to delete.
	other := t.TempDir()
	writeFile(t, filepath.Join(other, "precious"), "data")
	res = remove(t, g, wire.GitParams{BaseRepo: repo, WorktreePath: other})
	if res.Success || res.ErrorCode != ErrCodeWorktreeRemoveFailed || !strings.HasPrefix(res.Error, "git worktree remove failed: ") {
		t.Errorf("WorktreeRemove(unrelated dir) = %+v, want failure", res)
	}
	if !exists(filepath.Join(other, "precious")) {
		t.Error("unrelated directory was deleted")
	}

	// Another repository's worktree is not this one's to delete either.
	repo2 := newRepoWithCommit(t, "main")
	wt2 := filepath.Join(t.TempDir(), "wt2")
	create(t, g, wire.GitParams{BaseRepo: repo2, BranchName: "feat", WorktreePath: wt2})
	res = remove(t, g, wire.GitParams{BaseRepo: repo, WorktreePath: wt2})
	if res.Success || !exists(wt2) {
		t.Errorf("WorktreeRemove(worktree of another repo) = %+v, still exists %v", res, exists(wt2))
	}

	// A locked worktree stays.
	wt := filepath.Join(t.TempDir(), "wt")
	create(t, g, wire.GitParams{BaseRepo: repo, BranchName: "feat", WorktreePath: wt})
	gitT(t, repo, "worktree", "lock", "--reason", "in use by ci", wt)
	res = remove(t, g, wire.GitParams{BaseRepo: repo, WorktreePath: wt})
	if res.Success || res.ErrorCode != ErrCodeWorktreeRemoveFailed || !strings.Contains(res.Error, "in use by ci") {
		t.Errorf("WorktreeRemove(locked) = %+v, want failure naming the reason", res)
	}
	if !exists(filepath.Join(wt, "a.txt")) {
		t.Error("locked worktree was deleted")
	}
}

func TestWorktreeFromBareRepository(t *testing.T) {
	t.Parallel()
	work := newRepoWithCommit(t, "main")
	tmp := realPath(t, t.TempDir())
	bare := filepath.Join(tmp, "b.git")
	gitT(t, tmp, "clone", "-q", "--bare", work, bare)
	g := &Git{}
	wt := filepath.Join(tmp, "wt")
	res := create(t, g, wire.GitParams{BaseRepo: bare, BranchName: "feat", WorktreePath: wt})
	if !res.Success || res.SourceBranch != "main" {
		t.Fatalf("WorktreeCreate(bare) = %+v", res)
	}
	if r := remove(t, g, wire.GitParams{BaseRepo: bare, WorktreePath: bare}); r.Success || !exists(filepath.Join(bare, "HEAD")) {
		t.Fatalf("WorktreeRemove(the bare repo itself) = %+v; HEAD still there: %v", r, exists(filepath.Join(bare, "HEAD")))
	}
	if r := remove(t, g, wire.GitParams{BaseRepo: bare, WorktreePath: wt}); !r.Success || exists(wt) {
		t.Errorf("WorktreeRemove(bare's worktree) = %+v", r)
	}
}

// Ending the context of a git call (a recipe's Ctrl-C) ends what git runs
// too: a filter of `worktree add`'s checkout is not left running once the
// call returns. Not parallel: the filter is the operator's (the process
// environment's), the kind the daemon still runs.
func TestGitCancelEndsItsChildren(t *testing.T) {
	repo := newRepoWithCommit(t, "main")
	pidFile := filepath.Join(t.TempDir(), "filter.pid")
	operatorFilter(t, repo, "echo $$ > '"+pidFile+".tmp' && mv '"+pidFile+".tmp' '"+pidFile+"' && exec sleep 60")
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() {
		_, err := (&Git{}).WorktreeCreate(ctx, wire.GitParams{BaseRepo: repo, BranchName: "feat", WorktreePath: filepath.Join(t.TempDir(), "wt")})
		done <- err
	}()
	var pid int
	for deadline := time.Now().Add(10 * time.Second); pid == 0; time.Sleep(10 * time.Millisecond) {
		if b, err := os.ReadFile(pidFile); err == nil {
			pid, _ = strconv.Atoi(strings.TrimSpace(string(b)))
		}
		if time.Now().After(deadline) {
			t.Fatal("the filter never ran")
		}
	}
	cancel()
	select {
	case err := <-done:
		if !errors.Is(err, context.Canceled) {
			t.Errorf("WorktreeCreate after cancel: %v", err)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("WorktreeCreate did not return after cancel")
	}
	if !testutil.Exits(pid, 2*time.Second) {
		syscall.Kill(pid, syscall.SIGKILL)
		t.Fatal("git's filter outlived the cancelled call")
	}
}
