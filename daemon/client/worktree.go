package client

import (
	"context"
	"fmt"
	"slices"

	"github.com/seed5ad92d46/sous/daemon/wire"
)

// CreateWorktree is git.worktree_create that also tells whether it created
// p.BranchName: the result's NewBranch is the daemon's own answer where it
// has the git.worktree_create.newbranch extension, else what
// git.list_branches said of the repository just before (a branch made by
// someone else in between is then taken for new), and nil when neither
// could tell.
func (c *Client) CreateWorktree(ctx context.Context, p wire.GitParams) (wire.WorktreeResult, error) {
	native, err := c.HasFeature(ctx, wire.FeatureWorktreeCreateNewBranch)
	if err != nil {
		return wire.WorktreeResult{}, err
	}
	var existed *bool
	if native {
		p.ReportNewBranch = true
	} else {
		// The repository is baseRepo, or the daemon's directory when it is
		// empty: list_branches resolves an empty path the same way.
		var br wire.GitBranchesResult
		if err := c.Call(ctx, "git.list_branches", wire.GitParams{Path: p.BaseRepo}, &br); err == nil && br.IsRepo {
			e := slices.Contains(br.Branches, p.BranchName)
			existed = &e
		}
	}
	var res wire.WorktreeResult
	if err := c.Call(ctx, "git.worktree_create", p, &res); err != nil {
		return wire.WorktreeResult{}, err
	}
	if res.Success && !native && existed != nil {
		created := !*existed
		res.NewBranch = &created
	}
	return res, nil
}

// RemoveWorktree is git.worktree_remove. With force it is the protocol's
// lenient remove. Without, it removes only a linked worktree of p.BaseRepo
// with nothing to lose: the daemon checks with the
// git.worktree_remove.strict extension; a daemon without it is asked
// git.status of the path first, and a path that is no worktree, or one with
// changes, is refused here with the result the extension would give
// (errorCode not_a_worktree, or worktree_dirty with changes). That check
// and the removal are then two calls: a change made in between is lost.
func (c *Client) RemoveWorktree(ctx context.Context, p wire.GitParams, force bool) (wire.WorktreeResult, error) {
	if !force {
		native, err := c.HasFeature(ctx, wire.FeatureWorktreeRemoveStrict)
		if err != nil {
			return wire.WorktreeResult{}, err
		}
		if native {
			p.Strict = true
		} else if refusal, err := c.removable(ctx, p.WorktreePath); err != nil || refusal != nil {
			if err != nil {
				return wire.WorktreeResult{}, err
			}
			return *refusal, nil
		}
	}
	var res wire.WorktreeResult
	if err := c.Call(ctx, "git.worktree_remove", p, &res); err != nil {
		return wire.WorktreeResult{}, err
	}
	return res, nil
}

// removable is RemoveWorktree's check on a daemon without the strict
// extension: the refusal, or nil when path is a clean git work tree.
func (c *Client) removable(ctx context.Context, path string) (*wire.WorktreeResult, error) {
	var st wire.GitStatusResult
	if err := c.Call(ctx, "git.status", wire.GitParams{Path: path}, &st); err != nil {
		return nil, fmt.Errorf("git.status: %w", err)
	}
	switch {
	case !st.IsRepo:
		return &wire.WorktreeResult{
			Error:     fmt.Sprintf("git worktree remove failed: '%s' is not a git worktree", path),
			ErrorCode: wire.ErrCodeNotAWorktree,
		}, nil
	case !st.Clean:
		return &wire.WorktreeResult{
			Error:     fmt.Sprintf("git worktree remove failed: '%s' has uncommitted changes: %s", path, wire.SummarizeChanges(st.Changes)),
			ErrorCode: wire.ErrCodeWorktreeDirty,
			Changes:   st.Changes,
		}, nil
	}
	return nil, nil
}
