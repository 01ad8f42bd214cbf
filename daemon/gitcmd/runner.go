// Package gitcmd holds the git command lines sous runs for git.diff,
// git.commit, git.merge and git.push, and the settings that harden every
// git it runs (hardening.go). The daemon (daemon/gitops) runs them with its
// own git; against a daemon without those methods, the builtins run the
// same sequences through process.spawn. Both sides take them from here, so
// the commands and the hardening cannot drift apart; the package imports
// nothing of the daemon's server, so the client side may use it.
package gitcmd

import (
	"context"
	"fmt"
	"strings"
)

// Output is what one git run printed and how it exited.
type Output struct {
	Stdout   string
	Stderr   string
	ExitCode int
}

// Runner runs git in dir with Hardening, then config (more -c settings),
// then args. A non-zero exit is an Output, not an error; err is for a git
// that could not run or was cut short (ctx).
type Runner interface {
	Git(ctx context.Context, dir string, config []string, args ...string) (Output, error)
}

// Error is a git that ran and failed: Msg is git's message on one line.
type Error struct {
	Command string // "commit", "merge"
	Msg     string
}

func (e *Error) Error() string { return "git " + e.Command + ": " + e.Msg }

// ArgError is an argument refused before git runs.
type ArgError struct{ Msg string }

func (e *ArgError) Error() string { return e.Msg }

// failed is the Error of out, from git's stderr (stdout when stderr is
// empty: `git commit` says "nothing to commit" there).
func failed(command string, out Output) error {
	msg := oneLine(out.Stderr)
	if msg == "" {
		msg = oneLine(out.Stdout)
	}
	if msg == "" {
		msg = fmt.Sprintf("exit status %d", out.ExitCode)
	}
	return &Error{Command: command, Msg: msg}
}

// oneLine keeps git's fatal: and error: lines when there are any (the
// reason, without the advice around it), else its last non-empty line. An
// error line that ends in ':' keeps the indented lines after it, the list
// it introduces ("would be overwritten by merge: a.txt, b.txt").
func oneLine(text string) string {
	var keep []string
	last := ""
	listing := false
	for _, raw := range strings.Split(text, "\n") {
		l := strings.TrimSpace(raw)
		if l == "" {
			continue
		}
		last = l
		switch {
		case strings.HasPrefix(l, "fatal: ") || strings.HasPrefix(l, "error: "):
			keep = append(keep, l)
			listing = strings.HasSuffix(l, ":")
		case listing && (raw[0] == '\t' || raw[0] == ' '):
			if item := keep[len(keep)-1]; strings.HasSuffix(item, ":") {
				keep[len(keep)-1] = item + " " + l
			} else {
				keep[len(keep)-1] = item + ", " + l
			}
		default:
			listing = false
		}
	}
	if len(keep) > 0 {
		return strings.Join(keep, "; ")
	}
	return last
}

// run runs git and turns a non-zero exit into an Error.
func run(ctx context.Context, r Runner, dir string, config []string, args ...string) (string, error) {
	out, err := r.Git(ctx, dir, config, args...)
	if err != nil {
		return "", err
	}
	if out.ExitCode != 0 {
		return "", failed(args[0], out)
	}
	return out.Stdout, nil
}

// guarded is run with GuardArgs for dir: for the commands that check files
// out or in (filters).
func guarded(ctx context.Context, r Runner, dir string, args ...string) (string, error) {
	guard, err := Guard(ctx, r, dir)
	if err != nil {
		return "", err
	}
	return run(ctx, r, dir, guard, args...)
}

// NoOption refuses a value that git would read as an option: a branch,
// remote or base starting with '-'.
func NoOption(name, value string) error {
	if strings.HasPrefix(value, "-") {
		return &ArgError{Msg: fmt.Sprintf("%s %q starts with '-': git would take it for an option", name, value)}
	}
	return nil
}

// head is the commit HEAD names.
func head(ctx context.Context, r Runner, dir string) (string, error) {
	out, err := run(ctx, r, dir, nil, "rev-parse", "--verify", "-q", "HEAD^{commit}")
	return strings.TrimSpace(out), err
}
