package gitops

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"

	"github.com/seed5ad92d46/sous/daemon/wire"
)

// ErrCodeWorktreeRemoveFailed is the errorCode of a git.worktree_remove that
// could not remove the worktree. docs/PROTOCOL.md defines no code for it (remove is
// "lenient"); this one is a claustrum-compatible addition and belongs in
// package wire next to ErrCodeWorktreeAddFailed.
const ErrCodeWorktreeRemoveFailed = "worktree_remove_failed"

// placeholderIdent is the identity of the throwaway commit an orphan worktree
// is created from on git older than 2.42 (see addOrphanLegacy). It does not
// depend on user.name being configured, and the date is fixed so every such
// commit in a repository is the same object.
func placeholderIdent() []string {
	return []string{
		"GIT_AUTHOR_NAME=sous", "GIT_AUTHOR_EMAIL=sous@localhost", "GIT_AUTHOR_DATE=1970-01-01T00:00:00Z",
		"GIT_COMMITTER_NAME=sous", "GIT_COMMITTER_EMAIL=sous@localhost", "GIT_COMMITTER_DATE=1970-01-01T00:00:00Z",
	}
}

func notARepo() wire.WorktreeResult {
	return wire.WorktreeResult{Success: false, Error: "not a git repository", ErrorCode: wire.ErrCodeNotARepo}
}

func addFailed(msg string) wire.WorktreeResult {
	return wire.WorktreeResult{Success: false, Error: "git worktree add failed: " + msg, ErrorCode: wire.ErrCodeWorktreeAddFailed}
}

func notAWorktree(msg string) wire.WorktreeResult {
	return wire.WorktreeResult{Success: false, Error: "git worktree remove failed: " + msg, ErrorCode: wire.ErrCodeNotAWorktree}
}

func removeFailed(msg string) wire.WorktreeResult {
	return wire.WorktreeResult{Success: false, Error: "git worktree remove failed: " + msg, ErrorCode: ErrCodeWorktreeRemoveFailed}
}

// isCtxErr reports whether err came from the caller's context ending. Such
// calls did not finish, so they are errors, not {success:false} answers.
func isCtxErr(err error) bool {
	return errors.Is(err, context.Canceled) || errors.Is(err, context.DeadlineExceeded)
}

// WorktreeCreate implements git.worktree_create.
//
//   - branchName is required (-32602 "branchName is required"), and so is
//     worktreePath (-32602 "worktreePath is required"): defaulting it to the
//     daemon directory would try to put a worktree on top of a checkout.
//   - The repository is baseRepo, or the daemon directory when absent; relative
//     paths resolve against the daemon directory. A directory outside any
//     repository is {success:false,errorCode:"not_a_repo"}, checked before the
//     add so git's raw message is not leaked.
//   - sourceBranch defaults to the repository's current branch (its commit id
//     when HEAD is detached) and is echoed back.
//   - A branchName that already exists is checked out in the new worktree
//     rather than failing, so a recipe can re-create a worktree for its branch
//     after removing it; sourceBranch is then only echoed. Otherwise the
//     branch is created from sourceBranch. With reportNewBranch (the
//     git.worktree_create.newbranch extension) a success says which
//     happened in newBranch.
//   - On an unborn HEAD with no sourceBranch the new worktree gets a new unborn
//     (orphan) branch and sourceBranch is omitted from the result.
//   - A branchName or sourceBranch starting with '-' is worktree_add_failed
//     before git runs: git would take it for an option.
//   - With include (the git.worktree_create.include extension, include.go)
//     the globs are checked first (-32602 for one that leaves the
//     repository), and what they match is copied after the add; a copy
//     that fails removes the worktree (and the branch it created) and is
//     {success:false,errorCode:"worktree_include_failed"}.
//   - Any other failure, including one from git before the add, is
//     {success:false,error:"git worktree add failed: <git's stderr>",
//     errorCode:"worktree_add_failed"}. path in a success is worktreePath as
//     given.
func (g *Git) WorktreeCreate(ctx context.Context, p wire.GitParams) (wire.WorktreeResult, error) {
	if p.BranchName == "" {
		return wire.WorktreeResult{}, wire.InvalidParams("branchName is required")
	}
	if p.WorktreePath == "" {
		return wire.WorktreeResult{}, wire.InvalidParams("worktreePath is required")
	}
	if err := checkIncludes(p.Include); err != nil {
		return wire.WorktreeResult{}, wire.InvalidParams(err.Error())
	}
	repoDir, err := g.resolve(p.BaseRepo)
	if err != nil {
		return wire.WorktreeResult{}, err
	}
	wt, err := g.resolve(p.WorktreePath)
	if err != nil {
		return wire.WorktreeResult{}, err
	}
	if _, err := g.probe(ctx, repoDir); err != nil {
		if errors.Is(err, errNotRepo) {
			return notARepo(), nil
		}
		if isCtxErr(err) {
			return wire.WorktreeResult{}, fmt.Errorf("worktree create in %s: %w", repoDir, err)
		}
		return addFailed(gitMessage(err)), nil
	}
	// `worktree add -b` hands both names to `git branch` with no "--", which
	// reads a leading '-' as an option: branchName "-D" beside a source
	// "feature" deletes feature, sourceBranch "-m" renames the current
	// branch. Neither can name a branch or a commit, so they are refused in
	// git's words before git sees them.
	if strings.HasPrefix(p.BranchName, "-") {
		return addFailed(fmt.Sprintf("'%s' is not a valid branch name", p.BranchName)), nil
	}
	if strings.HasPrefix(p.SourceBranch, "-") {
		return addFailed("invalid reference: " + p.SourceBranch), nil
	}

	result, err := g.addWorktree(ctx, repoDir, wt, p.BranchName, p.SourceBranch)
	if err != nil {
		if isCtxErr(err) {
			return wire.WorktreeResult{}, fmt.Errorf("worktree create in %s: %w", repoDir, err)
		}
		return addFailed(gitMessage(err)), nil
	}
	if len(p.Include) > 0 {
		if err := g.includeInto(ctx, repoDir, wt, p.Include); err != nil {
			g.undoCreate(ctx, repoDir, wt, p.BranchName, *result.NewBranch)
			if isCtxErr(err) {
				return wire.WorktreeResult{}, fmt.Errorf("worktree create in %s: %w", repoDir, err)
			}
			return includeFailed(err), nil
		}
	}
	result.Path = p.WorktreePath
	if !p.ReportNewBranch {
		result.NewBranch = nil // the contract's result, field for field
	}
	return result, nil
}

// addWorktree does the add for WorktreeCreate once the request is valid and
// repoDir is known to be a repository. The returned result lacks Path.
func (g *Git) addWorktree(ctx context.Context, repoDir, wt, branch, source string) (wire.WorktreeResult, error) {
	if source == "" {
		var err error
		if source, err = g.currentSource(ctx, repoDir); err != nil {
			return wire.WorktreeResult{}, err
		}
	}
	// show-ref exits 1 for a missing ref and 128 for an invalid name; both
	// mean "create it" and let worktree add report a bad name in git's words.
	_, err := g.run(ctx, repoDir, "show-ref", "--verify", "--quiet", "refs/heads/"+branch)
	existed := err == nil
	// The adds check files out, through the filter drivers the attributes
	// name: runGuarded switches off those of the repository's config.
	switch {
	case existed:
		// "--" keeps a path or branch starting with '-' from being an option.
		_, err = g.runGuarded(ctx, repoDir, "worktree", "add", "-q", "--", wt, branch)
	case isCtxErr(err):
	case source == "":
		err = g.addOrphan(ctx, repoDir, wt, branch)
	default:
		_, err = g.runGuarded(ctx, repoDir, "worktree", "add", "-q", "-b", branch, "--", wt, source)
		if err != nil {
			g.dropFailedBranch(ctx, repoDir, branch, err)
		}
	}
	if err != nil {
		return wire.WorktreeResult{}, err
	}
	created := !existed
	return wire.WorktreeResult{Success: true, SourceBranch: source, NewBranch: &created}, nil
}

// undoCreate removes a worktree just added, and the branch when the add
// created it: a create that fails leaves nothing behind.
func (g *Git) undoCreate(ctx context.Context, repoDir, wt, branch string, created bool) {
	cctx, cancel := cleanupContext(ctx)
	defer cancel()
	_, _ = g.run(cctx, repoDir, "worktree", "remove", "--force", "--", wt) // best effort, as below
	if created {
		_, _ = g.run(cctx, repoDir, "branch", "-D", "--", branch)
	}
}

// dropFailedBranch deletes the branch a failed `worktree add -b` created.
// git creates the branch before it checks out the worktree, so a failure
// such as "path already exists" leaves it behind; a retry would then find
// an existing branch and silently ignore its sourceBranch. When git failed
// because the branch already existed, someone else made it in the meantime
// and it is left alone. `branch -D` also refuses a branch checked out
// anywhere, which protects a branch that is in use.
func (g *Git) dropFailedBranch(ctx context.Context, repoDir, branch string, addErr error) {
	if strings.Contains(gitMessage(addErr), "already exists") && strings.Contains(gitMessage(addErr), "branch named") {
		return
	}
	cctx, cancel := cleanupContext(ctx)
	defer cancel()
	_, _ = g.run(cctx, repoDir, "branch", "-D", "--", branch) // best effort: the add's error is what the caller needs
}

// cleanupContext is for undoing a failed step: it keeps ctx's values but not
// its cancellation, which may be the very failure being cleaned up after,
// and is bounded on its own.
func cleanupContext(ctx context.Context) (context.Context, context.CancelFunc) {
	return context.WithTimeout(context.WithoutCancel(ctx), 10*waitDelay)
}

// currentSource is what a new branch starts from by default: the current
// branch, the commit id on a detached HEAD (a stable name, unlike "HEAD"), or
// "" on an unborn HEAD.
func (g *Git) currentSource(ctx context.Context, repoDir string) (string, error) {
	sha, err := g.run(ctx, repoDir, "rev-parse", "-q", "--verify", "HEAD^{commit}")
	if exitCode(err) == 1 {
		return "", nil // unborn: there is nothing to start from
	}
	if err != nil {
		return "", err
	}
	ref, err := g.run(ctx, repoDir, "symbolic-ref", "-q", "HEAD")
	if exitCode(err) == 1 {
		return strings.TrimRight(sha, "\n"), nil // detached
	}
	if err != nil {
		return "", err
	}
	return strings.TrimPrefix(strings.TrimRight(ref, "\n"), "refs/heads/"), nil
}

// addOrphan creates a worktree on a new unborn branch. An unborn branch has
// no ref, so git cannot see that another worktree (typically the main one of
// a fresh repository) already sits on it; that check is done here.
func (g *Git) addOrphan(ctx context.Context, repoDir, wt, branch string) error {
	wts, err := g.worktrees(ctx, repoDir)
	if err != nil {
		return err
	}
	for _, w := range wts {
		if w.branch == "refs/heads/"+branch {
			return fmt.Errorf("'%s' is already checked out at '%s'", branch, w.path)
		}
	}
	_, err = g.runGuarded(ctx, repoDir, "worktree", "add", "-q", "--orphan", "-b", branch, "--", wt)
	var ge *gitError
	if errors.As(err, &ge) && ge.exitCode == 129 && strings.Contains(ge.stderr, "orphan") {
		// git < 2.42 has no --orphan (129 is a usage error).
		return g.addOrphanLegacy(ctx, repoDir, wt, branch)
	}
	return err
}

// addOrphanLegacy emulates `worktree add --orphan` with plumbing, so git
// still writes and owns all worktree metadata: the worktree is added detached
// at a commit of the empty tree, then HEAD is pointed at the unborn branch.
// The index and work tree of an empty-tree checkout are already empty, and
// the placeholder commit stays unreferenced (gc removes it) once its
// reflog entries are dropped.
func (g *Git) addOrphanLegacy(ctx context.Context, repoDir, wt, branch string) error {
	// symbolic-ref does not apply branch-name rules, so check them first,
	// in git's words.
	name, err := g.run(ctx, repoDir, "check-ref-format", "--branch", branch)
	if err != nil {
		return err
	}
	if strings.TrimRight(name, "\n") != branch { // e.g. "@{-1}" expanded to another name
		return fmt.Errorf("'%s' is not a valid branch name", branch)
	}
	tree, err := g.runEnv(ctx, repoDir, nil, strings.NewReader(""), "hash-object", "-t", "tree", "-w", "--no-filters", "--stdin")
	if err != nil {
		return err
	}
	commit, err := g.runEnv(ctx, repoDir, placeholderIdent(), nil,
		"commit-tree", "--no-gpg-sign", "-m", "sous: placeholder for an orphan worktree", strings.TrimRight(tree, "\n"))
	if err != nil {
		return err
	}
	if _, err := g.runGuarded(ctx, repoDir, "worktree", "add", "-q", "--detach", "--", wt, strings.TrimRight(commit, "\n")); err != nil {
		return err
	}
	if err := g.orphanHead(ctx, wt, branch); err != nil {
		// Do not leave a detached placeholder worktree behind.
		cctx, cancel := cleanupContext(ctx)
		defer cancel()
		_, _ = g.run(cctx, repoDir, "worktree", "remove", "--force", "--", wt)
		return err
	}
	return nil
}

// orphanHead points the new worktree's HEAD at the unborn branch and drops
// the per-worktree refs that still name the placeholder commit.
func (g *Git) orphanHead(ctx context.Context, wt, branch string) error {
	if _, err := g.run(ctx, wt, "symbolic-ref", "HEAD", "refs/heads/"+branch); err != nil {
		return err
	}
	gitDir, err := g.run(ctx, wt, "rev-parse", "--absolute-git-dir")
	if err != nil {
		return err
	}
	gitDir = strings.TrimRight(gitDir, "\n")
	for _, f := range []string{filepath.Join("logs", "HEAD"), "ORIG_HEAD"} {
		if err := os.Remove(filepath.Join(gitDir, f)); err != nil && !errors.Is(err, fs.ErrNotExist) {
			return fmt.Errorf("drop placeholder %s: %w", f, err)
		}
	}
	return nil
}

// worktree is one entry of `git worktree list --porcelain`.
type worktree struct {
	path   string
	branch string // full ref, "" when detached or bare
	bare   bool
	locked bool
	reason string // lock reason
}

// worktrees lists the repository's worktrees, the main one first. -z keeps a
// path containing a newline from splitting a record.
func (g *Git) worktrees(ctx context.Context, repoDir string) ([]worktree, error) {
	out, err := g.run(ctx, repoDir, "worktree", "list", "--porcelain", "-z")
	if err != nil {
		return nil, err
	}
	var list []worktree
	var cur *worktree
	for _, field := range strings.Split(out, "\x00") {
		if field == "" { // end of a record
			cur = nil
			continue
		}
		key, val, _ := strings.Cut(field, " ")
		if key == "worktree" {
			list = append(list, worktree{path: val})
			cur = &list[len(list)-1]
			continue
		}
		if cur == nil {
			continue
		}
		switch key {
		case "branch":
			cur.branch = val
		case "bare":
			cur.bare = true
		case "locked":
			cur.locked, cur.reason = true, val
		}
	}
	return list, nil
}

// WorktreeRemove implements git.worktree_remove, leniently: the goal is "no
// worktree at worktreePath", so a dirty worktree is removed anyway
// (`git worktree remove --force`), and a path that is already gone succeeds
// after pruning its stale metadata. When git refuses a worktree of this
// repository (for example one containing submodules on older git), its
// directory is deleted and the metadata pruned.
//
// It returns success:false rather than deleting anything when:
//   - worktreePath is empty: -32602 "worktreePath is required" (it would
//     otherwise resolve to the daemon directory);
//   - the repository (baseRepo, or the daemon directory) is not a repository:
//     errorCode "not_a_repo";
//   - the worktree is locked: a lock is someone's explicit request to keep it,
//     or git's own ("initializing") while an add is under way, which
//     cannot be told from one a killed add left behind;
//   - the path exists but is not a worktree of this repository (the main
//     worktree, an unrelated directory): deleting it would lose data that
//     was never git's to remove.
//
// Those last two use errorCode ErrCodeWorktreeRemoveFailed. With strict
// (the git.worktree_remove.strict extension) it removes less; see
// removeStrict.
func (g *Git) WorktreeRemove(ctx context.Context, p wire.GitParams) (wire.WorktreeResult, error) {
	if p.WorktreePath == "" {
		return wire.WorktreeResult{}, wire.InvalidParams("worktreePath is required")
	}
	repoDir, err := g.resolve(p.BaseRepo)
	if err != nil {
		return wire.WorktreeResult{}, err
	}
	wt, err := g.resolve(p.WorktreePath)
	if err != nil {
		return wire.WorktreeResult{}, err
	}
	remove := g.removeWorktree
	if p.Strict {
		remove = g.removeStrict
	}
	res, err := remove(ctx, repoDir, wt)
	if err != nil {
		if isCtxErr(err) {
			return wire.WorktreeResult{}, fmt.Errorf("worktree remove of %s: %w", wt, err)
		}
		return removeFailed(gitMessage(err)), nil
	}
	return res, nil
}

// removal is what removeWorktree and removeStrict find out before they
// remove anything.
type removal struct {
	repo   repo
	linked *worktree // the registered linked worktree at the path, if any
	// refusal, when set, is the answer: there is nothing to remove.
	refusal *wire.WorktreeResult
}

// prepareRemoval finds wt among repoDir's worktrees and refuses what
// neither kind of remove touches: a repoDir that is no repository, the
// main worktree, a locked worktree.
func (g *Git) prepareRemoval(ctx context.Context, repoDir, wt string) (removal, error) {
	r, err := g.probe(ctx, repoDir)
	if errors.Is(err, errNotRepo) {
		res := notARepo()
		return removal{refusal: &res}, nil
	}
	if err != nil {
		return removal{}, err
	}
	wts, err := g.worktrees(ctx, repoDir)
	if err != nil {
		return removal{}, err
	}
	target := samePath(wt)
	rm := removal{repo: r}
	for i := range wts {
		if samePath(wts[i].path) != target {
			continue
		}
		if i == 0 { // the main worktree, or the bare repository itself
			res := removeFailed(fmt.Sprintf("'%s' is the main worktree", wt))
			return removal{refusal: &res}, nil
		}
		rm.linked = &wts[i]
	}
	if rm.linked != nil && rm.linked.locked {
		msg := fmt.Sprintf("'%s' is locked", wt)
		if rm.linked.reason != "" {
			msg += ": " + rm.linked.reason
		}
		res := removeFailed(msg)
		return removal{refusal: &res}, nil
	}
	return rm, nil
}

func (g *Git) removeWorktree(ctx context.Context, repoDir, wt string) (wire.WorktreeResult, error) {
	rm, err := g.prepareRemoval(ctx, repoDir, wt)
	if err != nil || rm.refusal != nil {
		return derefResult(rm.refusal), err
	}
	r, linked := rm.repo, rm.linked

	_, rmErr := g.run(ctx, repoDir, "worktree", "remove", "--force", "--", wt)
	if rmErr == nil {
		return wire.WorktreeResult{Success: true}, nil
	}
	if isCtxErr(rmErr) {
		return wire.WorktreeResult{}, rmErr
	}
	switch _, statErr := os.Lstat(wt); {
	case errors.Is(statErr, fs.ErrNotExist):
		// Already gone: only stale metadata (if any) is left.
	case linked != nil || belongsTo(wt, r.commonDir):
		if err := os.RemoveAll(wt); err != nil {
			return removeFailed(fmt.Sprintf("%s; removing the directory: %v", gitMessage(rmErr), err)), nil
		}
	default:
		return removeFailed(gitMessage(rmErr)), nil
	}
	if _, err := g.run(ctx, repoDir, "worktree", "prune"); err != nil {
		return wire.WorktreeResult{}, err
	}
	return wire.WorktreeResult{Success: true}, nil
}

// removeStrict is git.worktree_remove with strict: it removes only a linked
// worktree of repoDir with nothing to lose, and deletes nothing otherwise.
//   - wt must be registered with repoDir (a registered worktree whose
//     directory is gone is only pruned) and its .git must lead into
//     repoDir's worktrees directory (linkedTo): errorCode not_a_worktree.
//   - Its git.status must be clean: errorCode worktree_dirty, with the
//     porcelain lines in changes.
//   - The removal is git's own, not forced: git checks once more, and
//     refuses a worktree with submodules, whose own changes Status does
//     not look at. Any refusal of git's is worktree_remove_failed, and the
//     directory is left alone (the lenient remove would delete it).
func (g *Git) removeStrict(ctx context.Context, repoDir, wt string) (wire.WorktreeResult, error) {
	rm, err := g.prepareRemoval(ctx, repoDir, wt)
	if err != nil || rm.refusal != nil {
		return derefResult(rm.refusal), err
	}
	if rm.linked == nil {
		return notAWorktree(fmt.Sprintf("'%s' is not a worktree of %s", wt, repoDir)), nil
	}
	if _, err := os.Lstat(wt); errors.Is(err, fs.ErrNotExist) {
		// Gone already: nothing to lose, only its metadata to drop.
		if _, err := g.run(ctx, repoDir, "worktree", "prune"); err != nil {
			return wire.WorktreeResult{}, err
		}
		return wire.WorktreeResult{Success: true}, nil
	}
	if err := linkedTo(wt, rm.repo.commonDir); err != nil {
		return notAWorktree(err.Error()), nil
	}
	st, err := g.Status(ctx, wt)
	switch {
	case err != nil:
		return wire.WorktreeResult{}, err
	case !st.IsRepo:
		return notAWorktree(fmt.Sprintf("'%s' is not a git worktree", wt)), nil
	case !st.Clean:
		return wire.WorktreeResult{
			Success:   false,
			Error:     fmt.Sprintf("git worktree remove failed: '%s' has uncommitted changes: %s", wt, wire.SummarizeChanges(st.Changes)),
			ErrorCode: wire.ErrCodeWorktreeDirty,
			Changes:   st.Changes,
		}, nil
	}
	// git's check runs `git status` in the worktree, under its config.
	guard, err := g.guardArgs(ctx, wt)
	if err != nil {
		return wire.WorktreeResult{}, err
	}
	if _, err := g.exec(ctx, invocation{dir: repoDir, config: guard}, "worktree", "remove", "--", wt); err != nil {
		if isCtxErr(err) {
			return wire.WorktreeResult{}, err
		}
		return removeFailed(gitMessage(err)), nil
	}
	return wire.WorktreeResult{Success: true}, nil
}

// derefResult is *res, or the zero result for nil.
func derefResult(res *wire.WorktreeResult) wire.WorktreeResult {
	if res == nil {
		return wire.WorktreeResult{}
	}
	return *res
}

// belongsTo reports whether dir is a linked worktree of the repository whose
// common git dir is commonDir, judged by its .git file alone: it catches a
// worktree whose metadata git no longer recognises (pruned, or half
// written), which is exactly when `git worktree remove` refuses it.
func belongsTo(dir, commonDir string) bool {
	gitDir, ok := readGitFile(filepath.Join(dir, ".git"))
	if !ok { // missing, or a directory: a main worktree or no worktree
		return false
	}
	return filepath.Dir(samePath(gitDir)) == filepath.Join(samePath(commonDir), "worktrees")
}

// samePath canonicalises p for comparison: symlinks resolved as far as the
// path exists (git records real paths, callers may not), then cleaned.
func samePath(p string) string {
	p = filepath.Clean(p)
	if real, err := filepath.EvalSymlinks(p); err == nil {
		return real
	}
	dir, base := filepath.Split(p)
	if dir == "" || dir == p {
		return p
	}
	return filepath.Join(samePath(filepath.Clean(dir)), base)
}
