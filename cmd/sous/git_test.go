package main

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/seed5ad92d46/sous/daemon"
	"github.com/seed5ad92d46/sous/daemon/wire"
	"github.com/seed5ad92d46/sous/internal/daemontest"
)

// gitHosts are the ways a recipe reaches a daemon's git: the embedded
// daemon, a socket daemon, and a socket daemon from before the git
// extensions (the builtins' fallbacks). Each value is the `sous run` flags.
func gitHosts(t *testing.T) map[string][]string {
	t.Helper()
	sock, _ := daemontest.ServeUnix(t, daemon.Config{Token: "tok"})
	old, _ := daemontest.ServeUnix(t, daemon.Config{Token: "tok",
		DisableFeatures: append([]string{wire.FeatureWorktreeRemoveStrict, wire.FeatureWorktreeCreateNewBranch,
			wire.FeatureWorktreeCreateInclude}, wire.GitMethods...)})
	tok := tokenFile(t, "tok")
	return map[string][]string{
		"embedded":   nil,
		"socket":     {"--socket", sock, "--token-file", tok},
		"old socket": {"--socket", old, "--token-file", tok},
	}
}

// A recipe's worktree_remove refuses to lose uncommitted work, naming it,
// and a path that is not a worktree of the repository; force=True removes
// anyway.
func TestGitWorktreeRemoveKeepsWork(t *testing.T) {
	t.Parallel()
	for name, flags := range gitHosts(t) {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			repo := makeRepo(t)
			wt := filepath.Join(t.TempDir(), "wt")
			o, _ := runStar(t, `
repo, wt = args["repo"], args["wt"]
git.worktree_create("topic", wt, repo=repo)
sh("echo dirty >> README; for i in 1 2 3 4 5 6; do echo x > new$i; done", cwd=wt, echo=False)
print(git.status(wt).changes)
git.worktree_remove(wt, repo=repo)
`, append([]string{"-a", "repo=" + repo, "-a", "wt=" + wt}, flags...)...)
			o.expect(t, 1, `["M README", "?? new1", "?? new2", "?? new3", "?? new4", "?? new5", "?? new6"]`,
				"main.star:6:20: in <toplevel>",
				"git.worktree_remove: "+wt+": uncommitted changes that removing it would lose: M README, ?? new1, ?? new2, ?? new3, ?? new4 and 2 more (force=True removes it anyway)")
			if b, err := os.ReadFile(filepath.Join(wt, "README")); err != nil || string(b) != "hello\ndirty\n" {
				t.Fatalf("the refused removal lost the change: %q, %v", b, err)
			}

			plain := t.TempDir()
			o, _ = runStar(t, `git.worktree_remove(args["plain"], repo=args["repo"])`,
				append([]string{"-a", "repo=" + repo, "-a", "plain=" + plain}, flags...)...)
			o.expect(t, 1, "git.worktree_remove: "+plain+": git worktree remove failed: '"+plain+"'", "(not_a_worktree; force=True skips this check)")

			o, _ = runStar(t, `
git.worktree_remove(args["wt"], repo=args["repo"], force=True)
print(files.stat(args["wt"]).exists)
`, append([]string{"-a", "repo=" + repo, "-a", "wt=" + wt}, flags...)...)
			o.expect(t, 0, "False\n")
		})
	}
}

// worktree_create on a branch that exists checks it out: the result says
// so (new_branch False) and names no source it did not use.
func TestGitWorktreeCreateExistingBranch(t *testing.T) {
	t.Parallel()
	for name, flags := range gitHosts(t) {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			repo := makeRepo(t)
			tmp := t.TempDir()
			o, _ := runStar(t, `
repo, tmp = args["repo"], args["tmp"]
sh("git branch release/x main && git branch dev main", cwd=repo, echo=False)
w = git.worktree_create("dev", tmp + "/dev", repo=repo, source="release/x")
print(w.branch, w.source_branch, w.new_branch, w.path == tmp + "/dev")
w = git.worktree_create("topic", tmp + "/topic", repo=repo, source="release/x")
print(w.branch, w.source_branch, w.new_branch)
w = git.worktree_create("topic2", tmp + "/topic2", repo=repo)
print(w.branch, w.source_branch, w.new_branch)
`, append([]string{"-a", "repo=" + repo, "-a", "tmp=" + tmp}, flags...)...)
			o.expect(t, 0, "dev None False True\ntopic release/x True\ntopic2 main True\n")
		})
	}
}

// plantFsmonitor does what an agent that may only write in the worktree wt
// can: a git dir of its own inside wt, whose config runs a program on every
// index refresh (touching marker), with wt's .git pointed at it.
func plantFsmonitor(t *testing.T, wt, marker string) {
	t.Helper()
	evil := filepath.Join(wt, "evil")
	for _, args := range [][]string{
		{"init", "-q", "--bare", evil},
		{"-C", evil, "config", "core.bare", "false"},
		{"-C", evil, "config", "core.fsmonitor", "touch '" + marker + "'; echo"},
	} {
		if out, err := exec.Command("git", args...).CombinedOutput(); err != nil {
			t.Fatalf("git %v: %v\n%s", args, err, out)
		}
	}
	if err := os.WriteFile(filepath.Join(wt, ".git"), []byte("gitdir: evil\n"), 0o644); err != nil {
		t.Fatal(err)
	}
}

// The attack of an agent allowed to write files and nothing else, through a
// recipe's git calls: none may run the program the planted config names,
// each fails naming the refusal, and worktree_remove refuses too.
func TestGitPlantedWorktreeRunsNothing(t *testing.T) {
	t.Parallel()
	for name, flags := range gitHosts(t) {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			repo := makeRepo(t)
			wt := filepath.Join(t.TempDir(), "wt")
			marker := filepath.Join(t.TempDir(), "pwned")
			o, _ := runStar(t, `git.worktree_create("topic", args["wt"], repo=args["repo"])`,
				append([]string{"-a", "repo=" + repo, "-a", "wt=" + wt}, flags...)...)
			o.expect(t, 0)
			plantFsmonitor(t, wt, marker)
			for _, call := range []string{
				`git.status(args["wt"])`,
				`git.info(args["wt"])`,
				`git.branches(args["wt"])`,
				`git.worktree_remove(args["wt"], repo=args["repo"])`,
			} {
				o, _ := runStar(t, call, append([]string{"-a", "repo=" + repo, "-a", "wt=" + wt}, flags...)...)
				builtin, _, _ := strings.Cut(call, "(")
				o.expect(t, 1, builtin+": "+wt+": ")
				if !strings.Contains(o.stderr, "inside the worktree itself") && !strings.Contains(o.stderr, "not_a_worktree") {
					t.Errorf("%s: the error does not say why:\n%s", call, o.stderr)
				}
				if _, err := os.Stat(marker); err == nil {
					t.Fatalf("%s ran the planted config's program", call)
				}
			}
			if _, err := os.Stat(filepath.Join(wt, "README")); err != nil {
				t.Errorf("the refused removal deleted the worktree: %v", err)
			}
		})
	}
}

// Relative paths given to git.* are the recipe's: against the directory
// sous runs in, whether the host is the embedded daemon or a socket daemon
// started somewhere else. Not parallel: it changes the working directory.
func TestGitRelativePathsAreTheRunners(t *testing.T) {
	repo := makeRepo(t)
	if err := os.Mkdir(filepath.Join(repo, "sub"), 0o755); err != nil {
		t.Fatal(err)
	}
	elsewhere := makeRepo(t) // the socket daemon's working directory, a repository too
	if out, err := exec.Command("git", "-C", elsewhere, "branch", "-m", "main", "elsewhere").CombinedOutput(); err != nil {
		t.Fatalf("%v: %s", err, out)
	}
	sock, _ := daemontest.ServeUnix(t, daemon.Config{Token: "tok", Dir: elsewhere})
	recipe := filepath.Join(t.TempDir(), "main.star")
	if err := os.WriteFile(recipe, []byte(`
print(git.info(".").branch, git.info("sub").root == args["repo"], git.status().clean, "elsewhere" in git.branches())
w = git.worktree_create(args["branch"], "wt-rel")
print(w.path == args["repo"] + "/wt-rel", git.info("wt-rel").branch == args["branch"], w.new_branch)
git.worktree_remove("wt-rel")
print(files.stat(args["repo"] + "/wt-rel").exists)
`), 0o644); err != nil {
		t.Fatal(err)
	}
	t.Chdir(repo)
	for name, flags := range map[string][]string{
		"embedded": nil,
		"socket":   {"--socket", sock, "--token-file", tokenFile(t, "tok")},
	} {
		o := sous(t, append([]string{"run", recipe, "-a", "repo=" + repo, "-a", "branch=" + name}, flags...)...)
		if o.code != 0 || !strings.HasPrefix(o.stderr, "main True True False\nTrue True True\nFalse\n") {
			t.Errorf("%s: exit %d\n%s", name, o.code, o.stderr)
		}
	}
}

// sous git worktree says what it did and refuses to lose work on every
// daemon: with the git extensions, and without them (checks beforehand).
func TestGitWorktreeCLI(t *testing.T) {
	t.Parallel()
	for name, flags := range gitHosts(t) {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			repo := makeRepo(t)
			wt := filepath.Join(t.TempDir(), "wt")
			run := func(args ...string) outcome {
				return sous(t, append(append([]string{"git", "worktree"}, args...), flags...)...)
			}
			if o := run("create", "feature", wt, "--repo", repo, "--source", "main"); o.code != 0 || o.stdout != "created "+wt+" on existing branch feature (--source main not used)\n" {
				t.Errorf("create on an existing branch: exit %d, %q, %q", o.code, o.stdout, o.stderr)
			}
			os.WriteFile(filepath.Join(wt, "notes.txt"), []byte("unsaved"), 0o644)
			if o := run("remove", wt, "--repo", repo); o.code != 1 ||
				o.stderr != "sous: "+wt+": uncommitted changes that removing it would lose:\n  ?? notes.txt\n(--force removes it anyway)\n" {
				t.Errorf("remove of a dirty worktree: exit %d, %q", o.code, o.stderr)
			}
			if _, err := os.Stat(filepath.Join(wt, "notes.txt")); err != nil {
				t.Fatalf("the refused removal lost the file: %v", err)
			}
			if o := run("remove", wt, "--repo", repo, "--force"); o.code != 0 || o.stdout != "removed\n" {
				t.Errorf("remove --force: exit %d, %q, %q", o.code, o.stdout, o.stderr)
			}
			if o := run("create", "topic", wt, "--repo", repo); o.code != 0 || o.stdout != "created "+wt+" on new branch topic from main\n" {
				t.Errorf("create on a new branch: exit %d, %q, %q", o.code, o.stdout, o.stderr)
			}
		})
	}
}
