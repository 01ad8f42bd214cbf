package gitops

import (
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/seed5ad92d46/sous/daemon/wire"
)

// A strict remove (git.worktree_remove.strict) removes a clean linked
// worktree and refuses, deleting nothing, whatever the lenient default
// would force through.
func TestWorktreeRemoveStrict(t *testing.T) {
	t.Parallel()
	g := &Git{}
	repo, wt := linkedWorktree(t)
	strict := wire.GitParams{BaseRepo: repo, WorktreePath: wt, Strict: true}

	// Dirty: a change to a tracked file and seven new files.
	writeFile(t, filepath.Join(wt, "a.txt"), "changed\n")
	for i := range 7 {
		writeFile(t, filepath.Join(wt, fmt.Sprintf("new%d", i)), "x")
	}
	res := remove(t, g, strict)
	wantChanges := []string{"M a.txt", "?? new0", "?? new1", "?? new2", "?? new3", "?? new4", "?? new5", "?? new6"}
	wantErr := "git worktree remove failed: '" + wt + "' has uncommitted changes: M a.txt, ?? new0, ?? new1, ?? new2, ?? new3 and 3 more"
	if res.Success || res.ErrorCode != wire.ErrCodeWorktreeDirty || res.Error != wantErr || !slices.Equal(res.Changes, wantChanges) {
		t.Errorf("strict remove of a dirty worktree = %+v\nwant error %q, changes %q", res, wantErr, wantChanges)
	}
	if !exists(filepath.Join(wt, "new6")) || !registered(t, repo, wt) {
		t.Fatal("the refused removal lost the worktree")
	}

	// Not a worktree of repo: an unrelated directory, another repository's
	// worktree, the main worktree, a subdirectory.
	_, otherWt := linkedWorktree(t)
	for _, path := range []string{realPath(t, t.TempDir()), otherWt, filepath.Join(wt, "sub")} {
		os.MkdirAll(path, 0o755)
		writeFile(t, filepath.Join(path, "keep"), "x")
		res := remove(t, g, wire.GitParams{BaseRepo: repo, WorktreePath: path, Strict: true})
		if res.Success || res.ErrorCode != wire.ErrCodeNotAWorktree || !strings.Contains(res.Error, "is not a worktree of "+repo) {
			t.Errorf("strict remove of %s = %+v, want not_a_worktree", path, res)
		}
		if !exists(filepath.Join(path, "keep")) {
			t.Errorf("strict remove of %s deleted it", path)
		}
	}
	if res := remove(t, g, wire.GitParams{BaseRepo: repo, WorktreePath: repo, Strict: true}); res.Success || !strings.Contains(res.Error, "is the main worktree") {
		t.Errorf("strict remove of the main worktree = %+v", res)
	}
	os.RemoveAll(filepath.Join(wt, "sub"))

	// A registered worktree whose .git was rewritten to another git dir.
	_, elsewhere := linkedWorktree(t)
	dotGit := filepath.Join(wt, ".git")
	orig, err := os.ReadFile(dotGit)
	if err != nil {
		t.Fatal(err)
	}
	foreign, err := os.ReadFile(filepath.Join(elsewhere, ".git"))
	if err != nil {
		t.Fatal(err)
	}
	writeFile(t, dotGit, string(foreign))
	if res := remove(t, g, strict); res.Success || res.ErrorCode != wire.ErrCodeNotAWorktree || !strings.Contains(res.Error, "its .git points to") {
		t.Errorf("strict remove of a worktree whose .git leads elsewhere = %+v", res)
	}
	writeFile(t, dotGit, string(orig))

	// Locked.
	gitT(t, repo, "worktree", "lock", "--reason", "in use", wt)
	if res := remove(t, g, strict); res.Success || !strings.Contains(res.Error, "is locked: in use") {
		t.Errorf("strict remove of a locked worktree = %+v", res)
	}
	gitT(t, repo, "worktree", "unlock", wt)

	// Clean: removed, by git.
	for i := range 7 {
		os.Remove(filepath.Join(wt, fmt.Sprintf("new%d", i)))
	}
	writeFile(t, filepath.Join(wt, "a.txt"), "a\n")
	if res := remove(t, g, strict); !res.Success || exists(wt) || registered(t, repo, wt) {
		t.Errorf("strict remove of a clean worktree = %+v; exists %v", res, exists(wt))
	}

	// Registered, but its directory is gone: only the metadata is left.
	if res := create(t, g, wire.GitParams{BaseRepo: repo, BranchName: "gone", WorktreePath: wt}); !res.Success {
		t.Fatal(res)
	}
	if err := os.RemoveAll(wt); err != nil {
		t.Fatal(err)
	}
	if res := remove(t, g, strict); !res.Success || registered(t, repo, wt) {
		t.Errorf("strict remove of a vanished worktree = %+v", res)
	}
	// And now it is nothing of repo's at all.
	if res := remove(t, g, strict); res.Success || res.ErrorCode != wire.ErrCodeNotAWorktree {
		t.Errorf("strict remove of a path that is gone = %+v", res)
	}
}

// With reportNewBranch (git.worktree_create.newbranch) a create says
// whether it made the branch; without, the result is the contract's.
func TestWorktreeCreateReportsNewBranch(t *testing.T) {
	t.Parallel()
	g := &Git{}
	repo := newRepoWithCommit(t, "main")
	gitT(t, repo, "branch", "dev")
	tmp := realPath(t, t.TempDir())
	for _, tc := range []struct {
		branch, source string
		want           string
	}{
		{"dev", "main", `{"success":true,"path":%s,"sourceBranch":"main","newBranch":false}`},
		{"topic", "main", `{"success":true,"path":%s,"sourceBranch":"main","newBranch":true}`},
		{"topic2", "", `{"success":true,"path":%s,"sourceBranch":"main","newBranch":true}`},
	} {
		wt := filepath.Join(tmp, tc.branch)
		res := create(t, g, wire.GitParams{BaseRepo: repo, BranchName: tc.branch, WorktreePath: wt, SourceBranch: tc.source, ReportNewBranch: true})
		if got, want := jsonOf(t, res), fmt.Sprintf(tc.want, jstr(wt)); got != want {
			t.Errorf("create %s from %q = %s, want %s", tc.branch, tc.source, got, want)
		}
	}
	// An orphan on an unborn HEAD is a new branch too.
	empty := newRepo(t, "trunk")
	wt := filepath.Join(tmp, "orphan")
	if got, want := jsonOf(t, create(t, g, wire.GitParams{BaseRepo: empty, BranchName: "o", WorktreePath: wt, ReportNewBranch: true})),
		`{"success":true,"path":`+jstr(wt)+`,"newBranch":true}`; got != want {
		t.Errorf("orphan create = %s, want %s", got, want)
	}
	// Not asked: the contract's result, field for field.
	gitT(t, repo, "branch", "dev2")
	wt = filepath.Join(tmp, "dev2")
	if got, want := jsonOf(t, create(t, g, wire.GitParams{BaseRepo: repo, BranchName: "dev2", WorktreePath: wt, SourceBranch: "main"})),
		`{"success":true,"path":`+jstr(wt)+`,"sourceBranch":"main"}`; got != want {
		t.Errorf("create without reportNewBranch = %s, want %s", got, want)
	}
}
