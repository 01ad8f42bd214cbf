package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"slices"
	"strings"

	"github.com/spf13/cobra"

	"github.com/seed5ad92d46/sous/daemon/wire"
)

// newCmdWorktree is the git worktree group: create and remove.
func newCmdWorktree(f *Factory) *cobra.Command {
	cmd := &cobra.Command{
		Use:   "worktree",
		Short: "Create or remove git worktrees",
		Example: `  sous git worktree create feature-x /tmp/wt/feature-x --repo /src/app
  sous git worktree remove /tmp/wt/feature-x --repo /src/app`,
	}
	cmd.AddCommand(newCmdWorktreeCreate(f, nil), newCmdWorktreeRemove(f, nil))
	return cmd
}

// WorktreeCreateOptions are the flags and arguments of `sous git worktree
// create BRANCH PATH`.
type WorktreeCreateOptions struct {
	QueryOptions
	Repo   string // a path on the daemon's host ("": its working directory)
	Source string
}

func newCmdWorktreeCreate(f *Factory, runF func(*WorktreeCreateOptions) error) *cobra.Command {
	opts := &WorktreeCreateOptions{QueryOptions: *newQueryOptions(f)}
	cmd := newQueryCmd(&opts.QueryOptions, queryUsage{
		use: "create BRANCH PATH", short: "Create a worktree at PATH on BRANCH (created from --source when new)",
		example: "  sous git worktree create feature-x ../wt/feature-x --source main", nargs: [2]int{2, 2},
	}, func() error {
		if runF != nil {
			return runF(opts)
		}
		return worktreeCreateRun(opts)
	})
	repoFlag(cmd, &opts.Repo)
	cmd.Flags().StringVar(&opts.Source, "source", "", "branch to start a new branch from (default: the repo's current branch); not used when BRANCH exists")
	return cmd
}

func repoFlag(cmd *cobra.Command, repo *string) {
	cmd.Flags().StringVar(repo, "repo", "", "the repository (default: the daemon's working directory)")
}

func worktreeCreateRun(opts *WorktreeCreateOptions) error {
	branch, source := opts.Args[0], opts.Source
	// What the line says of the branch: the daemon's result echoes a
	// source branch even when the branch existed and was only checked out
	// (claustrum's contract), so create asks the daemon to say whether it
	// made the branch (git.worktree_create.newbranch), or a daemon without
	// that extension for its branches beforehand.
	existed := -1 // unknown; 0 no, 1 yes
	return opts.call(func(local bool) query {
		params := map[string]any{"branchName": branch, "worktreePath": pathArg(opts.Args, 1, local)}
		if opts.Repo != "" {
			params["baseRepo"] = hostPath(opts.Repo, local)
		}
		if source != "" {
			params["sourceBranch"] = source
		}
		return query{
			method: "git.worktree_create", params: params, result: &wire.WorktreeResult{},
			before: func(ctx context.Context, c callConn, params map[string]any) error {
				if ok, err := c.HasFeature(ctx, wire.FeatureWorktreeCreateNewBranch); err == nil && ok {
					params["reportNewBranch"] = true
					return nil
				}
				repo, ok := params["baseRepo"].(string)
				if !ok {
					repo = "." // the daemon's working directory, as for create
				}
				var r wire.GitBranchesResult
				if err := c.Call(ctx, "git.list_branches", map[string]any{"path": repo}, &r); err == nil && r.IsRepo {
					existed = 0
					if slices.Contains(r.Branches, branch) {
						existed = 1
					}
				}
				return nil // without an answer, the line just says less
			},
			human: func(w io.Writer, res any) error {
				r := res.(*wire.WorktreeResult)
				if !r.Success {
					return nil
				}
				if r.NewBranch != nil {
					existed = 1
					if *r.NewBranch {
						existed = 0
					}
				}
				switch {
				case existed == 1 && source != "":
					fmt.Fprintf(w, "created %s on existing branch %s (--source %s not used)\n", r.Path, branch, source)
				case existed == 1:
					fmt.Fprintf(w, "created %s on existing branch %s\n", r.Path, branch)
				case existed == 0 && r.SourceBranch != "":
					fmt.Fprintf(w, "created %s on new branch %s from %s\n", r.Path, branch, r.SourceBranch)
				case existed == 0:
					fmt.Fprintf(w, "created %s on new branch %s\n", r.Path, branch) // an orphan: the repo has no commit
				default:
					fmt.Fprintf(w, "created %s on branch %s\n", r.Path, branch)
				}
				return nil
			},
			check: worktreeFailed,
		}
	})
}

// WorktreeRemoveOptions are the flags and argument of `sous git worktree
// remove PATH`.
type WorktreeRemoveOptions struct {
	QueryOptions
	Repo  string // a path on the daemon's host ("": its working directory)
	Force bool
}

func newCmdWorktreeRemove(f *Factory, runF func(*WorktreeRemoveOptions) error) *cobra.Command {
	opts := &WorktreeRemoveOptions{QueryOptions: *newQueryOptions(f)}
	cmd := newQueryCmd(&opts.QueryOptions, queryUsage{
		use: "remove PATH", short: "Remove the worktree at PATH (--force: even with uncommitted changes)",
		example: "  sous git worktree remove ../wt/feature-x\n  sous git worktree remove --force ../wt/experiment", nargs: [2]int{1, 1},
	}, func() error {
		if runF != nil {
			return runF(opts)
		}
		return worktreeRemoveRun(opts)
	})
	repoFlag(cmd, &opts.Repo)
	cmd.Flags().BoolVar(&opts.Force, "force", false, "remove it even when it has uncommitted changes, or is not a worktree git knows")
	return cmd
}

func worktreeRemoveRun(opts *WorktreeRemoveOptions) error {
	return opts.call(func(local bool) query {
		params := map[string]any{"worktreePath": pathArg(opts.Args, 0, local)}
		if opts.Repo != "" {
			params["baseRepo"] = hostPath(opts.Repo, local)
		}
		return query{
			method: "git.worktree_remove", params: params, result: &wire.WorktreeResult{},
			human: func(w io.Writer, res any) error {
				if res.(*wire.WorktreeResult).Success {
					fmt.Fprintln(w, "removed")
				}
				return nil
			},
			check: func(res any) error {
				switch r := res.(*wire.WorktreeResult); r.ErrorCode {
				case wire.ErrCodeWorktreeDirty:
					return dirtyWorktree(r.Changes)
				case wire.ErrCodeNotAWorktree:
					return fmt.Errorf("%s (--force asks the daemon to remove it anyway)", strings.TrimPrefix(r.Error, "git worktree remove failed: "))
				}
				return worktreeFailed(res)
			},
			before: func(ctx context.Context, c callConn, params map[string]any) error {
				if opts.Force {
					return nil
				}
				// The daemon checks, in the same call as the removal
				// (git.worktree_remove.strict); one without the
				// extension is asked beforehand.
				if ok, err := c.HasFeature(ctx, wire.FeatureWorktreeRemoveStrict); err == nil && ok {
					params["strict"] = true
					return nil
				}
				return removable(ctx, c, params["worktreePath"].(string))
			},
		}
	})
}

// worktreeFailed is the failure a worktree result reports.
func worktreeFailed(res any) error {
	r := res.(*wire.WorktreeResult)
	if r.Success {
		return nil
	}
	return fmt.Errorf("%s (%s)", r.Error, r.ErrorCode)
}

// removable refuses, unless --force, to remove a worktree whose changes the
// removal would lose (the protocol's git.worktree_remove forces), and a path
// that is no worktree at all (the protocol lets that pass silently): for a
// daemon without git.worktree_remove.strict, which checks both itself.
func removable(ctx context.Context, c callConn, path string) error {
	var st wire.GitStatusResult
	if err := c.Call(ctx, "git.status", map[string]any{"path": path}, &st); err != nil {
		return fmt.Errorf("git.status: %w", err)
	}
	switch {
	case !st.IsRepo:
		return errors.New("not a git worktree (--force asks the daemon to remove it anyway)")
	case !st.Clean:
		return dirtyWorktree(st.Changes)
	}
	return nil
}

// dirtyWorktree is remove's refusal of a worktree with changes.
func dirtyWorktree(changes []string) error {
	shown := changes[:min(len(changes), 5)]
	more := ""
	if len(changes) > len(shown) {
		more = fmt.Sprintf("\n  ... and %d more", len(changes)-len(shown))
	}
	return fmt.Errorf("uncommitted changes that removing it would lose:\n  %s%s\n(--force removes it anyway)", strings.Join(shown, "\n  "), more)
}
