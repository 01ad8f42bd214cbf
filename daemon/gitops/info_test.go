package gitops

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"slices"
	"sync"
	"testing"

	"github.com/seed5ad92d46/sous/daemon/wire"
)

func info(t *testing.T, g *Git, path string) wire.GitInfoResult {
	t.Helper()
	res, err := g.Info(context.Background(), path)
	if err != nil {
		t.Fatalf("Info(%q): %v", path, err)
	}
	r, ok := res.(wire.GitInfoResult)
	if !ok {
		t.Fatalf("Info(%q) = %#v, want a GitInfoResult", path, res)
	}
	return r
}

func TestInfoUnbornHEAD(t *testing.T) {
	t.Parallel()
	repo := newRepo(t, "trunk")
	res, err := (&Git{}).Info(context.Background(), repo)
	if err != nil {
		t.Fatal(err)
	}
	want := `{"isRepo":true,"repo":` + jstr(repo) + `,"branch":"trunk","root":` + jstr(repo) + `,"repoSlug":"","defaultBranch":""}`
	if got := jsonOf(t, res); got != want {
		t.Errorf("Info =\n%s\nwant\n%s", got, want)
	}
}

func TestInfoBranchWithSameNamedTag(t *testing.T) {
	t.Parallel()
	repo := newRepoWithCommit(t, "main")
	gitT(t, repo, "tag", "main") // makes the short name of refs/heads/main "heads/main"
	if got := info(t, &Git{}, repo).Branch; got != "main" {
		t.Errorf("branch = %q, want main", got)
	}
}

func TestInfoDetachedHEAD(t *testing.T) {
	t.Parallel()
	repo := newRepoWithCommit(t, "main")
	commitFile(t, repo, "b.txt", "b\n")
	gitT(t, repo, "checkout", "-q", "--detach", "HEAD~1")
	want := "detached:" + gitT(t, repo, "rev-parse", "--short", "HEAD")
	if got := info(t, &Git{}, repo).Branch; got != want {
		t.Errorf("branch = %q, want %q", got, want)
	}
}

func TestInfoSubdirectory(t *testing.T) {
	t.Parallel()
	repo := newRepoWithCommit(t, "main")
	sub := filepath.Join(repo, "sub", "deep")
	if err := os.MkdirAll(sub, 0o755); err != nil {
		t.Fatal(err)
	}
	r := info(t, &Git{}, sub)
	if r.Root != repo {
		t.Errorf("root = %q, want the top level %q", r.Root, repo)
	}
	if r.Repo != sub {
		t.Errorf("repo = %q, want the path given %q", r.Repo, sub)
	}
	if r.Branch != "main" {
		t.Errorf("branch = %q, want main", r.Branch)
	}
}

func TestInfoRelativeAndEmptyPath(t *testing.T) {
	t.Parallel()
	repo := newRepoWithCommit(t, "main")
	parent, name := filepath.Split(repo)

	g := &Git{Dir: parent}
	if r := info(t, g, name); r.Repo != repo || r.Root != repo {
		t.Errorf("Info(%q) with Dir %q: repo %q root %q, want both %q", name, parent, r.Repo, r.Root, repo)
	}
	// The daemon directory is the default.
	if r := info(t, &Git{Dir: repo}, ""); r.Repo != repo || r.Branch != "main" {
		t.Errorf("Info(\"\") with Dir %q: repo %q branch %q", repo, r.Repo, r.Branch)
	}
	// Paths are cleaned.
	if r := info(t, g, "./"+name+"/sub/.."); r.Repo != repo {
		t.Errorf("repo = %q, want %q", r.Repo, repo)
	}
}

func TestInfoRepoSlugFromOrigin(t *testing.T) {
	t.Parallel()
	repo := newRepoWithCommit(t, "main")
	g := &Git{}
	if got := info(t, g, repo).RepoSlug; got != "" {
		t.Errorf("repoSlug without origin = %q, want empty", got)
	}
	gitT(t, repo, "remote", "add", "origin", "git@github.com:Acme/Widget.git")
	if got := info(t, g, repo).RepoSlug; got != "Acme/Widget" {
		t.Errorf("repoSlug = %q, want Acme/Widget", got)
	}
	gitT(t, repo, "remote", "set-url", "origin", "https://gitlab.com/group/sub/proj.git")
	if got := info(t, g, repo).RepoSlug; got != "" {
		t.Errorf("repoSlug of a subgroup URL = %q, want empty", got)
	}
}

func TestInfoDefaultBranch(t *testing.T) {
	t.Parallel()
	work := newRepoWithCommit(t, "main")
	gitT(t, work, "branch", "dev")
	tmp := realPath(t, t.TempDir())
	bare := filepath.Join(tmp, "up.git")
	gitT(t, tmp, "clone", "-q", "--bare", work, bare)
	clone := filepath.Join(tmp, "clone")
	gitT(t, tmp, "clone", "-q", bare, clone)

	g := &Git{}
	r := info(t, g, clone)
	if r.DefaultBranch != "main" {
		t.Errorf("defaultBranch of a clone = %q, want main", r.DefaultBranch)
	}
	if r.RepoSlug != "" {
		t.Errorf("repoSlug of a local-path origin = %q, want empty", r.RepoSlug)
	}
	gitT(t, clone, "remote", "set-head", "origin", "dev")
	if got := info(t, g, clone).DefaultBranch; got != "dev" {
		t.Errorf("defaultBranch after set-head dev = %q, want dev", got)
	}
	gitT(t, clone, "remote", "set-head", "origin", "--delete")
	if got := info(t, g, clone).DefaultBranch; got != "" {
		t.Errorf("defaultBranch with origin/HEAD unset = %q, want empty", got)
	}
}

func TestInfoBareRepository(t *testing.T) {
	t.Parallel()
	needGit(t)
	bare := filepath.Join(realPath(t, t.TempDir()), "b.git")
	gitT(t, filepath.Dir(bare), "init", "-q", "--bare", "-b", "trunk", bare)
	r := info(t, &Git{}, bare)
	if !r.IsRepo || r.Root != bare || r.Branch != "trunk" {
		t.Errorf("Info(bare) = %+v, want isRepo, root %q, branch trunk", r, bare)
	}
}

func TestInfoNotRepo(t *testing.T) {
	t.Parallel()
	needGit(t)
	dir := t.TempDir()
	file := filepath.Join(dir, "f")
	writeFile(t, file, "x")
	const want = `{"isRepo":false,"repoSlug":"","defaultBranch":""}`
	for _, p := range []string{dir, filepath.Join(dir, "missing"), file} {
		res, err := (&Git{}).Info(context.Background(), p)
		if err != nil {
			t.Fatalf("Info(%q): %v", p, err)
		}
		if got := jsonOf(t, res); got != want {
			t.Errorf("Info(%q) = %s, want %s", p, got, want)
		}
	}
}

func TestCanceledContext(t *testing.T) {
	t.Parallel()
	repo := newRepoWithCommit(t, "main")
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	g := &Git{}
	if _, err := g.Info(ctx, repo); !errors.Is(err, context.Canceled) {
		t.Errorf("Info with a canceled context: err = %v, want context.Canceled", err)
	}
	if _, err := g.Status(ctx, repo); !errors.Is(err, context.Canceled) {
		t.Errorf("Status: err = %v, want context.Canceled", err)
	}
	if _, err := g.Branches(ctx, repo); !errors.Is(err, context.Canceled) {
		t.Errorf("Branches: err = %v, want context.Canceled", err)
	}
	wt := filepath.Join(t.TempDir(), "wt")
	if _, err := g.WorktreeCreate(ctx, wire.GitParams{BaseRepo: repo, BranchName: "x", WorktreePath: wt}); !errors.Is(err, context.Canceled) {
		t.Errorf("WorktreeCreate: err = %v, want context.Canceled", err)
	}
	if exists(wt) {
		t.Error("a canceled WorktreeCreate created the worktree")
	}
	if _, err := g.WorktreeRemove(ctx, wire.GitParams{BaseRepo: repo, WorktreePath: wt}); !errors.Is(err, context.Canceled) {
		t.Errorf("WorktreeRemove: err = %v, want context.Canceled", err)
	}
}

func TestClassify(t *testing.T) {
	t.Parallel()
	notRepo := &gitError{args: []string{"status"}, exitCode: 128, stderr: "fatal: not a git repository (or any of the parent directories): .git"}
	if err := classify(notRepo); !errors.Is(err, errNotRepo) {
		t.Errorf("classify(not a repo) = %v, want errNotRepo", err)
	}
	// Other refusals must surface, not read as "not a repo".
	dubious := &gitError{args: []string{"status"}, exitCode: 128, stderr: "fatal: detected dubious ownership in repository at '/x'"}
	if err := classify(dubious); err != dubious {
		t.Errorf("classify(dubious ownership) = %v, want it unchanged", err)
	}
}

// The contract's own example: a tracked file modified in the work tree and
// an untracked one give exactly ["M a.txt","?? new"]; further down, a line
// keeps git's leading space.
func TestStatusContractExample(t *testing.T) {
	t.Parallel()
	repo := newRepoWithCommit(t, "main")
	writeFile(t, filepath.Join(repo, "a.txt"), "changed\n")
	writeFile(t, filepath.Join(repo, "new"), "n\n")
	g := &Git{}
	res, err := g.Status(context.Background(), repo)
	if err != nil {
		t.Fatal(err)
	}
	if got, want := jsonOf(t, res), `{"isRepo":true,"clean":false,"changes":["M a.txt","?? new"]}`; got != want {
		t.Errorf("Status = %s, want %s", got, want)
	}
	commitFile(t, repo, "b.txt", "b\n")
	writeFile(t, filepath.Join(repo, "b.txt"), "changed\n")
	if res, err = g.Status(context.Background(), repo); err != nil {
		t.Fatal(err)
	}
	if want := []string{"M a.txt", " M b.txt", "?? new"}; !slices.Equal(res.Changes, want) {
		t.Errorf("Status.Changes = %q, want %q", res.Changes, want)
	}
}

func TestStatus(t *testing.T) {
	t.Parallel()
	repo := newRepoWithCommit(t, "main")
	commitFile(t, repo, "b.txt", "b\n")
	g := &Git{}

	res, err := g.Status(context.Background(), repo)
	if err != nil {
		t.Fatal(err)
	}
	if got, want := jsonOf(t, res), `{"isRepo":true,"clean":true}`; got != want {
		t.Errorf("clean Status = %s, want %s", got, want)
	}

	writeFile(t, filepath.Join(repo, "a.txt"), "changed\n") // modified, unstaged
	writeFile(t, filepath.Join(repo, "b.txt"), "changed\n")
	gitT(t, repo, "add", "b.txt")                   // modified, staged
	writeFile(t, filepath.Join(repo, "new"), "n\n") // untracked
	res, err = g.Status(context.Background(), repo)
	if err != nil {
		t.Fatal(err)
	}
	want := `{"isRepo":true,"clean":false,"changes":["M a.txt","M  b.txt","?? new"]}`
	if got := jsonOf(t, res); got != want {
		t.Errorf("dirty Status = %s, want %s", got, want)
	}

	// From a subdirectory: the whole repository, paths from the top level.
	sub := filepath.Join(repo, "sub")
	writeFile(t, filepath.Join(sub, "u"), "u\n")
	res, err = g.Status(context.Background(), sub)
	if err != nil {
		t.Fatal(err)
	}
	if wantCh := []string{"M a.txt", "M  b.txt", "?? new", "?? sub/"}; !slices.Equal(res.Changes, wantCh) {
		t.Errorf("Status(sub).Changes = %q, want %q", res.Changes, wantCh)
	}
}

func TestStatusUnbornAndNotRepo(t *testing.T) {
	t.Parallel()
	repo := newRepo(t, "trunk")
	g := &Git{}
	res, err := g.Status(context.Background(), repo)
	if err != nil {
		t.Fatal(err)
	}
	if got, want := jsonOf(t, res), `{"isRepo":true,"clean":true}`; got != want {
		t.Errorf("Status(empty repo) = %s, want %s", got, want)
	}
	writeFile(t, filepath.Join(repo, "x"), "x")
	if res, _ := g.Status(context.Background(), repo); !slices.Equal(res.Changes, []string{"?? x"}) || res.Clean {
		t.Errorf("Status(empty repo + file) = %+v", res)
	}

	for _, p := range []string{t.TempDir(), filepath.Join(t.TempDir(), "missing")} {
		res, err := g.Status(context.Background(), p)
		if err != nil {
			t.Fatalf("Status(%q): %v", p, err)
		}
		if got, want := jsonOf(t, res), `{"isRepo":false,"clean":false}`; got != want {
			t.Errorf("Status(%q) = %s, want %s", p, got, want)
		}
	}
}

func TestStatusBareIsAnError(t *testing.T) {
	t.Parallel()
	needGit(t)
	bare := t.TempDir()
	gitT(t, bare, "init", "-q", "--bare")
	if _, err := (&Git{}).Status(context.Background(), bare); err == nil {
		t.Error("Status of a bare repository succeeded; want git's refusal as an error")
	}
}

func TestBranches(t *testing.T) {
	t.Parallel()
	repo := newRepoWithCommit(t, "main")
	for _, b := range []string{"zeta", "alpha", "Beta", "feature/x"} {
		gitT(t, repo, "branch", b)
	}
	gitT(t, repo, "tag", "alpha") // must not turn the branch into "heads/alpha"
	res, err := (&Git{}).Branches(context.Background(), repo)
	if err != nil {
		t.Fatal(err)
	}
	want := `{"isRepo":true,"branches":["Beta","alpha","feature/x","main","zeta"]}`
	if got := jsonOf(t, res); got != want {
		t.Errorf("Branches = %s, want %s", got, want)
	}
}

func TestBranchesEmptyAndNotRepo(t *testing.T) {
	t.Parallel()
	repo := newRepo(t, "trunk")
	g := &Git{}
	res, err := g.Branches(context.Background(), repo)
	if err != nil {
		t.Fatal(err)
	}
	if got, want := jsonOf(t, res), `{"isRepo":true,"branches":[]}`; got != want {
		t.Errorf("Branches(empty repo) = %s, want %s", got, want)
	}
	res, err = g.Branches(context.Background(), t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	if got, want := jsonOf(t, res), `{"isRepo":false,"branches":[]}`; got != want {
		t.Errorf("Branches(non-repo) = %s, want %s", got, want)
	}
}

// TestConcurrentCalls runs queries on one repository from many goroutines;
// under -race it checks that Git shares no mutable state between calls.
func TestConcurrentCalls(t *testing.T) {
	t.Parallel()
	repo := newRepoWithCommit(t, "main")
	g := &Git{Dir: repo}
	var wg sync.WaitGroup
	errs := make(chan error, 16)
	for range 8 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			if _, err := g.Info(context.Background(), ""); err != nil {
				errs <- err
			}
			if s, err := g.Status(context.Background(), ""); err != nil || !s.Clean {
				errs <- errors.Join(err, errors.New("status not clean"))
			}
		}()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Error(err)
	}
}
