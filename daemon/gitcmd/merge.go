package gitcmd

import (
	"context"
	"slices"
	"strings"

	"github.com/seed5ad92d46/sous/daemon/wire"
)

// Merge is git.merge: branch into the branch checked out in repo. With
// squash, branch's changes become one new commit (message, or git's
// "Squashed commit of the following" list); a squash that changes nothing
// (branch already merged) makes no commit and answers HEAD. Without it a
// fast-forward or a merge commit (message, or git's "Merge branch ...").
//
// A merge that stops on conflicts is undone (`git merge --abort`, or
// `git reset --merge` for a squash, which leaves no merge to abort): ok is
// false and conflicts lists the paths. Any other failure (an unknown
// branch, local changes in the way) is an error and leaves repo as git
// left it.
func Merge(ctx context.Context, r Runner, repo, branch string, squash bool, message string) (wire.GitMergeResult, error) {
	if branch == "" {
		return wire.GitMergeResult{}, &ArgError{Msg: "branch is required"}
	}
	if err := NoOption("branch", branch); err != nil {
		return wire.GitMergeResult{}, err
	}
	guard, err := Guard(ctx, r, repo)
	if err != nil {
		return wire.GitMergeResult{}, err
	}
	args := []string{"merge", "--no-edit", "--no-verify", "--no-gpg-sign", "--no-stat"}
	if squash {
		args = append(args, "--squash")
	} else if message != "" {
		args = append(args, "-m", message)
	}
	args = append(args, "--", branch)
	out, err := r.Git(ctx, repo, guard, args...)
	if err != nil {
		return wire.GitMergeResult{}, err
	}
	if out.ExitCode != 0 {
		return conflicted(ctx, r, repo, squash, out)
	}
	if squash {
		if err := commitSquash(ctx, r, repo, guard, message); err != nil {
			return wire.GitMergeResult{}, err
		}
	}
	commit, err := head(ctx, r, repo)
	if err != nil {
		return wire.GitMergeResult{}, err
	}
	return wire.GitMergeResult{OK: true, Commit: commit, Conflicts: []string{}}, nil
}

// commitSquash commits what a squash merge staged, if anything.
func commitSquash(ctx context.Context, r Runner, repo string, guard []string, message string) error {
	staged, err := r.Git(ctx, repo, nil, "diff", "--cached", "--quiet", "--no-ext-diff")
	if err != nil {
		return err
	}
	switch staged.ExitCode {
	case 0:
		return nil // already merged: nothing to commit
	case 1:
	default:
		return failed("diff", staged)
	}
	args := []string{"commit", "-q", "--no-verify", "--no-gpg-sign"}
	if message != "" {
		args = append(args, "-m", message)
	} else {
		args = append(args, "--no-edit") // git's SQUASH_MSG
	}
	_, err = run(ctx, r, repo, guard, args...)
	return err
}

// conflicted handles a merge that failed: with unmerged paths it is
// undone and reported; without, git refused it and that is the error.
func conflicted(ctx context.Context, r Runner, repo string, squash bool, merge Output) (wire.GitMergeResult, error) {
	list, err := run(ctx, r, repo, nil, "diff", "--name-only", "--diff-filter=U", "-z")
	if err != nil {
		return wire.GitMergeResult{}, err
	}
	var paths []string
	for _, p := range strings.Split(list, "\x00") {
		if p != "" && !slices.Contains(paths, p) {
			paths = append(paths, p)
		}
	}
	if len(paths) == 0 {
		return wire.GitMergeResult{}, failed("merge", merge)
	}
	undo := []string{"merge", "--abort"}
	if squash {
		undo = []string{"reset", "-q", "--merge"}
	}
	guard, err := Guard(ctx, r, repo)
	if err != nil {
		return wire.GitMergeResult{}, err
	}
	if _, err := run(ctx, r, repo, guard, undo...); err != nil {
		return wire.GitMergeResult{}, err
	}
	slices.Sort(paths)
	return wire.GitMergeResult{OK: false, Conflicts: paths}, nil
}
