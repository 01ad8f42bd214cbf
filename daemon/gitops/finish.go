package gitops

import (
	"context"
	"errors"
	"fmt"

	"github.com/seed5ad92d46/sous/daemon/gitcmd"
	"github.com/seed5ad92d46/sous/daemon/wire"
)

// The extension methods git.diff, git.commit, git.merge and git.push run
// the command lines of package gitcmd with the daemon's hardened git, in a
// directory checkLink accepts. Their errors: an argument refused before git
// runs is -32602; a directory outside any repository and a git that failed
// are wire.CodeGitFailed with git's message on one line.

// runner is g as a gitcmd.Runner.
type runner struct{ g *Git }

func (r runner) Git(ctx context.Context, dir string, config []string, args ...string) (gitcmd.Output, error) {
	out, err := r.g.exec(ctx, invocation{dir: dir, config: config}, args...)
	var ge *gitError
	if errors.As(err, &ge) {
		return gitcmd.Output{Stdout: out, Stderr: ge.stderr, ExitCode: ge.exitCode}, nil
	}
	if err != nil {
		return gitcmd.Output{}, err
	}
	return gitcmd.Output{Stdout: out}, nil
}

// inRepo resolves path and checks that it is in a repository whose .git
// git made (probe): outside one, git diff would compare files as
// --no-index.
func (g *Git) inRepo(ctx context.Context, method, path string) (string, error) {
	dir, err := g.resolve(path)
	if err != nil {
		return "", err
	}
	if _, err := g.probe(ctx, dir); err != nil {
		if isCtxErr(err) {
			return "", fmt.Errorf("%s: %w", method, err)
		}
		if errors.Is(err, errNotRepo) {
			return "", wire.Errorf(wire.CodeGitFailed, "%s: %s: not a git repository", method, dir)
		}
		return "", wire.Errorf(wire.CodeGitFailed, "%s: %v", method, err)
	}
	return dir, nil
}

// finishErr maps a gitcmd error to the method's JSON-RPC error.
func finishErr(method string, err error) error {
	var ae *gitcmd.ArgError
	var ge *gitcmd.Error
	switch {
	case errors.As(err, &ae):
		return wire.InvalidParams(method + ": " + ae.Msg)
	case errors.As(err, &ge):
		return wire.Errorf(wire.CodeGitFailed, "%s: %s", method, ge.Error())
	case isCtxErr(err):
		return fmt.Errorf("%s: %w", method, err)
	}
	return wire.Errorf(wire.CodeGitFailed, "%s: %v", method, err)
}

// Diff implements git.diff (gitcmd.Diff).
func (g *Git) Diff(ctx context.Context, p wire.GitDiffParams) (wire.GitDiffResult, error) {
	dir, err := g.inRepo(ctx, "git.diff", p.Path)
	if err != nil {
		return wire.GitDiffResult{}, err
	}
	out, err := gitcmd.Diff(ctx, runner{g}, dir, p.Base, p.Stat)
	if err != nil {
		return wire.GitDiffResult{}, finishErr("git.diff", err)
	}
	return wire.GitDiffResult{Diff: out}, nil
}

// Commit implements git.commit (gitcmd.Commit).
func (g *Git) Commit(ctx context.Context, p wire.GitCommitParams) (wire.GitCommitResult, error) {
	dir, err := g.inRepo(ctx, "git.commit", p.Path)
	if err != nil {
		return wire.GitCommitResult{}, err
	}
	commit, err := gitcmd.Commit(ctx, runner{g}, dir, p.Message, p.All)
	if err != nil {
		return wire.GitCommitResult{}, finishErr("git.commit", err)
	}
	return wire.GitCommitResult{Commit: commit}, nil
}

// Merge implements git.merge (gitcmd.Merge).
func (g *Git) Merge(ctx context.Context, p wire.GitMergeParams) (wire.GitMergeResult, error) {
	dir, err := g.inRepo(ctx, "git.merge", p.Repo)
	if err != nil {
		return wire.GitMergeResult{}, err
	}
	res, err := gitcmd.Merge(ctx, runner{g}, dir, p.Branch, p.Squash, p.Message)
	if err != nil {
		return wire.GitMergeResult{}, finishErr("git.merge", err)
	}
	return res, nil
}

// Push implements git.push (gitcmd.Push).
func (g *Git) Push(ctx context.Context, p wire.GitPushParams) (wire.GitPushResult, error) {
	dir, err := g.inRepo(ctx, "git.push", p.Path)
	if err != nil {
		return wire.GitPushResult{}, err
	}
	res, err := gitcmd.Push(ctx, runner{g}, dir, p.Remote, p.Branch)
	if err != nil {
		return wire.GitPushResult{}, finishErr("git.push", err)
	}
	return res, nil
}
