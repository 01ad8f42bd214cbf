package main

import (
	"bytes"
	"context"
	"errors"
	"log/slog"
	"os/exec"
	"strings"
	"syscall"
	"time"

	"github.com/seed5ad92d46/sous/daemon/envlist"
)

// loginPathTimeout bounds how long the login shell may take to report its
// PATH: a profile that waits for input or the network must not hold the
// daemon's start.
const loginPathTimeout = 3 * time.Second

// daemonChildEnv is the environment a serving daemon's children inherit:
// base (the daemon's own) with, as claustrum's daemon has,
// CLAUDE_SSH_DAEMON_CHILD=1 and, unless loginPath is off, the PATH of the
// user's login shell. A daemon started by systemd, cron or a bare ssh
// command gets a minimal PATH, while the commands users spawn through it
// expect the one their shell gives them (~/.local/bin, /usr/local/go/bin).
func daemonChildEnv(ctx context.Context, base []string, loginPath bool, logger *slog.Logger) []string {
	env := envlist.Set(base, "CLAUDE_SSH_DAEMON_CHILD", "1")
	if !loginPath {
		return env
	}
	if ctx == nil {
		ctx = context.Background()
	}
	shell, _ := envlist.Lookup(base, "SHELL")
	if shell == "" {
		shell = "/bin/sh"
	}
	path, err := loginShellPath(ctx, shell, env)
	if err != nil {
		logger.Warn("keeping the daemon's PATH for its children: the login shell did not report one", "shell", shell, "err", err)
		return env
	}
	if old, _ := envlist.Lookup(env, "PATH"); path != old {
		logger.Info("children get the login shell's PATH", "shell", shell, "path", path)
	}
	return envlist.Set(env, "PATH", path)
}

// loginShellPath runs shell as a login shell and returns the PATH it ends
// up with. The value is fenced by a marker, since profiles may print.
func loginShellPath(ctx context.Context, shell string, env []string) (string, error) {
	const marker = "__SOUS_LOGIN_PATH__="
	ctx, cancel := context.WithTimeout(ctx, loginPathTimeout)
	defer cancel()
	cmd := exec.CommandContext(ctx, shell, "-l", "-c", `printf '\n`+marker+`%s\n' "$PATH"`)
	cmd.Env = env
	// A shell that takes too long gets SIGTERM, its whole group with it,
	// as a shell expects to be stopped: its traps then run. SIGKILL left
	// the lock of a profile's `pyenv rehash` behind, and every later
	// shell of the user waited 60 s for it.
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	cmd.Cancel = func() error { return syscall.Kill(-cmd.Process.Pid, syscall.SIGTERM) }
	cmd.WaitDelay = time.Second // then SIGKILL; nor may a profile's background job hold the pipe open
	out, err := cmd.Output()
	if err != nil {
		return "", err
	}
	i := bytes.LastIndex(out, []byte("\n"+marker))
	if i < 0 {
		return "", errors.New("no PATH in its output")
	}
	path, _, _ := strings.Cut(string(out[i+1+len(marker):]), "\n")
	if path == "" {
		return "", errors.New("an empty PATH in its output")
	}
	return path, nil
}
