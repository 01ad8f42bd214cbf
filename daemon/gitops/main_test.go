package gitops

import (
	"bytes"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

// TestMain isolates every git the tests run (theirs and the package's) from
// the machine: a throwaway HOME so no ~/.gitconfig leaks in, no system config,
// a fixed identity, and none of the repository-locating variables a
// surrounding git hook may have exported.
func TestMain(m *testing.M) {
	os.Exit(runTests(m))
}

func runTests(m *testing.M) int {
	home, err := os.MkdirTemp("", "gitops-home-")
	if err != nil {
		fmt.Fprintln(os.Stderr, "gitops tests:", err)
		return 1
	}
	defer os.RemoveAll(home)
	for _, kv := range [][2]string{
		{"HOME", home},
		{"XDG_CONFIG_HOME", filepath.Join(home, ".config")},
		{"GIT_CONFIG_NOSYSTEM", "1"},
		{"GIT_AUTHOR_NAME", "Test Author"},
		{"GIT_AUTHOR_EMAIL", "author@example.com"},
		{"GIT_COMMITTER_NAME", "Test Committer"},
		{"GIT_COMMITTER_EMAIL", "committer@example.com"},
	} {
		os.Setenv(kv[0], kv[1])
	}
	for _, kv := range os.Environ() {
		name, _, _ := strings.Cut(kv, "=")
		if isRepoLocalEnv(name) || name == "GIT_CONFIG_GLOBAL" || name == "GIT_CONFIG_PARAMETERS" || name == "GIT_CONFIG_COUNT" {
			os.Unsetenv(name)
		}
	}
	return m.Run()
}

// needGit skips t when no git binary is installed.
func needGit(t *testing.T) {
	t.Helper()
	if _, err := exec.LookPath("git"); err != nil {
		t.Skip("git not found on PATH")
	}
}

// gitT runs git in dir for test setup and returns its trimmed stdout.
func gitT(t *testing.T, dir string, args ...string) string {
	t.Helper()
	out, err := gitTry(dir, args...)
	if err != nil {
		t.Fatal(err)
	}
	return out
}

// gitTry is gitT for commands a test expects may fail.
func gitTry(dir string, args ...string) (string, error) {
	cmd := exec.Command("git", args...)
	cmd.Dir = dir
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	if err := cmd.Run(); err != nil {
		return "", fmt.Errorf("git %s in %s: %v: %s", strings.Join(args, " "), dir, err, stderr.String())
	}
	return strings.TrimSpace(stdout.String()), nil
}

// newRepo makes an empty repository on branch in a fresh temp dir and
// returns its real path (git reports real paths).
func newRepo(t *testing.T, branch string) string {
	t.Helper()
	needGit(t)
	dir := realPath(t, t.TempDir())
	gitT(t, dir, "init", "-q", "-b", branch)
	return dir
}

// newRepoWithCommit is newRepo plus one commit of a.txt.
func newRepoWithCommit(t *testing.T, branch string) string {
	t.Helper()
	dir := newRepo(t, branch)
	commitFile(t, dir, "a.txt", "a\n")
	return dir
}

// commitFile writes name in dir and commits it.
func commitFile(t *testing.T, dir, name, content string) {
	t.Helper()
	writeFile(t, filepath.Join(dir, name), content)
	gitT(t, dir, "add", "--", name)
	gitT(t, dir, "commit", "-q", "-m", "add "+name)
}

func writeFile(t *testing.T, path, content string) {
	t.Helper()
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(path, []byte(content), 0o644); err != nil {
		t.Fatal(err)
	}
}

func realPath(t *testing.T, p string) string {
	t.Helper()
	r, err := filepath.EvalSymlinks(p)
	if err != nil {
		t.Fatal(err)
	}
	return r
}

// jsonOf is v as the daemon would send it.
func jsonOf(t *testing.T, v any) string {
	t.Helper()
	b, err := json.Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

// jstr is s as a JSON string literal, for building expected JSON around
// temp paths.
func jstr(s string) string {
	b, _ := json.Marshal(s)
	return string(b)
}

func exists(path string) bool {
	_, err := os.Lstat(path)
	return err == nil
}

// operatorFilter commits slow.txt to repo with an attribute that gives it
// the smudge filter "slow", and defines that filter, running script, in the
// process environment's config (GIT_CONFIG_COUNT), where an operator would:
// the daemon runs filters defined there (harden.go), so the checkout of a
// worktree of repo runs script. The caller must not be parallel.
func operatorFilter(t *testing.T, repo, script string) {
	t.Helper()
	writeFile(t, filepath.Join(repo, ".gitattributes"), "slow.txt filter=slow\n")
	commitFile(t, repo, "slow.txt", "slow\n")
	gitT(t, repo, "add", ".gitattributes")
	gitT(t, repo, "commit", "-q", "-m", "attributes")
	t.Setenv("GIT_CONFIG_COUNT", "1")
	t.Setenv("GIT_CONFIG_KEY_0", "filter.slow.smudge")
	t.Setenv("GIT_CONFIG_VALUE_0", script) // git runs it with the shell
}
