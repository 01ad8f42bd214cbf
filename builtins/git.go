package builtins

import (
	"go.starlark.net/starlark"

	"github.com/seed5ad92d46/sous/daemon/wire"
)

func gitEntries() []Entry {
	return []Entry{
		{Name: "git", Host: true, Sig: "git",
			Doc: "Git repositories on the host, through the daemon (which runs the host's git). " +
				"Paths default to \".\", the daemon's directory."},
		{Name: "git.info", Host: true, Sig: `git.info(path=".") -> struct(is_repo, repo, branch, root, repo_slug, default_branch)`,
			Doc: "Describes the repository at path: branch (\"detached:<sha>\" when detached), root (the top level), " +
				"repo_slug (owner/repo from origin) and default_branch (origin/HEAD's). Outside a repository is_repo " +
				"is False and the strings are empty.",
			Fn: gitInfo},
		{Name: "git.status", Host: true, Sig: `git.status(path=".") -> struct(is_repo, clean, changes)`,
			Doc: "Whether the work tree is clean; changes lists porcelain lines (\"M a.txt\", \"?? new\").",
			Fn:  gitStatus},
		{Name: "git.branches", Host: true, Sig: `git.branches(path=".") -> list of strings`,
			Doc: "The local branches, sorted; empty outside a repository.",
			Fn:  gitBranches},
		{Name: "git.worktree_create", Host: true,
			Sig: `git.worktree_create(branch, path, *, repo=".", source=None) -> struct(path, branch, source_branch)`,
			Doc: "Adds a worktree of repo at path on branch, created from source (default: repo's current branch) " +
				"when it does not exist. Fails with the daemon's error and errorCode (not_a_repo, worktree_add_failed).",
			Fn: gitWorktreeCreate},
		{Name: "git.worktree_remove", Host: true, Sig: `git.worktree_remove(path, *, repo=".")`,
			Doc: "Removes the worktree at path from repo. Fails with the daemon's error when it cannot.",
			Fn:  gitWorktreeRemove},
	}
}

func gitPath(c *Call) (string, error) {
	path := "."
	if err := bind(c, 1, opt("path", str(&path))); err != nil {
		return "", err
	}
	return path, nil
}

func gitInfo(c *Call) (starlark.Value, error) {
	path, err := gitPath(c)
	if err != nil {
		return nil, err
	}
	// Outside a repository the daemon sends fewer fields; they decode as empty.
	var res wire.GitInfoResult
	if err := hostCall(c, path, "git.info", wire.GitParams{Path: path}, &res); err != nil {
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

func gitStatus(c *Call) (starlark.Value, error) {
	path, err := gitPath(c)
	if err != nil {
		return nil, err
	}
	var res wire.GitStatusResult
	if err := hostCall(c, path, "git.status", wire.GitParams{Path: path}, &res); err != nil {
		return nil, err
	}
	return record(starlark.StringDict{
		"is_repo": starlark.Bool(res.IsRepo),
		"clean":   starlark.Bool(res.Clean),
		"changes": stringList(res.Changes),
	}), nil
}

func gitBranches(c *Call) (starlark.Value, error) {
	path, err := gitPath(c)
	if err != nil {
		return nil, err
	}
	var res wire.GitBranchesResult
	if err := hostCall(c, path, "git.list_branches", wire.GitParams{Path: path}, &res); err != nil {
		return nil, err
	}
	return stringList(res.Branches), nil
}

func gitWorktreeCreate(c *Call) (starlark.Value, error) {
	var branch, path, source string
	repo := "."
	if err := bind(c, 2, req("branch", str(&branch)), req("path", str(&path)),
		opt("repo", str(&repo)), opt("source", optStr(&source))); err != nil {
		return nil, err
	}
	var res wire.WorktreeResult
	params := wire.GitParams{BaseRepo: repo, BranchName: branch, WorktreePath: path, SourceBranch: source}
	if err := hostCall(c, path, "git.worktree_create", params, &res); err != nil {
		return nil, err
	}
	if !res.Success {
		return nil, worktreeFailed(c, path, repo, res)
	}
	return record(starlark.StringDict{
		"path":          starlark.String(res.Path),
		"branch":        starlark.String(branch),
		"source_branch": starlark.String(res.SourceBranch),
	}), nil
}

func gitWorktreeRemove(c *Call) (starlark.Value, error) {
	var path string
	repo := "."
	if err := bind(c, 1, req("path", str(&path)), opt("repo", str(&repo))); err != nil {
		return nil, err
	}
	var res wire.WorktreeResult
	if err := hostCall(c, path, "git.worktree_remove", wire.GitParams{BaseRepo: repo, WorktreePath: path}, &res); err != nil {
		return nil, err
	}
	if !res.Success {
		return nil, worktreeFailed(c, path, repo, res)
	}
	return starlark.None, nil
}

// worktreeFailed is the error of a worktree call the daemon answered with
// success:false. It names what failed: the repository when that is not one
// (errorCode not_a_repo), else the worktree's path.
func worktreeFailed(c *Call, path, repo string, res wire.WorktreeResult) error {
	subject := path
	if res.ErrorCode == "not_a_repo" {
		subject = "repo " + repo
	}
	msg := res.Error
	if res.ErrorCode != "" {
		msg += " (" + res.ErrorCode + ")"
	}
	return c.errorf("%s: %s", subject, msg)
}

func stringList(ss []string) *starlark.List {
	l := make([]starlark.Value, len(ss))
	for i, s := range ss {
		l[i] = starlark.String(s)
	}
	return starlark.NewList(l)
}
