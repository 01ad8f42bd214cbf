package gitops

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/seed5ad92d46/sous/daemon/wire"
)

func TestGitEnv(t *testing.T) {
	t.Parallel()
	in := []string{
		"PATH=/usr/bin",
		"HOME=/home/u",
		"GIT_DIR=/hook/repo/.git",
		"GIT_WORK_TREE=/hook/repo",
		"GIT_INDEX_FILE=/hook/repo/.git/index",
		"GIT_OBJECT_DIRECTORY=/x",
		"GIT_ALTERNATE_OBJECT_DIRECTORIES=/y",
		"GIT_COMMON_DIR=/z",
		"GIT_PREFIX=sub/",
		"GIT_QUARANTINE_PATH=/q",
		"GIT_CONFIG_COUNT=1", // operator-supplied config survives
		"GIT_CONFIG_KEY_0=safe.directory",
		"GIT_CONFIG_VALUE_0=*",
		"LC_ALL=de_DE.UTF-8",
		"LANGUAGE=de",
		"GIT_TERMINAL_PROMPT=1",
		"GIT_PAGER=less",
		"PAGER=less",
		"PWD=/somewhere/else",
	}
	got := gitEnv(in, "/work/repo")
	want := []string{
		"PATH=/usr/bin",
		"HOME=/home/u",
		"GIT_CONFIG_COUNT=1",
		"GIT_CONFIG_KEY_0=safe.directory",
		"GIT_CONFIG_VALUE_0=*",
		"LC_ALL=C",
		"LANGUAGE=C",
		"GIT_TERMINAL_PROMPT=0",
		"GIT_PAGER=cat",
		"PAGER=cat",
		"GIT_OPTIONAL_LOCKS=0",
		"PWD=/work/repo",
	}
	if !slices.Equal(got, want) {
		t.Errorf("gitEnv =\n%s\nwant\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
	}
}

// TestInheritedRepoEnvIgnored starts from the environment a git hook would
// hand a daemon: every call must still act on the repository it was asked
// about. Not parallel: it changes the process environment.
func TestInheritedRepoEnvIgnored(t *testing.T) {
	asked := newRepoWithCommit(t, "asked")
	hook := newRepoWithCommit(t, "hook")
	writeFile(t, filepath.Join(hook, "dirty"), "x")
	t.Setenv("GIT_DIR", filepath.Join(hook, ".git"))
	t.Setenv("GIT_WORK_TREE", hook)
	t.Setenv("GIT_INDEX_FILE", filepath.Join(hook, ".git", "index"))

	g := &Git{}
	if r := info(t, g, asked); r.Branch != "asked" || r.Root != asked {
		t.Errorf("Info = %+v, want branch asked, root %s", r, asked)
	}
	if s, err := g.Status(context.Background(), asked); err != nil || !s.Clean {
		t.Errorf("Status = %+v, %v; want the asked repo, clean", s, err)
	}
	if b, err := g.Branches(context.Background(), asked); err != nil || !slices.Equal(b.Branches, []string{"asked"}) {
		t.Errorf("Branches = %+v, %v; want [asked]", b, err)
	}
	notRepo := t.TempDir()
	if s, err := g.Status(context.Background(), notRepo); err != nil || s.IsRepo {
		t.Errorf("Status(non-repo) = %+v, %v; want isRepo false despite GIT_DIR", s, err)
	}
}

// TestDeadlineBoundsGit checks that a git that would block (here on a
// smudge filter that sleeps, and keeps git's stderr open while it does) is
// stopped by the caller's deadline. Not parallel: the filter is the
// operator's (the process environment's), the kind the daemon still runs.
func TestDeadlineBoundsGit(t *testing.T) {
	repo := newRepoWithCommit(t, "main")
	operatorFilter(t, repo, "exec sleep 5")
	const deadline = 300 * time.Millisecond
	ctx, cancel := context.WithTimeout(context.Background(), deadline)
	defer cancel()
	start := time.Now()
	_, err := (&Git{}).WorktreeCreate(ctx, wire.GitParams{BaseRepo: repo, BranchName: "feat", WorktreePath: filepath.Join(t.TempDir(), "wt")})
	if !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("WorktreeCreate with a hanging hook: err = %v, want context.DeadlineExceeded", err)
	}
	if d := time.Since(start); d > deadline+waitDelay+time.Second {
		t.Errorf("call took %v after a %v deadline", d, deadline)
	}
}

// TestGitProgramsDoNotSeeDaemonCredentials: the programs git still runs
// for the daemon (an operator's filter driver; hooks and the repository's
// own drivers are switched off, harden.go) must not find the way to the
// daemon (its socket, a token) in their environment. Not parallel: it
// changes the process environment.
func TestGitProgramsDoNotSeeDaemonCredentials(t *testing.T) {
	for _, name := range wire.CredentialEnv {
		t.Setenv(name, "leaked-"+name)
	}
	repo := newRepoWithCommit(t, "main")
	seen := filepath.Join(t.TempDir(), "filter-env")
	operatorFilter(t, repo, "env > '"+seen+"'; cat")
	create(t, &Git{}, wire.GitParams{BaseRepo: repo, BranchName: "feat", WorktreePath: filepath.Join(t.TempDir(), "wt")})
	b, err := os.ReadFile(seen)
	if err != nil {
		t.Fatalf("the filter did not run: %v", err)
	}
	for _, name := range wire.CredentialEnv {
		if strings.Contains(string(b), name+"=") {
			t.Errorf("the filter saw %s:\n%s", name, b)
		}
	}
}
