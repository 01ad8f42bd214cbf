package main

import (
	"context"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/seed5ad92d46/sous/daemon/envlist"
	"github.com/seed5ad92d46/sous/internal/testutil"
)

// The daemon's children get the login shell's PATH, found behind a marker
// whatever the profile prints, and CLAUDE_SSH_DAEMON_CHILD=1; a shell that
// fails leaves the daemon's PATH, and --login-path=false skips the shell.
func TestDaemonChildEnv(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	shell := func(name, script string) string {
		p := filepath.Join(dir, name)
		if err := os.WriteFile(p, []byte("#!/bin/sh\n"+script), 0o755); err != nil {
			t.Fatal(err)
		}
		return p
	}
	// A login shell whose profile talks and extends PATH, then runs -c.
	chatty := shell("chatty", `echo "Welcome to the machine"; echo "PATH=/not/this"; PATH=/from/profile:$PATH; export PATH; shift; exec /bin/sh -c "$2"`)
	failing := shell("failing", `exit 3`)
	quiet := slog.New(slog.NewTextHandler(io.Discard, nil))
	base := []string{"HOME=/root", "PATH=/usr/bin:/bin", "CLAUDE_SSH_DAEMON_CHILD=0"}
	for _, tt := range []struct {
		name      string
		shell     string
		loginPath bool
		wantPath  string
	}{
		{"login shell", chatty, true, "/from/profile:/usr/bin:/bin"},
		{"failing shell", failing, true, "/usr/bin:/bin"},
		{"off", chatty, false, "/usr/bin:/bin"},
	} {
		env := daemonChildEnv(context.Background(), append(base, "SHELL="+tt.shell), tt.loginPath, quiet)
		if got, _ := envlist.Lookup(env, "PATH"); got != tt.wantPath {
			t.Errorf("%s: PATH %q, want %q", tt.name, got, tt.wantPath)
		}
		if got, _ := envlist.Lookup(env, "CLAUDE_SSH_DAEMON_CHILD"); got != "1" {
			t.Errorf("%s: CLAUDE_SSH_DAEMON_CHILD %q", tt.name, got)
		}
		n := 0
		for _, kv := range env {
			if len(kv) > 5 && kv[:5] == "PATH=" {
				n++
			}
		}
		if n != 1 {
			t.Errorf("%s: %d PATH entries in %q", tt.name, n, env)
		}
	}
}

// A login shell that outlives loginPathTimeout is stopped as a shell
// expects to be, with SIGTERM to its whole group, so that the profile's
// traps run: SIGKILL left the lock of a profile's `pyenv rehash`
// (~/.pyenv/shims/.pyenv-shim) behind, and every later shell of the user
// then waited 60 s for it. What the profile started goes too.
func TestDaemonChildEnvSlowShellCleansUp(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	lock, child := filepath.Join(dir, "lock"), filepath.Join(dir, "child.pid")
	slow := filepath.Join(dir, "slow")
	script := "#!/bin/bash\n" +
		"echo held > " + lock + "\n" +
		"trap 'rm -f " + lock + "' EXIT\n" +
		"sleep 60 & echo $! > " + child + "\n" +
		"wait\n"
	if err := os.WriteFile(slow, []byte(script), 0o755); err != nil {
		t.Fatal(err)
	}
	var log strings.Builder
	start := time.Now()
	env := daemonChildEnv(context.Background(), []string{"PATH=/usr/bin:/bin", "SHELL=" + slow}, true, slog.New(slog.NewTextHandler(&log, nil)))
	if got, _ := envlist.Lookup(env, "PATH"); got != "/usr/bin:/bin" {
		t.Errorf("PATH %q after a shell that never answered", got)
	}
	if took := time.Since(start); took > loginPathTimeout+3*time.Second {
		t.Errorf("took %s", took)
	}
	if !strings.Contains(log.String(), "the login shell did not report one") {
		t.Errorf("log: %s", log.String())
	}
	if _, err := os.Stat(lock); err == nil {
		t.Error("the shell's EXIT trap did not run: its lock is left behind")
	}
	b, err := os.ReadFile(child)
	if err != nil {
		t.Fatal(err)
	}
	pid, _ := strconv.Atoi(strings.TrimSpace(string(b)))
	for deadline := time.Now().Add(5 * time.Second); testutil.Alive(pid); time.Sleep(20 * time.Millisecond) {
		if time.Now().After(deadline) {
			syscall.Kill(pid, syscall.SIGKILL)
			t.Fatal("what the profile started runs on")
		}
	}
}
