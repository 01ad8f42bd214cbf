package builtins

import (
	"context"
	"time"

	"go.starlark.net/starlark"

	"github.com/seed5ad92d46/sous/daemon/gitcmd"
	"github.com/seed5ad92d46/sous/daemon/wire"
	"github.com/seed5ad92d46/sous/runtime"
)

// gitKillWait bounds the stop of a fallback git whose call was interrupted.
const gitKillWait = 3 * time.Second

func gitFinishEntries() []runtime.Entry {
	return []runtime.Entry{
		{Name: "git.diff", Journal: runtime.JournalAnswer, Host: true, Sig: `git.diff(path=".", *, base=None, stat=False) -> string`,
			Doc: "The work tree at path against base (default HEAD): committed and uncommitted changes alike, as a " +
				"patch, or git diff --stat's summary with stat=True. Untracked files are not in it (git add them, or " +
				"commit with all=True, first).",
			Fn: gitDiff},
		{Name: "git.commit", Journal: runtime.JournalEffect, Host: true, Sig: `git.commit(path, message, *, all=True) -> string`,
			Doc: "Commits the worktree at path and returns the new commit's id. all=True stages every change first " +
				"(new, modified and deleted files: git add -A); all=False commits what is staged. Fails when there is " +
				"nothing to commit, and with git's message when the repository has no identity (user.name, " +
				"user.email) configured. Hooks do not run.",
			Fn: gitCommit},
		{Name: "git.merge", Journal: runtime.JournalEffect, Host: true, Sig: `git.merge(branch, *, repo=".", squash=False, message=None) -> struct(ok, commit, conflicts)`,
			Doc: "Merges branch into the branch checked out in repo: a fast-forward or a merge commit, or with " +
				"squash=True one new commit of branch's changes (message, else git's). ok is True and commit the new " +
				"HEAD on success. A merge that stops on conflicts is aborted, leaving repo as it was: ok is False, " +
				"commit None and conflicts the paths. Other failures (an unknown branch, local changes in the way) fail.",
			Fn: gitMerge},
		{Name: "git.push", Journal: runtime.JournalEffect, Host: true, Sig: `git.push(path=".", *, remote="origin", branch=None)`,
			Doc: "Pushes branch (default: the one checked out at path) to the branch of the same name on remote. " +
				"Transports file, ssh and https only (not ext::); credential helpers do not run, so https needs " +
				"credentials in the URL or none. The pre-push hook does not run.",
			Fn: gitPush},
	}
}

// gitFinishDo runs the method on the host when its daemon has it, else the
// same command lines through process.spawn (gitspawn.go). subject names
// the path in errors.
func gitFinishDo(c *runtime.Call, subject, method string, native func(ctx context.Context, d runtime.Daemon) error,
	fallback func(ctx context.Context, r gitcmd.Runner) error) error {
	return hostDo(c, subject, method, func(ctx context.Context, d runtime.Daemon) error {
		has, err := d.HasFeature(ctx, method) // each method is a feature of its own name
		if err != nil {
			return err
		}
		if has {
			return native(ctx, d)
		}
		return fallback(ctx, spawnGit{d})
	})
}

func gitDiff(c *runtime.Call) (starlark.Value, error) {
	path, base, stat := ".", "", false
	if err := bind(c, 1, opt("path", str(&path)), opt("base", optStr(&base)), opt("stat", boolean(&stat))); err != nil {
		return nil, err
	}
	sent, err := hostPath(c, path)
	if err != nil {
		return nil, err
	}
	var diff string
	err = gitFinishDo(c, path, wire.FeatureGitDiff,
		func(ctx context.Context, d runtime.Daemon) error {
			var res wire.GitDiffResult
			err := d.Call(ctx, "git.diff", wire.GitDiffParams{Path: sent, Base: base, Stat: stat}, &res)
			diff = res.Diff
			return err
		},
		func(ctx context.Context, r gitcmd.Runner) (err error) {
			diff, err = gitcmd.Diff(ctx, r, sent, base, stat)
			return err
		})
	if err != nil {
		return nil, err
	}
	return starlark.String(diff), nil
}

func gitCommit(c *runtime.Call) (starlark.Value, error) {
	var path, message string
	all := true
	if err := bind(c, 2, req("path", str(&path)), req("message", str(&message)), opt("all", boolean(&all))); err != nil {
		return nil, err
	}
	sent, err := hostPath(c, path)
	if err != nil {
		return nil, err
	}
	var commit string
	err = gitFinishDo(c, path, wire.FeatureGitCommit,
		func(ctx context.Context, d runtime.Daemon) error {
			var res wire.GitCommitResult
			err := d.Call(ctx, "git.commit", wire.GitCommitParams{Path: sent, Message: message, All: all}, &res)
			commit = res.Commit
			return err
		},
		func(ctx context.Context, r gitcmd.Runner) (err error) {
			commit, err = gitcmd.Commit(ctx, r, sent, message, all)
			return err
		})
	if err != nil {
		return nil, err
	}
	return starlark.String(commit), nil
}

func gitMerge(c *runtime.Call) (starlark.Value, error) {
	var branch, message string
	repo, squash := ".", false
	if err := bind(c, 1, req("branch", str(&branch)), opt("repo", str(&repo)), opt("squash", boolean(&squash)),
		opt("message", optStr(&message))); err != nil {
		return nil, err
	}
	sent, err := hostPath(c, repo)
	if err != nil {
		return nil, err
	}
	var res wire.GitMergeResult
	err = gitFinishDo(c, "repo "+repo, wire.FeatureGitMerge,
		func(ctx context.Context, d runtime.Daemon) error {
			return d.Call(ctx, "git.merge", wire.GitMergeParams{Repo: sent, Branch: branch, Squash: squash, Message: message}, &res)
		},
		func(ctx context.Context, r gitcmd.Runner) (err error) {
			res, err = gitcmd.Merge(ctx, r, sent, branch, squash, message)
			return err
		})
	if err != nil {
		return nil, err
	}
	commit := starlark.Value(starlark.None)
	if res.OK {
		commit = starlark.String(res.Commit)
	}
	return record(starlark.StringDict{
		"ok":        starlark.Bool(res.OK),
		"commit":    commit,
		"conflicts": stringList(res.Conflicts),
	}), nil
}

func gitPush(c *runtime.Call) (starlark.Value, error) {
	path, remote, branch := ".", "origin", ""
	if err := bind(c, 1, opt("path", str(&path)), opt("remote", str(&remote)), opt("branch", optStr(&branch))); err != nil {
		return nil, err
	}
	sent, err := hostPath(c, path)
	if err != nil {
		return nil, err
	}
	err = gitFinishDo(c, path, wire.FeatureGitPush,
		func(ctx context.Context, d runtime.Daemon) error {
			var res wire.GitPushResult
			return d.Call(ctx, "git.push", wire.GitPushParams{Path: sent, Remote: remote, Branch: branch}, &res)
		},
		func(ctx context.Context, r gitcmd.Runner) error {
			_, err := gitcmd.Push(ctx, r, sent, remote, branch)
			return err
		})
	if err != nil {
		return nil, err
	}
	return starlark.None, nil
}
