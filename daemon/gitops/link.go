package gitops

import (
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
)

// A linked worktree's .git is a file, "gitdir: <repo>/.git/worktrees/<name>",
// and that directory's commondir file names the repository's .git. Both are
// plain files an agent that may write in the worktree can rewrite, pointing
// git at a git dir of its own making, with a config that names programs
// (harden.go switches off those it can). checkLink refuses the shapes git
// never makes itself: a git dir, or a common dir, inside the very worktree
// it serves, and a worktree git dir that is not in its common dir's
// worktrees directory.
//
// A .git directory is a main worktree's, and a .git file without a
// commondir names a submodule's or a --separate-git-dir repository's git
// dir: those have no further link to check. Which repository a worktree
// ought to belong to is only known where the caller names it
// (git.worktree_remove's baseRepo; see linkedTo).

// maxGitFile bounds the read of a .git file; git's own limit is the same
// order (a path and a prefix).
const maxGitFile = 64 << 10

// checkLink refuses dir when the .git git would use for it (dir's, or the
// nearest ancestor's) was not made by git, as above. A directory with no
// .git up to the root (or a bare repository on the way) passes: git decides
// what it is.
func checkLink(dir string) error {
	for d := filepath.Clean(dir); ; {
		dotGit := filepath.Join(d, ".git")
		if _, err := os.Lstat(dotGit); err == nil {
			return checkDotGit(d, dotGit)
		}
		if isBareGitDir(d) {
			return nil
		}
		parent := filepath.Dir(d)
		if parent == d {
			return nil
		}
		d = parent
	}
}

// checkDotGit checks the .git of the work tree top.
func checkDotGit(top, dotGit string) error {
	topReal := samePath(top)
	target := samePath(dotGit) // a symlinked .git is judged by where it leads
	fi, err := os.Stat(dotGit)
	if err != nil {
		return nil // dangling: git fails on its own
	}
	if target != filepath.Join(topReal, ".git") && within(target, topReal) {
		return fmt.Errorf("refusing %s: its .git leads to %s, inside the worktree itself", top, target)
	}
	if fi.IsDir() {
		return nil // a main worktree
	}
	gitDir, ok := readGitFile(dotGit)
	if !ok {
		return nil // not a gitfile: git says so in its words
	}
	gitDir = samePath(gitDir)
	if within(gitDir, topReal) {
		return fmt.Errorf("refusing %s: its .git points to %s, inside the worktree itself; git keeps a worktree's git dir in its repository's .git/worktrees", top, gitDir)
	}
	common, ok := readCommonDir(gitDir)
	if !ok {
		return nil // a submodule's or a separate git dir
	}
	if within(common, topReal) {
		return fmt.Errorf("refusing %s: the commondir of its git dir %s points to %s, inside the worktree itself", top, gitDir, common)
	}
	if filepath.Dir(gitDir) != filepath.Join(common, "worktrees") {
		return fmt.Errorf("refusing %s: its .git points to %s, which is not in the worktrees directory of the repository its commondir names (%s)", top, gitDir, common)
	}
	return nil
}

// linkedTo reports why wt is not a linked worktree of the repository whose
// common git dir is commonDir, judged by its .git file and the commondir
// file it leads to; nil when it is one. It sees a worktree that git's
// registry may have lost (pruned, half written) as well as a registered one
// whose .git was rewritten.
func linkedTo(wt, commonDir string) error {
	gitDir, ok := readGitFile(filepath.Join(wt, ".git"))
	if !ok {
		return fmt.Errorf("'%s' has no .git file naming a worktree of this repository", wt)
	}
	gitDir = samePath(gitDir)
	worktrees := filepath.Join(samePath(commonDir), "worktrees")
	if filepath.Dir(gitDir) != worktrees {
		return fmt.Errorf("'%s' is not a worktree of this repository: its .git points to %s, outside %s", wt, gitDir, worktrees)
	}
	if common, ok := readCommonDir(gitDir); !ok || filepath.Join(common, "worktrees") != worktrees {
		return fmt.Errorf("'%s' is not a worktree of this repository: the commondir of %s points elsewhere", wt, gitDir)
	}
	return nil
}

// readGitFile returns the absolute git dir a .git file names, as git reads
// it: "gitdir: <path>", relative to the file's directory. ok is false when
// dotGit is missing, a directory, or not in that form.
func readGitFile(dotGit string) (gitDir string, ok bool) {
	line, ok := readFirstLine(dotGit)
	if !ok {
		return "", false
	}
	p, ok := strings.CutPrefix(line, "gitdir: ")
	if !ok || p == "" {
		return "", false
	}
	if !filepath.IsAbs(p) {
		p = filepath.Join(filepath.Dir(dotGit), p)
	}
	return filepath.Clean(p), true
}

// readCommonDir returns the canonical common dir a worktree git dir's
// commondir file names (relative to gitDir unless absolute); ok is false
// when there is none.
func readCommonDir(gitDir string) (string, bool) {
	p, ok := readFirstLine(filepath.Join(gitDir, "commondir"))
	if !ok || p == "" {
		return "", false
	}
	if !filepath.IsAbs(p) {
		p = filepath.Join(gitDir, p)
	}
	return samePath(p), true
}

// readFirstLine returns a small regular file's first line without trailing
// whitespace; ok is false when it cannot be read (a directory, missing).
func readFirstLine(path string) (string, bool) {
	f, err := os.Open(path)
	if err != nil {
		return "", false
	}
	defer f.Close()
	if fi, err := f.Stat(); err != nil || !fi.Mode().IsRegular() {
		return "", false
	}
	data, err := io.ReadAll(io.LimitReader(f, maxGitFile))
	if err != nil {
		return "", false
	}
	line, _, _ := strings.Cut(string(data), "\n")
	return strings.TrimRight(line, " \t\r"), true
}

// isBareGitDir reports whether dir looks like a git dir to git's discovery
// (HEAD, objects/ and refs/), which then stops looking further up.
func isBareGitDir(dir string) bool {
	if fi, err := os.Stat(filepath.Join(dir, "HEAD")); err != nil || !fi.Mode().IsRegular() {
		return false
	}
	for _, sub := range []string{"objects", "refs"} {
		if fi, err := os.Stat(filepath.Join(dir, sub)); err != nil || !fi.IsDir() {
			return false
		}
	}
	return true
}

// within reports whether p is root or lies under it; both canonical.
func within(p, root string) bool {
	rel, err := filepath.Rel(root, p)
	return err == nil && rel != ".." && !strings.HasPrefix(rel, ".."+string(filepath.Separator))
}
