package builtins

import (
	"context"
	"path/filepath"

	"go.starlark.net/starlark"

	"github.com/seed5ad92d46/sous/daemon/wire"
	"github.com/seed5ad92d46/sous/runtime"
)

func gitEntries() []runtime.Entry {
	return []runtime.Entry{
		{Name: "git", Host: true, Sig: "git",
			Doc: "Git repositories on the host, through the daemon (which runs the host's git, with every program a " +
				"repository's config or attributes could name switched off, and refuses a worktree whose .git was " +
				"pointed at a git dir inside it). Paths default to \".\". A relative path is the recipe's: against the " +
				"directory sous runs in when the host is on this machine (the embedded daemon, a unix:// socket); an " +
				"ssh:// or ws:// host's daemon resolves it against its own working directory."},
		{Name: "git.info", Journal: runtime.JournalAnswer, Host: true, Sig: `git.info(path=".") -> struct(is_repo, repo, branch, root, repo_slug, default_branch)`,
			Doc: "Describes the repository at path: branch (\"detached:<sha>\" when detached), root (the top level), " +
				"repo_slug (owner/repo from origin) and default_branch (origin/HEAD's). Outside a repository is_repo " +
				"is False and the strings are empty.",
			Fn: gitInfo},
		{Name: "git.status", Journal: runtime.JournalAnswer, Host: true, Sig: `git.status(path=".") -> struct(is_repo, clean, changes)`,
			Doc: "Whether the work tree is clean; changes lists porcelain lines (\"M a.txt\", \"?? new\").",
			Fn:  gitStatus},
		{Name: "git.branches", Journal: runtime.JournalAnswer, Host: true, Sig: `git.branches(path=".") -> list of strings`,
			Doc: "The local branches, sorted; empty outside a repository.",
			Fn:  gitBranches},
		{Name: "git.worktree_create", Journal: runtime.JournalEffect, Rejoin: true, Host: true,
			Sig: `git.worktree_create(branch, path, *, repo=".", source=None, include=[]) -> struct(path, branch, source_branch, new_branch)`,
			Doc: "Adds a worktree of repo at path on branch. When branch does not exist it is created from source " +
				"(default: repo's current branch): new_branch is True and source_branch says what it started from " +
				"(None for an unborn branch of a repository without commits). When branch exists it is checked out " +
				"and source is not used: new_branch is False and source_branch None. path is the worktree's path as " +
				"sent to the daemon (absolute on this machine). include lists globs of untracked files to copy from " +
				"repo into the worktree (\".env\", \"config/*.local\", relative to repo's top level; modes kept, " +
				"tracked files and .git left alone, a glob that leaves the repository refused, a symlink leading out " +
				"of it not followed); it needs the daemon extension git.worktree_create.include. Fails with the " +
				"daemon's error and errorCode (not_a_repo, worktree_add_failed, worktree_include_failed).",
			Fn: gitWorktreeCreate},
		{Name: "git.worktree_remove", Journal: runtime.JournalEffect, Host: true, Sig: `git.worktree_remove(path, *, repo=".", force=False)`,
			Doc: "Removes the worktree at path from repo. It refuses, deleting nothing, a worktree with uncommitted " +
				"changes (naming them) and a path that is not a worktree of repo. force=True removes it anyway, " +
				"as the daemon's git.worktree_remove does by default. Fails with the daemon's error when it cannot.",
			Fn: gitWorktreeRemove},
	}
}

// gitPath binds the path argument of the queries: what the recipe gave
// (for messages) and what goes to the host (hostPath).
func gitPath(c *runtime.Call) (given, sent string, err error) {
	given = "."
	if err := bind(c, 1, opt("path", str(&given))); err != nil {
		return "", "", err
	}
	sent, err = hostPath(c, given)
	return given, sent, err
}

func gitInfo(c *runtime.Call) (starlark.Value, error) {
	path, sent, err := gitPath(c)
	if err != nil {
		return nil, err
	}
	// Outside a repository the daemon sends fewer fields; they decode as empty.
	var res wire.GitInfoResult
	if err := hostCall(c, path, "git.info", wire.GitParams{Path: sent}, &res); err != nil {
		return nil, err
	}
	return record(starlark.StringDict{
		"is_repo":        starlark.Bool(res.IsRepo),
		"repo":           starlark.String(res.Repo),
		"branch":         starlark.String(res.Branch),
		"root":           starlark.String(res.Root),
		"repo_slug":      starlark.String(res.RepoSlug),
		"default_branch": starlark.String(res.DefaultBranch),
	}), nil
}

func gitStatus(c *runtime.Call) (starlark.Value, error) {
	path, sent, err := gitPath(c)
	if err != nil {
		return nil, err
	}
	var res wire.GitStatusResult
	if err := hostCall(c, path, "git.status", wire.GitParams{Path: sent}, &res); err != nil {
		return nil, err
	}
	return record(starlark.StringDict{
		"is_repo": starlark.Bool(res.IsRepo),
		"clean":   starlark.Bool(res.Clean),
		"changes": stringList(res.Changes),
	}), nil
}

func gitBranches(c *runtime.Call) (starlark.Value, error) {
	path, sent, err := gitPath(c)
	if err != nil {
		return nil, err
	}
	var res wire.GitBranchesResult
	if err := hostCall(c, path, "git.list_branches", wire.GitParams{Path: sent}, &res); err != nil {
		return nil, err
	}
	return stringList(res.Branches), nil
}

func gitWorktreeCreate(c *runtime.Call) (starlark.Value, error) {
	var branch, path, source string
	var include []string
	repo := "."
	if err := bind(c, 2, req("branch", str(&branch)), req("path", str(&path)),
		opt("repo", str(&repo)), opt("source", optStr(&source)), opt("include", strList(&include))); err != nil {
		return nil, err
	}
	params, err := worktreeParams(c, repo, path)
	if err != nil {
		return nil, err
	}
	if len(include) > 0 {
		// A daemon without the extension would ignore include and make
		// the worktree without the files.
		if err := requireFeature(c, wire.FeatureWorktreeCreateInclude, "include"); err != nil {
			return nil, err
		}
	}
	params.BranchName, params.SourceBranch, params.Include = branch, source, include
	if c.Rejoining {
		// The runner died in this call: the worktree may be there.
		if made, err := worktreeMade(c, path, params.WorktreePath, branch); made != nil || err != nil {
			return made, err
		}
	}
	var res wire.WorktreeResult
	err = hostDo(c, path, "git.worktree_create", func(ctx context.Context, d runtime.Daemon) (err error) {
		res, err = d.CreateWorktree(ctx, params)
		return err
	})
	if err != nil {
		return nil, err
	}
	if !res.Success {
		return nil, worktreeFailed(c, path, repo, res)
	}
	// The daemon echoes a source even for a branch it only checked out;
	// source_branch says what the branch was made from, if it was made.
	newBranch, sourceBranch := starlark.Value(starlark.None), starlark.Value(starlark.None)
	if res.NewBranch != nil {
		newBranch = starlark.Bool(*res.NewBranch)
	}
	if res.SourceBranch != "" && (res.NewBranch == nil || *res.NewBranch) {
		sourceBranch = starlark.String(res.SourceBranch)
	}
	return record(starlark.StringDict{
		"path":          starlark.String(res.Path),
		"branch":        starlark.String(branch),
		"source_branch": sourceBranch,
		"new_branch":    newBranch,
	}), nil
}

func gitWorktreeRemove(c *runtime.Call) (starlark.Value, error) {
	var path string
	repo := "."
	force := false
	if err := bind(c, 1, req("path", str(&path)), opt("repo", str(&repo)), opt("force", boolean(&force))); err != nil {
		return nil, err
	}
	params, err := worktreeParams(c, repo, path)
	if err != nil {
		return nil, err
	}
	var res wire.WorktreeResult
	err = hostDo(c, path, "git.worktree_remove", func(ctx context.Context, d runtime.Daemon) (err error) {
		res, err = d.RemoveWorktree(ctx, params, force)
		return err
	})
	if err != nil {
		return nil, err
	}
	switch {
	case res.Success:
		return starlark.None, nil
	case res.ErrorCode == wire.ErrCodeWorktreeDirty:
		return nil, c.Errorf("%s: uncommitted changes that removing it would lose: %s (force=True removes it anyway)",
			path, wire.SummarizeChanges(res.Changes))
	case res.ErrorCode == wire.ErrCodeNotAWorktree:
		return nil, c.Errorf("%s: %s (%s; force=True skips this check)", path, res.Error, res.ErrorCode)
	}
	return nil, worktreeFailed(c, path, repo, res)
}

// worktreeParams are the repository and worktree paths of a worktree
// call, as sent to the host (hostPath).
func worktreeParams(c *runtime.Call, repo, path string) (wire.GitParams, error) {
	sentRepo, err := hostPath(c, repo)
	if err != nil {
		return wire.GitParams{}, err
	}
	sentPath, err := hostPath(c, path)
	if err != nil {
		return wire.GitParams{}, err
	}
	return wire.GitParams{BaseRepo: sentRepo, WorktreePath: sentPath}, nil
}

// worktreeFailed is the error of a worktree call the daemon answered with
// success:false. It names what failed: the repository when that is not one
// (errorCode not_a_repo), else the worktree's path.
func worktreeFailed(c *runtime.Call, path, repo string, res wire.WorktreeResult) error {
	subject := path
	if res.ErrorCode == "not_a_repo" {
		subject = "repo " + repo
	}
	msg := res.Error
	if res.ErrorCode != "" {
		msg += " (" + res.ErrorCode + ")"
	}
	return c.Errorf("%s: %s", subject, msg)
}

func stringList(ss []string) *starlark.List {
	l := make([]starlark.Value, len(ss))
	for i, s := range ss {
		l[i] = starlark.String(s)
	}
	return starlark.NewList(l)
}

// worktreeMade answers a worktree_create that a resumed run does again
// after its runner died in it, when the worktree is there already: at
// sent, on branch. Whether the call made the branch is not known then:
// new_branch and source_branch are None. nil when it is not there.
func worktreeMade(c *runtime.Call, path, sent, branch string) (starlark.Value, error) {
	var res wire.GitInfoResult
	if err := hostCall(c, path, "git.info", wire.GitParams{Path: sent}, &res); err != nil {
		return nil, err
	}
	if !res.IsRepo || res.Branch != branch || filepath.Clean(res.Root) != filepath.Clean(sent) {
		return nil, nil
	}
	return record(starlark.StringDict{
		"path":          starlark.String(sent),
		"branch":        starlark.String(branch),
		"source_branch": starlark.None,
		"new_branch":    starlark.None,
	}), nil
}
