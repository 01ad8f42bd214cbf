package main

import (
	"bytes"
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/seed5ad92d46/sous/daemon"
	"github.com/seed5ad92d46/sous/daemon/client"
	"github.com/seed5ad92d46/sous/internal/daemontest"
	"github.com/seed5ad92d46/sous/internal/testutil"
)

// The run command reads its defaults from the environment; the tests must
// not reach a daemon the developer happens to run.
func init() {
	for _, name := range []string{"SOUS_SOCKET", "SOUS_REMOTE", "SOUS_TOKEN", "CLAUDE_RPC_TOKEN"} {
		os.Unsetenv(name)
	}
}

// outcome is what one `sous` invocation did.
type outcome struct {
	code           int
	stdout, stderr string
}

// sous runs the command line in process, as main does, with buffers.
func sous(t *testing.T, args ...string) outcome {
	t.Helper()
	var stdout, stderr bytes.Buffer
	code := Main(args, strings.NewReader(""), &stdout, &stderr)
	return outcome{code: code, stdout: stdout.String(), stderr: withoutRunLine(stderr.String())}
}

// runLine is the line every run starts its stderr with (the durable
// tests read it; TestRunSaysItsID checks it).
var runLine = regexp.MustCompile(`^sous: run [0-9a-f]{16}\n`)

// withoutRunLine is stderr without the run's first line, "sous: run ID",
// which differs every time: the tests compare the rest.
func withoutRunLine(stderr string) string { return runLine.ReplaceAllString(stderr, "") }

// runStar writes src as main.star in a fresh directory and runs it with
// extra `sous run` flags. The directory is in the recipe's args as "dir".
func runStar(t *testing.T, src string, flags ...string) (outcome, string) {
	t.Helper()
	dir := testutil.WriteTree(t, map[string]string{"main.star": src})
	args := append([]string{"run", filepath.Join(dir, "main.star"), "-a", "dir=" + dir}, flags...)
	return sous(t, args...), dir
}

// expect checks the exit code and that stderr contains every want.
func (o outcome) expect(t *testing.T, code int, stderrHas ...string) {
	t.Helper()
	if o.code != code {
		t.Errorf("exit code %d, want %d\nstdout:\n%s\nstderr:\n%s", o.code, code, o.stdout, o.stderr)
		return
	}
	for _, w := range stderrHas {
		if !strings.Contains(o.stderr, w) {
			t.Errorf("stderr does not contain %q:\n%s", w, o.stderr)
		}
	}
}

// stdoutLines is stdout split into lines.
func (o outcome) stdoutLines() []string {
	return strings.Split(strings.TrimSuffix(o.stdout, "\n"), "\n")
}

// socketDaemon serves a daemon on a Unix socket in a temp dir, with
// token, until the test ends.
func socketDaemon(t *testing.T, token string, cfg daemon.Config) (sock string, srv *daemon.Server) {
	t.Helper()
	cfg.Token = token
	return daemontest.ServeUnix(t, cfg)
}

// dialDaemon connects a test's own client to a socket daemon.
func dialDaemon(t *testing.T, sock, token string) *client.Client {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	c, err := client.DialUnix(ctx, sock, token, client.Options{ReconnectTimeout: -1})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	return c
}

// processGone reports whether pid no longer runs: it does not exist, or is
// a zombie nobody reaped yet (PID 1 of a container may never reap).

// waitGone waits up to d for pid to stop running.
func waitGone(t *testing.T, pid int, d time.Duration) {
	t.Helper()
	deadline := time.Now().Add(d)
	for testutil.Alive(pid) {
		if time.Now().After(deadline) {
			t.Fatalf("process %d still runs after %s", pid, d)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// readPid reads a pid a recipe's child wrote to a file.
func readPid(t *testing.T, path string) int {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	pid, err := strconv.Atoi(strings.TrimSpace(string(b)))
	if err != nil {
		t.Fatalf("pid file %s: %v", path, err)
	}
	return pid
}

// makeRepo creates a git repository with one commit on main and a second
// branch, for the git builtins and the worktree recipe.
func makeRepo(t *testing.T) string {
	t.Helper()
	if _, err := exec.LookPath("git"); err != nil {
		t.Skip("git is not installed")
	}
	dir := t.TempDir()
	git := func(args ...string) {
		t.Helper()
		cmd := exec.Command("git", args...)
		cmd.Dir = dir
		cmd.Env = append(os.Environ(), "GIT_AUTHOR_NAME=t", "GIT_AUTHOR_EMAIL=t@e", "GIT_COMMITTER_NAME=t",
			"GIT_COMMITTER_EMAIL=t@e", "GIT_CONFIG_GLOBAL=/dev/null", "GIT_CONFIG_NOSYSTEM=1")
		if out, err := cmd.CombinedOutput(); err != nil {
			t.Fatalf("git %v: %v\n%s", args, err, out)
		}
	}
	git("init", "-q", "-b", "main")
	if err := os.WriteFile(filepath.Join(dir, "README"), []byte("hello\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	git("add", "README")
	git("commit", "-q", "-m", "first")
	git("branch", "feature")
	return dir
}

// daemonConfig is the configuration of the socket daemons tests start.
func daemonConfig(t *testing.T) daemon.Config {
	t.Helper()
	return daemon.Config{ShutdownGrace: time.Second}
}

// tokenFile writes a token file for --token-file.
func tokenFile(t *testing.T, token string) string {
	t.Helper()
	p := filepath.Join(t.TempDir(), "token")
	if err := os.WriteFile(p, []byte(token+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	return p
}
