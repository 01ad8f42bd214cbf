package main

import (
	"errors"
	"fmt"
	"io"
	"strings"
	"text/tabwriter"

	"github.com/spf13/cobra"

	"github.com/seed5ad92d46/sous/daemon/wire"
)

// newCmdGit is the git group: info, status, branches and worktree.
func newCmdGit(f *Factory) *cobra.Command {
	cmd := &cobra.Command{
		Use:   "git",
		Short: "Query repositories and manage worktrees on a daemon's host",
		Example: `  sous git info
  sous git worktree create feature-x ../wt/feature-x --source main
  sous git status --remote ssh://build /src/app --json`,
	}
	cmd.AddCommand(
		newCmdGitInfo(f, nil),
		newCmdGitStatus(f, nil),
		newCmdGitBranches(f, nil),
		newCmdWorktree(f),
	)
	return cmd
}

func newCmdGitInfo(f *Factory, runF func(*QueryOptions) error) *cobra.Command {
	opts := newQueryOptions(f)
	return newQueryCmd(opts, queryUsage{
		use: "info [PATH]", short: "Branch, root, origin slug and default branch of a repository",
		example: "  sous git info\n  sous git info /src/app --json", nargs: [2]int{0, 1},
	}, func() error {
		if runF != nil {
			return runF(opts)
		}
		return gitInfoRun(opts)
	})
}

func gitInfoRun(opts *QueryOptions) error {
	return opts.call(func(local bool) query {
		return query{
			method: "git.info", params: map[string]any{"path": pathArg(opts.Args, 0, local)},
			result: &wire.GitInfoResult{},
			human: func(w io.Writer, res any) error {
				r := res.(*wire.GitInfoResult)
				if !r.IsRepo {
					return nil // check says so
				}
				tw := tabwriter.NewWriter(w, 2, 4, 2, ' ', 0)
				fmt.Fprintf(tw, "root\t%s\nbranch\t%s\nslug\t%s\ndefault branch\t%s\n", r.Root, r.Branch, dash(r.RepoSlug), dash(r.DefaultBranch))
				return tw.Flush()
			},
			check: func(res any) error { return notARepo(res.(*wire.GitInfoResult).IsRepo) },
		}
	})
}

func newCmdGitStatus(f *Factory, runF func(*QueryOptions) error) *cobra.Command {
	opts := newQueryOptions(f)
	return newQueryCmd(opts, queryUsage{
		use: "status [PATH]", short: "Whether a repository is clean, and its changes",
		example: "  sous git status\n  sous git status /src/app --json", nargs: [2]int{0, 1},
	}, func() error {
		if runF != nil {
			return runF(opts)
		}
		return gitStatusRun(opts)
	})
}

func gitStatusRun(opts *QueryOptions) error {
	return opts.call(func(local bool) query {
		return query{
			method: "git.status", params: map[string]any{"path": pathArg(opts.Args, 0, local)},
			result: &wire.GitStatusResult{},
			human: func(w io.Writer, res any) error {
				r := res.(*wire.GitStatusResult)
				switch {
				case !r.IsRepo:
					return nil // check says so
				case r.Clean:
					_, err := fmt.Fprintln(w, "clean")
					return err
				}
				_, err := fmt.Fprintln(w, strings.Join(r.Changes, "\n"))
				return err
			},
			check: func(res any) error { return notARepo(res.(*wire.GitStatusResult).IsRepo) },
		}
	})
}

func newCmdGitBranches(f *Factory, runF func(*QueryOptions) error) *cobra.Command {
	opts := newQueryOptions(f)
	return newQueryCmd(opts, queryUsage{
		use: "branches [PATH]", short: "Local branches of a repository, sorted",
		example: "  sous git branches", nargs: [2]int{0, 1},
	}, func() error {
		if runF != nil {
			return runF(opts)
		}
		return gitBranchesRun(opts)
	})
}

func gitBranchesRun(opts *QueryOptions) error {
	return opts.call(func(local bool) query {
		return query{
			method: "git.list_branches", params: map[string]any{"path": pathArg(opts.Args, 0, local)},
			result: &wire.GitBranchesResult{},
			human: func(w io.Writer, res any) error {
				for _, b := range res.(*wire.GitBranchesResult).Branches {
					fmt.Fprintln(w, b)
				}
				return nil
			},
			check: func(res any) error { return notARepo(res.(*wire.GitBranchesResult).IsRepo) },
		}
	})
}

// notARepo is the failure of a git query outside a repository (exit 1, as
// files stat of a missing path).
func notARepo(isRepo bool) error {
	if isRepo {
		return nil
	}
	return errors.New("not a git repository (nor inside one)")
}

func dash(s string) string {
	if s == "" {
		return "-"
	}
	return s
}
