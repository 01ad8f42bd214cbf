package main

import (
	"context"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"testing"

	"github.com/seed5ad92d46/sous/internal/envlist"
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
