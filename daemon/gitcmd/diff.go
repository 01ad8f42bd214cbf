package gitcmd

import "context"

// Diff is git.diff: the work tree of dir against base (HEAD when empty),
// committed and uncommitted changes alike, or the --stat summary of it.
// Untracked files are not in it (git diff's own rule). External diff
// drivers and textconv are off: they are programs the repository's config
// and attributes name.
func Diff(ctx context.Context, r Runner, dir, base string, stat bool) (string, error) {
	if base == "" {
		base = "HEAD"
	}
	if err := NoOption("base", base); err != nil {
		return "", err
	}
	args := []string{"diff", "--no-ext-diff", "--no-textconv", "--no-color"}
	if stat {
		args = append(args, "--stat")
	}
	args = append(args, base, "--")
	// The work tree side runs the clean filters of files whose stat data
	// changed: guarded switches off the repository's own.
	return guarded(ctx, r, dir, args...)
}
