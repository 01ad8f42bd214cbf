package gitops

import (
	"context"
	"errors"
	"fmt"
	"os"
	"sort"
	"strings"

	"github.com/seed5ad92d46/sous/daemon/wire"
)

// runRepo runs git in dir for a read-only query and reports a directory
// that is missing, not a directory, or outside any repository as errNotRepo.
func (g *Git) runRepo(ctx context.Context, dir string, args ...string) (string, error) {
	if err := enterRepo(dir); err != nil {
		return "", err
	}
	out, err := g.run(ctx, dir, args...)
	if err != nil {
		return out, classify(err)
	}
	return out, nil
}

// enterRepo is what is checked before the first git runs in dir for a
// query: errNotRepo for a directory that is missing or not a directory, and
// checkLink's refusal of a .git that git did not make.
func enterRepo(dir string) error {
	if fi, err := os.Stat(dir); err != nil || !fi.IsDir() {
		return errNotRepo
	}
	return checkLink(dir)
}

// Info implements git.info.
//
// repo is the path the caller gave, made absolute against the daemon's
// directory (and cleaned), not the top level: callers that pass a
// subdirectory get it back unchanged, and root carries the top level. For a
// bare repository, or a path inside a .git directory, there is no work tree
// and root is the absolute git directory instead.
//
// Outside a repository (including a path that does not exist or is a file)
// the result is wire.GitInfoNotRepo. A git failure that is not "not a
// repository" (for example git refusing a repository with dubious ownership)
// is returned as an error rather than disguised as a non-repo.
func (g *Git) Info(ctx context.Context, path string) (any, error) {
	dir, err := g.resolve(path)
	if err != nil {
		return nil, err
	}
	root, err := g.root(ctx, dir)
	if errors.Is(err, errNotRepo) {
		return wire.GitInfoNotRepo{IsRepo: false, RepoSlug: "", DefaultBranch: ""}, nil
	}
	if err != nil {
		return nil, fmt.Errorf("git info of %s: %w", dir, err)
	}
	branch, err := g.headBranch(ctx, dir)
	if err != nil {
		return nil, fmt.Errorf("git info of %s: branch: %w", dir, err)
	}
	slug, err := g.originSlug(ctx, dir)
	if err != nil {
		return nil, fmt.Errorf("git info of %s: origin url: %w", dir, err)
	}
	def, err := g.originDefaultBranch(ctx, dir)
	if err != nil {
		return nil, fmt.Errorf("git info of %s: origin HEAD: %w", dir, err)
	}
	return wire.GitInfoResult{
		IsRepo:        true,
		Repo:          dir,
		Branch:        branch,
		Root:          root,
		RepoSlug:      slug,
		DefaultBranch: def,
	}, nil
}

// root is the work tree's top level, or the absolute git dir where there is
// no work tree. The common case costs one git run; only bare repositories pay
// for the second.
func (g *Git) root(ctx context.Context, dir string) (string, error) {
	out, err := g.runRepo(ctx, dir, "rev-parse", "--show-toplevel")
	if err == nil {
		return strings.TrimRight(out, "\n"), nil
	}
	var ge *gitError
	if !errors.As(err, &ge) || !strings.Contains(ge.stderr, "must be run in a work tree") {
		return "", err
	}
	r, err := g.probe(ctx, dir)
	if err != nil {
		return "", err
	}
	return r.gitDir, nil
}

// headBranch is the branch HEAD names, resolved with symbolic-ref so an
// unborn HEAD (no commits yet) still reports its branch, or
// "detached:<short sha>". The full ref is read and "refs/heads/" stripped by
// hand because --short would print "heads/x" when a tag x also exists.
func (g *Git) headBranch(ctx context.Context, dir string) (string, error) {
	out, err := g.run(ctx, dir, "symbolic-ref", "-q", "HEAD")
	if err == nil {
		return strings.TrimPrefix(strings.TrimRight(out, "\n"), "refs/heads/"), nil
	}
	if exitCode(err) != 1 { // 1 is symbolic-ref -q's "HEAD is not symbolic"
		return "", err
	}
	sha, err := g.run(ctx, dir, "rev-parse", "--short", "HEAD")
	if err != nil {
		return "", err
	}
	return "detached:" + strings.TrimRight(sha, "\n"), nil
}

// originSlug is ParseRepoSlug of remote.origin.url, "" when origin has no URL.
// The raw config value is used (not `git remote get-url`, which applies
// url.*.insteadOf rewrites) because the contract names remote.origin.url.
func (g *Git) originSlug(ctx context.Context, dir string) (string, error) {
	out, err := g.run(ctx, dir, "config", "--get", "remote.origin.url")
	if exitCode(err) == 1 { // key not set
		return "", nil
	}
	if err != nil {
		return "", err
	}
	return ParseRepoSlug(strings.TrimRight(out, "\n")), nil
}

// originDefaultBranch is the branch refs/remotes/origin/HEAD points to.
// for-each-ref prints nothing (and succeeds) when the ref is missing or not
// symbolic, which is exactly the "" case.
func (g *Git) originDefaultBranch(ctx context.Context, dir string) (string, error) {
	const prefix = "refs/remotes/origin/"
	out, err := g.run(ctx, dir, "for-each-ref", "--format=%(symref)", "refs/remotes/origin/HEAD")
	if err != nil {
		return "", err
	}
	target := strings.TrimRight(out, "\n")
	if !strings.HasPrefix(target, prefix) {
		return "", nil
	}
	return strings.TrimPrefix(target, prefix), nil
}

// Status implements git.status.
//
// changes are the lines of `git status --porcelain` (v1), the output trimmed
// as a whole, as the contract's example shows: a file modified in the work
// tree only, " M a.txt" from git, reads "M a.txt" when it is the first line
// (["M a.txt","?? new"]), and keeps its leading space further down. The
// columns still tell it from a staged change, "M  a.txt" (two spaces). Paths
// are relative to the top level even when path is a subdirectory, and the
// whole repository is reported, as git does, except for changes inside a
// submodule's own work tree (see statusLines).
//
// Outside a repository the result is {isRepo:false,clean:false}. A bare
// repository has no work tree to report on and git's refusal is returned as
// an error, and so is checkLink's refusal of a .git that git did not make.
func (g *Git) Status(ctx context.Context, path string) (wire.GitStatusResult, error) {
	dir, err := g.resolve(path)
	if err != nil {
		return wire.GitStatusResult{}, err
	}
	out, err := g.statusLines(ctx, dir)
	if errors.Is(err, errNotRepo) {
		return wire.GitStatusResult{IsRepo: false, Clean: false}, nil
	}
	if err != nil {
		return wire.GitStatusResult{}, fmt.Errorf("git status of %s: %w", dir, err)
	}
	changes := splitLines(strings.TrimSpace(out))
	return wire.GitStatusResult{IsRepo: true, Clean: len(changes) == 0, Changes: changes}, nil
}

// statusLines runs `git status --porcelain` in dir as runRepo runs a
// query, with the filter drivers of the repository's config switched off
// (status runs the clean filter of a file whose stat data changed), and
// without looking inside submodules: that takes a git run in each, under
// the submodule's own config (harden.go). A submodule whose commit differs
// is still reported.
func (g *Git) statusLines(ctx context.Context, dir string) (string, error) {
	if err := enterRepo(dir); err != nil {
		return "", err
	}
	out, err := g.runGuarded(ctx, dir, "status", "--porcelain", "--ignore-submodules=dirty")
	if err != nil {
		return out, classify(err)
	}
	return out, nil
}

// splitLines splits git output into lines without trimming them; nil when
// there are none.
func splitLines(out string) []string {
	out = strings.TrimSuffix(out, "\n")
	if out == "" {
		return nil
	}
	return strings.Split(out, "\n")
}

// Branches implements git.list_branches: local branch names, sorted. Outside
// a repository the result is {isRepo:false,branches:[]}; Branches is never nil
// so it marshals as [] rather than null.
func (g *Git) Branches(ctx context.Context, path string) (wire.GitBranchesResult, error) {
	dir, err := g.resolve(path)
	if err != nil {
		return wire.GitBranchesResult{}, err
	}
	const prefix = "refs/heads/"
	// Full refnames, not %(refname:short): short names turn into
	// "heads/x" when a tag or remote shares the name.
	out, err := g.runRepo(ctx, dir, "for-each-ref", "--format=%(refname)", prefix)
	if errors.Is(err, errNotRepo) {
		return wire.GitBranchesResult{IsRepo: false, Branches: []string{}}, nil
	}
	if err != nil {
		return wire.GitBranchesResult{}, fmt.Errorf("git branches of %s: %w", dir, err)
	}
	branches := []string{}
	for _, ref := range splitLines(out) {
		branches = append(branches, strings.TrimPrefix(ref, prefix))
	}
	// for-each-ref already sorts by refname; sorting here states the
	// contract's order in Go rather than relying on git's default.
	sort.Strings(branches)
	return wire.GitBranchesResult{IsRepo: true, Branches: branches}, nil
}
