package main

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

// gitIn runs git in dir for a test's setup and returns its trimmed output.
func gitIn(t *testing.T, dir string, args ...string) string {
	t.Helper()
	out, err := exec.Command("git", append([]string{"-C", dir}, args...)...).CombinedOutput()
	if err != nil {
		t.Fatalf("git %v: %v\n%s", args, err, out)
	}
	return strings.TrimSpace(string(out))
}

// finishRepo is makeRepo with an identity configured and a bare
// repository as its origin.
func finishRepo(t *testing.T) (repo, bare string) {
	t.Helper()
	repo = makeRepo(t)
	gitIn(t, repo, "config", "user.name", "Recipe Test")
	gitIn(t, repo, "config", "user.email", "recipe@example.com")
	bare = t.TempDir()
	gitIn(t, bare, "init", "-q", "--bare")
	gitIn(t, repo, "remote", "add", "origin", bare)
	return repo, bare
}

// A worktree taken to the finish line: diff (with base and stat), commit,
// push to a bare remote, squash-merge back; a conflicting branch is
// reported and the repository left clean. On every host, including a
// daemon without the git.* methods (the builtins' fallback through
// process.spawn).
func TestGitFinishLine(t *testing.T) {
	t.Parallel()
	for name, flags := range gitHosts(t) {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			repo, bare := finishRepo(t)
			tmp := t.TempDir()
			o, _ := runStar(t, `
repo, tmp = args["repo"], args["tmp"]
wt = tmp + "/topic"
git.worktree_create("topic", wt, repo=repo)
sh("echo more >> README; echo new > NEW", cwd=wt, echo=False)
print("diff:", "+more" in git.diff(wt), "NEW" in git.diff(wt))
c = git.commit(wt, "topic work")
print("commit:", len(c), c == run(["git", "rev-parse", "HEAD"], cwd=wt, echo=False).stdout.strip())
print("stat:", git.diff(wt, base="main", stat=True).strip().splitlines()[-1].strip())
print("clean:", git.diff(wt) == "")
git.push(wt)
r = git.merge("topic", repo=repo, squash=True, message="squash topic")
print("merge:", r.ok, r.conflicts, r.commit == run(["git", "rev-parse", "HEAD"], cwd=repo, echo=False).stdout.strip())

clash = tmp + "/clash"
git.worktree_create("clash", clash, repo=repo, source="feature")
sh("echo theirs > README", cwd=clash, echo=False)
git.commit(clash, "clash")
r = git.merge("clash", repo=repo)
print("conflict:", r.ok, r.commit, r.conflicts, git.status(repo).clean)
git.worktree_remove(clash, repo=repo, force=True)
git.worktree_remove(wt, repo=repo, force=True)
`, append([]string{"-a", "repo=" + repo, "-a", "tmp=" + tmp}, flags...)...)
			o.expect(t, 0,
				"diff: True False",
				"commit: 40 True",
				"stat: 2 files changed, 2 insertions(+)",
				"clean: True",
				"merge: True [] True",
				`conflict: False None ["README"] True`)
			if got, want := gitIn(t, bare, "rev-parse", "refs/heads/topic"), gitIn(t, repo, "rev-parse", "topic"); got != want {
				t.Errorf("the remote's topic is %s, want %s", got, want)
			}
			if got := gitIn(t, repo, "log", "-1", "--format=%s"); got != "squash topic" {
				t.Errorf("main's last commit is %q", got)
			}
		})
	}
}

// Failures name the builtin and the path, in git's words.
func TestGitFinishFailures(t *testing.T) {
	t.Parallel()
	for name, flags := range gitHosts(t) {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			repo, _ := finishRepo(t)
			for _, tt := range []struct{ src, want string }{
				{`git.commit(args["repo"], "nothing")`, "git.commit: " + repo + ": git commit: nothing to commit"},
				{`git.merge("-n", repo=args["repo"])`, `git.merge: repo ` + repo + `: branch "-n" starts with '-': git would take it for an option`},
				{`git.push(args["repo"], remote="--exec=x")`, `git.push: ` + repo + `: remote "--exec=x" starts with '-'`},
				{`git.diff(args["repo"], base="--output=x")`, `git.diff: ` + repo + `: base "--output=x" starts with '-'`},
				{`git.merge("nope", repo=args["repo"])`, "git.merge: repo " + repo + ": git merge: "},
			} {
				o, _ := runStar(t, tt.src, append([]string{"-a", "repo=" + repo}, flags...)...)
				o.expect(t, 1, tt.want)
			}
			if st := gitIn(t, repo, "status", "--porcelain"); st != "" {
				t.Errorf("the repository changed: %q", st)
			}
		})
	}
}

// include copies untracked files into the new worktree; a daemon without
// the extension fails the call, naming it, before any worktree is made.
func TestGitWorktreeCreateInclude(t *testing.T) {
	t.Parallel()
	for name, flags := range gitHosts(t) {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			repo, _ := finishRepo(t)
			writeTreeAt(t, repo, map[string]string{".env": "TOKEN=x\n", "config/a.local": "a\n", "config/b.txt": "b\n"})
			wt := t.TempDir() + "/wt"
			o, _ := runStar(t, `
wt = git.worktree_create("inc", args["wt"], repo=args["repo"], include=[".env", "config/*.local"]).path
print(files.read(wt + "/.env").strip(), files.read(wt + "/config/a.local").strip(), files.stat(wt + "/config/b.txt").exists)
`, append([]string{"-a", "repo=" + repo, "-a", "wt=" + wt}, flags...)...)
			if name == "old socket" {
				o.expect(t, 1, `git.worktree_create: include needs the daemon extension "git.worktree_create.include", which host unix://`)
				return
			}
			o.expect(t, 0, "TOKEN=x a False")
			o, _ = runStar(t, `git.worktree_create("esc", args["wt"] + "2", repo=args["repo"], include=["../x"])`,
				append([]string{"-a", "repo=" + repo, "-a", "wt=" + wt}, flags...)...)
			o.expect(t, 1, `git.worktree_create: `+wt+`2: include: "../x" leaves the repository`)
		})
	}
}

// writeTreeAt writes files (relative names) under dir.
func writeTreeAt(t *testing.T, dir string, files map[string]string) {
	t.Helper()
	for name, content := range files {
		p := filepath.Join(dir, name)
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, []byte(content), 0o644); err != nil {
			t.Fatal(err)
		}
	}
}

// A relative path is the recipe's (the directory sous runs in), as for the
// other git builtins, on every local host.
func TestGitFinishRelativePaths(t *testing.T) {
	t.Parallel()
	cwd, err := os.Getwd()
	if err != nil {
		t.Fatal(err)
	}
	for name, flags := range gitHosts(t) {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			repo, _ := finishRepo(t)
			rel, err := filepath.Rel(cwd, repo)
			if err != nil {
				t.Fatal(err)
			}
			writeTreeAt(t, repo, map[string]string{"README": "changed\n"})
			o, _ := runStar(t, `
rel = args["rel"]
print("diff:", "+changed" in git.diff(rel))
print("commit:", len(git.commit(rel, "relative")))
print("merge:", git.merge("feature", repo=rel).ok)
`, append([]string{"-a", "rel=" + rel}, flags...)...)
			o.expect(t, 0, "diff: True", "commit: 40", "merge: True")
			if got := gitIn(t, repo, "log", "-1", "--format=%s"); got != "relative" {
				t.Errorf("last commit %q", got)
			}
		})
	}
}
