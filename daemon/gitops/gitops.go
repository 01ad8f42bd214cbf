// Package gitops implements claustrum's git.* methods (docs/PROTOCOL.md, section
// "git.*") by running the real git binary.
//
// Running git rather than reimplementing it keeps every answer identical to
// what the user sees on the command line (config, worktree metadata, sha256
// repositories all just work). Each call runs git with a clean, predictable
// environment (see gitEnv), with the settings that keep a repository's own
// config from running programs (harden.go), and is bounded by the caller's
// context. A worktree whose .git was pointed at a git dir planted inside it
// is refused (link.go).
//
// Results are the wire types; an *wire.Error return is a JSON-RPC error with
// that code, and any other error is an internal (-32603) error.
package gitops

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"time"

	"github.com/seed5ad92d46/sous/daemon/wire"
)

// Git runs git for the daemon. Dir is the daemon's working directory: the
// default repo for worktree ops when baseRepo is absent, and the base for
// relative paths. An empty Dir means the process's current directory.
type Git struct {
	Dir string
}

// waitDelay bounds how long a cancelled call waits for git's output pipes to
// close. A filter started by git can inherit them and outlive the killed git;
// without the bound, such a grandchild would keep the call from returning.
const waitDelay = time.Second

// errNotRepo reports that a directory is not inside any git repository (or
// does not exist). Methods turn it into their "isRepo":false shape.
var errNotRepo = errors.New("not a git repository")

// gitError is a git invocation that ran and exited non-zero.
type gitError struct {
	args     []string
	exitCode int
	stderr   string // trimmed
}

func (e *gitError) Error() string {
	msg := e.stderr
	if msg == "" {
		msg = fmt.Sprintf("exit status %d", e.exitCode)
	}
	return fmt.Sprintf("git %s: %s", subcommand(e.args), msg)
}

// subcommand names the git command for error messages ("status",
// "worktree add") without repeating every argument: paths can be long and
// git's own message usually quotes the one that matters.
func subcommand(args []string) string {
	switch {
	case len(args) == 0:
		return ""
	case args[0] == "worktree" && len(args) > 1:
		return "worktree " + args[1]
	default:
		return args[0]
	}
}

// exitCode returns git's exit status when err is a gitError, else -1.
func exitCode(err error) int {
	var ge *gitError
	if errors.As(err, &ge) {
		return ge.exitCode
	}
	return -1
}

// gitMessage is the text to show a user for a failed step: git's own stderr
// when git ran, else the error itself.
func gitMessage(err error) string {
	var ge *gitError
	if errors.As(err, &ge) && ge.stderr != "" {
		return ge.stderr
	}
	return err.Error()
}

// base is the absolute directory relative paths resolve against.
func (g *Git) base() (string, error) {
	d := g.Dir
	if d == "" {
		d = "."
	}
	abs, err := filepath.Abs(d)
	if err != nil {
		return "", fmt.Errorf("resolve daemon directory %q: %w", g.Dir, err)
	}
	return abs, nil
}

// resolve makes p absolute against the daemon directory; "" means the daemon
// directory itself.
func (g *Git) resolve(p string) (string, error) {
	b, err := g.base()
	if err != nil {
		return "", err
	}
	if p == "" {
		return b, nil
	}
	if filepath.IsAbs(p) {
		return filepath.Clean(p), nil
	}
	return filepath.Join(b, p), nil
}

// run executes git in dir and returns its stdout. A non-zero exit is a
// *gitError; a cancelled or expired ctx is reported as ctx's error so callers
// never mistake an interrupted git for an answer (for example "not a repo").
func (g *Git) run(ctx context.Context, dir string, args ...string) (string, error) {
	return g.exec(ctx, invocation{dir: dir}, args...)
}

// runEnv is run with extra environment entries and an optional stdin.
func (g *Git) runEnv(ctx context.Context, dir string, extraEnv []string, stdin io.Reader, args ...string) (string, error) {
	return g.exec(ctx, invocation{dir: dir, env: extraEnv, stdin: stdin}, args...)
}

// invocation is how one git runs, besides its arguments.
type invocation struct {
	dir    string
	env    []string  // added to gitEnv's
	stdin  io.Reader // nil: none
	config []string  // -c settings added to hardening's (guardArgs)
}

// exec runs git for run, runEnv and runGuarded.
func (g *Git) exec(ctx context.Context, inv invocation, args ...string) (string, error) {
	if err := ctx.Err(); err != nil {
		return "", fmt.Errorf("git %s: %w", subcommand(args), err)
	}
	// git pages only to a terminal and stdout here is a pipe, so --no-pager
	// and GIT_PAGER=cat are belt and braces (they also beat a pager.<cmd>
	// setting in the user's config). hardening (harden.go) keeps the
	// repository's config from naming programs for git to run.
	argv := make([]string, 0, len(hardening)+len(inv.config)+len(args))
	argv = append(argv, hardening...)
	argv = append(argv, inv.config...)
	argv = append(argv, args...)
	cmd := exec.CommandContext(ctx, "git", argv...)
	dir := inv.dir
	cmd.Dir = dir
	cmd.Env = append(append(gitEnv(os.Environ(), dir), hardenedEnv...), inv.env...)
	cmd.Stdin = inv.stdin
	// git runs commands of its own (`worktree add` a `reset --hard` that
	// checks the files out, the filter drivers of the user's config), and killing git alone when ctx ends
	// (a recipe's Ctrl-C) left them writing into the worktree after sous
	// had exited. So git leads a group of its own, and ending ctx sends
	// the group SIGTERM: git's handlers then clean up after themselves
	// (`worktree add` deletes the half-made worktree), where SIGKILL would
	// leave it registered and locked. What is left once git exits, or is
	// killed WaitDelay later, gets SIGKILL. The group is a new session's,
	// without a terminal: in a background group of the terminal's session,
	// a filter that reads /dev/tty would be stopped (SIGTTIN) and hang the
	// call, where without one its open fails at once.
	cmd.SysProcAttr = &syscall.SysProcAttr{Setsid: true}
	cmd.Cancel = func() error { return syscall.Kill(-cmd.Process.Pid, syscall.SIGTERM) }
	cmd.WaitDelay = waitDelay
	var stdout, stderr bytes.Buffer
	cmd.Stdout = &stdout
	cmd.Stderr = &stderr
	err := cmd.Run()
	if err != nil {
		// Killed because ctx ended: git's exit status means nothing then.
		if ctxErr := ctx.Err(); ctxErr != nil {
			if cmd.Process != nil {
				// git was reaped just now: members left still hold its
				// group's id, so it cannot be someone else's yet.
				syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL)
			}
			return "", fmt.Errorf("git %s: %w", subcommand(args), ctxErr)
		}
		var ee *exec.ExitError
		if errors.As(err, &ee) && ee.Exited() {
			return stdout.String(), &gitError{args: args, exitCode: ee.ExitCode(), stderr: strings.TrimSpace(stderr.String())}
		}
		return "", fmt.Errorf("run git %s in %s: %w", subcommand(args), dir, err)
	}
	return stdout.String(), nil
}

// isRepoLocalEnv reports whether name is one of the variables that point git
// at a particular repository, object store or index (the list
// `git rev-parse --local-env-vars` prints, minus the config ones, plus
// GIT_QUARANTINE_PATH and GIT_NAMESPACE). A daemon started from a git hook
// inherits them, and they would make every call act on the hook's
// repository instead of the requested path.
//
// Config carried in GIT_CONFIG_PARAMETERS / GIT_CONFIG_COUNT is kept on
// purpose: it is how an operator passes settings such as safe.directory to
// the daemon.
func isRepoLocalEnv(name string) bool {
	switch name {
	case "GIT_DIR", "GIT_WORK_TREE", "GIT_INDEX_FILE", "GIT_COMMON_DIR",
		"GIT_OBJECT_DIRECTORY", "GIT_ALTERNATE_OBJECT_DIRECTORIES",
		"GIT_IMPLICIT_WORK_TREE", "GIT_GRAFT_FILE", "GIT_NO_REPLACE_OBJECTS",
		"GIT_REPLACE_REF_BASE", "GIT_PREFIX", "GIT_INTERNAL_SUPER_PREFIX",
		"GIT_SHALLOW_FILE", "GIT_QUARANTINE_PATH", "GIT_NAMESPACE":
		return true
	}
	return false
}

// gitEnv derives git's environment from the daemon's: repository-locating
// variables stripped, output forced to the C locale so messages we match and
// return are stable, no prompts or pagers that could block a daemon forever,
// and no optional locks so a status query never contends with the user's
// own git commands on index.lock. PWD is set to dir because git trusts a
// matching PWD over getcwd and an inherited one would be stale. The
// variables that lead to a daemon (wire.CredentialEnv) are dropped, as for
// every child of the daemon: git runs the repository's hooks.
func gitEnv(environ []string, dir string) []string {
	forced := []string{
		"LC_ALL=C",
		"LANGUAGE=C",
		"GIT_TERMINAL_PROMPT=0",
		"GIT_PAGER=cat",
		"PAGER=cat",
		"GIT_OPTIONAL_LOCKS=0",
		"PWD=" + dir,
	}
	out := make([]string, 0, len(environ)+len(forced))
	for _, kv := range environ {
		name, _, _ := strings.Cut(kv, "=")
		if isRepoLocalEnv(name) || slices.Contains(wire.CredentialEnv, name) {
			continue // the credentials: hooks are the repository's code
		}
		switch name {
		case "LC_ALL", "LANGUAGE", "GIT_TERMINAL_PROMPT", "GIT_PAGER", "PAGER", "GIT_OPTIONAL_LOCKS", "PWD":
			continue // replaced below; duplicates would make the winner platform-dependent
		}
		out = append(out, kv)
	}
	return append(out, forced...)
}

// repo describes the repository around a directory.
type repo struct {
	gitDir    string // absolute per-worktree git dir
	commonDir string // absolute shared git dir (differs from gitDir in a linked worktree)
}

// probe finds the repository around dir. It returns errNotRepo when dir does
// not exist, is not a directory, or git says it is outside any repository;
// other git failures (for example "dubious ownership") are real errors and
// are returned as such rather than being disguised as "not a repo", and so
// is checkLink's refusal of a .git that git did not make.
func (g *Git) probe(ctx context.Context, dir string) (repo, error) {
	if err := enterRepo(dir); err != nil {
		return repo{}, err
	}
	out, err := g.run(ctx, dir, "rev-parse", "--absolute-git-dir", "--git-common-dir")
	if err != nil {
		return repo{}, classify(err)
	}
	gitDir, commonDir, ok := strings.Cut(strings.TrimRight(out, "\n"), "\n")
	if !ok || gitDir == "" || commonDir == "" {
		return repo{}, fmt.Errorf("git rev-parse in %s: unexpected output %q", dir, out)
	}
	// --git-common-dir is relative to dir unless git chose to print it
	// absolute; normalise so callers can compare paths.
	if !filepath.IsAbs(commonDir) {
		commonDir = filepath.Join(dir, commonDir)
	}
	return repo{gitDir: gitDir, commonDir: commonDir}, nil
}

// classify maps git's "not a git repository" failure to errNotRepo and leaves
// every other error alone.
func classify(err error) error {
	var ge *gitError
	if errors.As(err, &ge) && strings.Contains(ge.stderr, "not a git repository") {
		return errNotRepo
	}
	return err
}
