package gitops

import (
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path"
	"strings"

	"github.com/seed5ad92d46/sous/daemon/wire"
)

// The git.worktree_create.include extension copies untracked files (a
// .env, config/*.local) from the repository into the new worktree: files a
// checkout cannot bring. The globs are relative to the repository's top
// level and may not leave it (no "..", not absolute, not into .git). Both
// sides are opened as an os.Root, so no symlink, in the repository or in
// the checkout, leads a read or a write outside its tree. A matched symlink
// is copied as a link when it leads to somewhere inside the repository,
// and refused otherwise. Tracked files are the checkout's and are left
// alone, and so is everything under .git.

// checkIncludes refuses a glob that is malformed or leaves the repository.
func checkIncludes(globs []string) error {
	for _, g := range globs {
		clean := strings.TrimPrefix(g, "./")
		switch {
		case g == "":
			return fmt.Errorf("include: an empty glob")
		case strings.HasPrefix(g, "/"):
			return fmt.Errorf("include: %q is absolute: globs are relative to the repository's top level", g)
		case !fs.ValidPath(clean) || clean == ".":
			return fmt.Errorf("include: %q leaves the repository or is not a clean relative path (no \"..\", no \".\" or empty elements)", g)
		case clean == ".git" || strings.HasPrefix(clean, ".git/"):
			return fmt.Errorf("include: %q is inside .git", g)
		}
		if _, err := path.Match(clean, ""); err != nil {
			return fmt.Errorf("include: %q: %w", g, err)
		}
	}
	return nil
}

// copyIncludes copies what globs match in the repository whose top level
// is top into the worktree at wt. tracked are the paths git tracks.
func copyIncludes(globs []string, top, wt string, tracked map[string]bool) error {
	src, err := os.OpenRoot(top)
	if err != nil {
		return fmt.Errorf("include: open the repository: %w", err)
	}
	defer src.Close()
	dst, err := os.OpenRoot(wt)
	if err != nil {
		return fmt.Errorf("include: open the worktree: %w", err)
	}
	defer dst.Close()
	c := includeCopy{src: src, dst: dst, tracked: tracked}
	for _, g := range globs {
		matches, err := fs.Glob(src.FS(), strings.TrimPrefix(g, "./"))
		if err != nil {
			return fmt.Errorf("include: %q: %w", g, err)
		}
		for _, m := range matches {
			if err := c.copy(m); err != nil {
				return fmt.Errorf("include: %s: %w", m, err)
			}
		}
	}
	return nil
}

type includeCopy struct {
	src, dst *os.Root
	tracked  map[string]bool
}

// copy copies rel (a file, a directory and what is in it, or a symlink).
func (c includeCopy) copy(rel string) error {
	if rel == ".git" || strings.HasPrefix(rel, ".git/") || c.tracked[rel] {
		return nil
	}
	fi, err := c.src.Lstat(rel)
	if err != nil {
		return err
	}
	if err := c.dst.MkdirAll(path.Dir(rel), 0o755); err != nil {
		return err
	}
	switch mode := fi.Mode(); {
	case mode&fs.ModeSymlink != 0:
		return c.link(rel)
	case mode.IsDir():
		return c.dir(rel, mode.Perm())
	case mode.IsRegular():
		return c.file(rel, mode.Perm())
	default:
		return fmt.Errorf("not a regular file, directory or symlink (%s)", mode.Type())
	}
}

func (c includeCopy) link(rel string) error {
	target, err := c.src.Readlink(rel)
	if err != nil {
		return err
	}
	// Root.Stat follows the link, and fails when it leads out of the
	// repository.
	if _, err := c.src.Stat(rel); err != nil {
		return fmt.Errorf("a symlink to %s, which is not inside the repository: not copied", target)
	}
	if err := c.dst.Remove(rel); err != nil && !errors.Is(err, fs.ErrNotExist) {
		return err
	}
	return c.dst.Symlink(target, rel)
}

func (c includeCopy) dir(rel string, perm fs.FileMode) error {
	if err := c.dst.Mkdir(rel, perm|0o700); err != nil && !errors.Is(err, fs.ErrExist) {
		return err
	}
	entries, err := fs.ReadDir(c.src.FS(), rel)
	if err != nil {
		return err
	}
	for _, e := range entries {
		if err := c.copy(path.Join(rel, e.Name())); err != nil {
			return err
		}
	}
	return c.dst.Chmod(rel, perm)
}

func (c includeCopy) file(rel string, perm fs.FileMode) error {
	in, err := c.src.Open(rel)
	if err != nil {
		return err
	}
	defer in.Close()
	// An untracked file is not in the checkout, but a name the checkout
	// has as a symlink (an untracked file shadowed) is replaced, not
	// written through.
	if err := c.dst.Remove(rel); err != nil && !errors.Is(err, fs.ErrNotExist) {
		return err
	}
	out, err := c.dst.OpenFile(rel, os.O_WRONLY|os.O_CREATE|os.O_EXCL, perm)
	if err != nil {
		return err
	}
	if _, err := io.Copy(out, in); err != nil {
		out.Close()
		return err
	}
	if err := out.Close(); err != nil {
		return err
	}
	return c.dst.Chmod(rel, perm) // the umask does not apply to a copy
}

// trackedPaths are the paths git tracks in the repository at top.
func (g *Git) trackedPaths(ctx context.Context, top string) (map[string]bool, error) {
	out, err := g.run(ctx, top, "ls-files", "-z", "--cached")
	if err != nil {
		return nil, err
	}
	set := map[string]bool{}
	for _, p := range strings.Split(out, "\x00") {
		if p != "" {
			set[p] = true
		}
	}
	return set, nil
}

// includeInto copies p.Include into the worktree just added at wt, for
// WorktreeCreate.
func (g *Git) includeInto(ctx context.Context, repoDir, wt string, include []string) error {
	top, err := g.run(ctx, repoDir, "rev-parse", "--show-toplevel")
	if err != nil {
		return fmt.Errorf("include: %w", err)
	}
	top = strings.TrimRight(top, "\n")
	tracked, err := g.trackedPaths(ctx, top)
	if err != nil {
		return fmt.Errorf("include: %w", err)
	}
	return copyIncludes(include, top, wt, tracked)
}

// ErrCodeIncludeFailed is the errorCode of a git.worktree_create whose
// include could not be copied; the worktree (and a branch it created) is
// removed again.
const ErrCodeIncludeFailed = "worktree_include_failed"

func includeFailed(err error) wire.WorktreeResult {
	return wire.WorktreeResult{Success: false, Error: err.Error(), ErrorCode: ErrCodeIncludeFailed}
}
