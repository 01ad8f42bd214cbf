package gitcmd

import (
	"bytes"
	"context"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

// execRunner runs the real git with the hardening, in an environment
// whose only config is the repository's (no global or system identity).
type execRunner struct{ home string }

func (r execRunner) Git(ctx context.Context, dir string, config []string, args ...string) (Output, error) {
	argv := append(append(append([]string(nil), Hardening...), config...), args...)
	cmd := exec.CommandContext(ctx, "git", argv...)
	cmd.Dir = dir
	cmd.Env = append([]string{"HOME=" + r.home, "PATH=" + os.Getenv("PATH"), "GIT_CONFIG_NOSYSTEM=1",
		"XDG_CONFIG_HOME=" + filepath.Join(r.home, ".config")}, Env...)
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	err := cmd.Run()
	var ee *exec.ExitError
	if errors.As(err, &ee) {
		return Output{Stdout: stdout.String(), Stderr: stderr.String(), ExitCode: ee.ExitCode()}, nil
	}
	return Output{Stdout: stdout.String(), Stderr: stderr.String()}, err
}

// Without an identity, commit fails with git's message: none is invented.
func TestCommitWithoutIdentityFailsInGitsWords(t *testing.T) {
	if _, err := exec.LookPath("git"); err != nil {
		t.Skip("git not found")
	}
	r := execRunner{home: t.TempDir()}
	repo := t.TempDir()
	ctx := context.Background()
	if _, err := run(ctx, r, repo, nil, "init", "-q"); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(repo, "a"), []byte("a\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	_, err := Commit(ctx, r, repo, "first", true)
	if err == nil {
		t.Skip("git found an identity of its own here (a hostname with a domain)")
	}
	var ge *Error
	if !errors.As(err, &ge) || ge.Command != "commit" || !strings.Contains(ge.Msg, "unable to auto-detect email address") {
		t.Fatalf("commit without identity: %v", err)
	}
	if _, err := run(ctx, r, repo, nil, "rev-parse", "-q", "--verify", "HEAD"); err == nil {
		t.Fatal("a commit was made")
	}
	// With one configured in the repository, the same call commits.
	for _, kv := range [][2]string{{"user.name", "T"}, {"user.email", "t@example.com"}} {
		if _, err := run(ctx, r, repo, nil, "config", kv[0], kv[1]); err != nil {
			t.Fatal(err)
		}
	}
	id, err := Commit(ctx, r, repo, "first", true)
	if err != nil || len(id) != 40 {
		t.Fatalf("commit: %q, %v", id, err)
	}
}
