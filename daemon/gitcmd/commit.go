package gitcmd

import (
	"context"
	"errors"
	"strings"
)

// Commit is git.commit: with all, every change in dir's work tree is staged
// first (git add -A: new, modified and deleted files), else what is staged
// is committed. It returns the new commit's id, and fails with "nothing to
// commit" when nothing is staged. The identity is the repository's: where
// none is configured git's own message says so.
func Commit(ctx context.Context, r Runner, dir, message string, all bool) (string, error) {
	if message == "" {
		return "", &ArgError{Msg: "message is required"}
	}
	if all {
		if _, err := guarded(ctx, r, dir, "add", "-A"); err != nil {
			return "", err
		}
	}
	// diff --cached --quiet exits 1 when something is staged (on an unborn
	// branch, against the empty tree).
	out, err := r.Git(ctx, dir, nil, "diff", "--cached", "--quiet", "--no-ext-diff")
	if err != nil {
		return "", err
	}
	switch out.ExitCode {
	case 0:
		msg := "nothing to commit"
		if !all {
			msg += " (nothing is staged; all=True stages every change)"
		}
		return "", &Error{Command: "commit", Msg: msg}
	case 1:
	default:
		return "", failed("diff", out)
	}
	if _, err := guarded(ctx, r, dir, "commit", "-q", "--no-verify", "--no-gpg-sign", "-m", message); err != nil {
		return "", err
	}
	return head(ctx, r, dir)
}

// IsNothingToCommit reports whether err is Commit's "nothing to commit".
func IsNothingToCommit(err error) bool {
	var e *Error
	return errors.As(err, &e) && e.Command == "commit" && strings.HasPrefix(e.Msg, "nothing to commit")
}
