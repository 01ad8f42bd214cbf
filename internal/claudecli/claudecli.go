// Package claudecli finds (or installs) the real Claude Code CLI for tests.
//
// The CLI comes from npm (@anthropic-ai/claude-code) into a cache outside the
// repository: $SOUS_CLAUDE_DIR if set, else <user cache dir>/sous-test. Each
// version lives in its own prefix, claude-<version> (claude-latest for the
// "latest" tag), so several versions sit side by side:
//
//	npm install --prefix ~/.cache/sous-test/claude-2.1.81 @anthropic-ai/claude-code@2.1.81
//
// CI installs them up front; on a developer machine the first test run
// installs what is missing (one install at a time, across test processes).
// claude-latest is whatever npm's latest was when it was installed: remove
// the directory to move to a newer release.
// Tests skip with a message saying what is missing when node or npm are not
// on PATH or the install fails.
//
// Version 2.1.81 is a plain cli.js run with node. Later versions ship a
// native binary in a platform package (@anthropic-ai/claude-code-linux-x64);
// their postinstall copies it over bin/claude.exe, but npm may skip install
// scripts, so the platform package's binary is used directly when present.
package claudecli

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"
	"syscall"
	"testing"
	"time"
)

// Versions the tests use.
const (
	// WebSocket is the version that still accepts a local --sdk-url.
	WebSocket = "2.1.81"
	// Latest is npm's latest tag: the current CLI, stdio only.
	Latest = "latest"
)

// Dir is the cache the CLIs are installed in.
func Dir() string {
	if d := os.Getenv("SOUS_CLAUDE_DIR"); d != "" {
		return d
	}
	base, err := os.UserCacheDir()
	if err != nil {
		base = os.TempDir()
	}
	return filepath.Join(base, "sous-test")
}

// Find returns the command (program and leading arguments) that runs the
// given CLI version, installing it first if needed. It skips the test when
// that is impossible here.
func Find(t testing.TB, version string) []string {
	t.Helper()
	cmd, err := find(version)
	if err == nil {
		return cmd
	}
	if _, lerr := exec.LookPath("npm"); lerr != nil {
		t.Skipf("Claude Code %s is not installed in %s and npm is not on PATH (install node and npm, or set SOUS_CLAUDE_DIR): %v", version, Dir(), err)
	}
	if ierr := install(version); ierr != nil {
		t.Skipf("Claude Code %s: install failed (no npm registry?): %v", version, ierr)
	}
	cmd, err = find(version)
	if err != nil {
		t.Skipf("Claude Code %s: installed but not usable: %v", version, err)
	}
	return cmd
}

func prefix(version string) string { return filepath.Join(Dir(), "claude-"+version) }

// find locates an installed CLI without installing.
func find(version string) ([]string, error) {
	pkg := filepath.Join(prefix(version), "node_modules", "@anthropic-ai", "claude-code")
	if _, err := os.Stat(filepath.Join(pkg, "package.json")); err != nil {
		return nil, fmt.Errorf("not installed: %w", err)
	}
	if js := filepath.Join(pkg, "cli.js"); exists(js) {
		node, err := exec.LookPath("node")
		if err != nil {
			return nil, fmt.Errorf("%s needs node, which is not on PATH", js)
		}
		return []string{node, js}, nil
	}
	// A native build: the platform package's binary, else the bin/claude.exe
	// that postinstall replaced (a small stub when it did not run).
	plat := runtime.GOOS + "-" + map[string]string{"amd64": "x64", "arm64": "arm64"}[runtime.GOARCH]
	for _, p := range []string{
		filepath.Join(prefix(version), "node_modules", "@anthropic-ai", "claude-code-"+plat, "claude"),
		filepath.Join(pkg, "bin", "claude.exe"),
	} {
		if st, err := os.Stat(p); err == nil && st.Size() > 1<<20 && st.Mode()&0o111 != 0 {
			return []string{p}, nil
		}
	}
	return nil, fmt.Errorf("no runnable CLI in %s (no cli.js and no native binary for %s)", pkg, plat)
}

func exists(p string) bool {
	_, err := os.Stat(p)
	return err == nil
}

// install runs npm under an exclusive lock so parallel test binaries do not
// install into the same prefix at once.
func install(version string) error {
	if err := os.MkdirAll(Dir(), 0o755); err != nil {
		return err
	}
	lock, err := os.OpenFile(filepath.Join(Dir(), ".install.lock"), os.O_CREATE|os.O_RDWR, 0o644)
	if err != nil {
		return err
	}
	defer lock.Close()
	if err := syscall.Flock(int(lock.Fd()), syscall.LOCK_EX); err != nil {
		return fmt.Errorf("lock %s: %w", lock.Name(), err)
	}
	defer syscall.Flock(int(lock.Fd()), syscall.LOCK_UN)
	if _, err := find(version); err == nil {
		return nil // another process installed it while we waited
	}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, "npm", "install", "--prefix", prefix(version), "--no-audit", "--no-fund", "--loglevel=error",
		"@anthropic-ai/claude-code@"+version)
	out, err := cmd.CombinedOutput()
	if err != nil {
		return fmt.Errorf("npm install @anthropic-ai/claude-code@%s: %w: %s", version, err, strings.TrimSpace(string(out)))
	}
	return nil
}

// Env is the environment for a CLI under test: its home and config in dir
// (so no user settings, credentials or history leak in or out), the model
// API at baseURL with a dummy key, and no traffic to anywhere else.
func Env(dir, baseURL string) map[string]string {
	return map[string]string{
		"HOME":               dir,
		"CLAUDE_CONFIG_DIR":  filepath.Join(dir, ".claude"),
		"XDG_CONFIG_HOME":    filepath.Join(dir, ".config"),
		"XDG_CACHE_HOME":     filepath.Join(dir, ".cache"),
		"ANTHROPIC_BASE_URL": baseURL,
		"ANTHROPIC_API_KEY":  "test",
		"CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC": "1",
		"DISABLE_AUTOUPDATER":                      "1",
		"DISABLE_TELEMETRY":                        "1",
		"DISABLE_ERROR_REPORTING":                  "1",
		"CLAUDE_CODE_DISABLE_FEEDBACK_SURVEY":      "1",
	}
}
