package main

import (
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/seed5ad92d46/sous/internal/claudecli"
	"github.com/seed5ad92d46/sous/internal/testutil"
	"github.com/seed5ad92d46/sous/runtime/agent/fakemodel"
)

// worktreeRecipe creates a worktree on branch tmp/wt under args["dir"],
// defers its removal and that of its branch, notes the deferred calls in
// args["dir"]/order as they run, then does what rest says.
const worktreeRecipe = `
root = args["repo"]
order = args["dir"] + "/order"
def note(what):
    run("sh", ["-c", "echo %s >> %s" % (what, order)], echo = False)
wt = git.worktree_create("tmp/wt", args["dir"] + "/wt", repo = root)
defer(note, "registered-first")
defer(run, "git", ["branch", "-D", "tmp/wt"], cwd = root, echo = False)
defer(git.worktree_remove, wt.path, repo = root)
defer(note, "registered-last")
print("started")
`

// assertNoWorktree checks that the recipe's worktree and branch are gone
// and that its deferred calls ran newest first.
func assertNoWorktree(t *testing.T, repo, dir string) {
	t.Helper()
	if fileExists(filepath.Join(dir, "wt")) {
		t.Error("the worktree directory was left behind")
	}
	out, err := exec.Command("git", "-C", repo, "worktree", "list", "--porcelain").Output()
	if err != nil || strings.Count(string(out), "worktree ") != 1 {
		t.Errorf("git worktree list: %v\n%s", err, out)
	}
	out, err = exec.Command("git", "-C", repo, "branch", "--list", "tmp/*").Output()
	if err != nil || len(out) != 0 {
		t.Errorf("the branch was left behind: %q %v", out, err)
	}
	b, err := os.ReadFile(filepath.Join(dir, "order"))
	if want := "registered-last\nregistered-first\n"; string(b) != want {
		t.Errorf("deferred calls ran as %q (%v), want %q", b, err, want)
	}
}

// TestDeferRemovesTheWorktreeOfAFailedRecipe: a recipe that creates a
// worktree and then fails leaves nothing behind, so running it again
// does not fail on "already exists".
func TestDeferRemovesTheWorktreeOfAFailedRecipe(t *testing.T) {
	t.Parallel()
	repo := makeRepo(t)
	for i := range 2 {
		o, dir := runStar(t, worktreeRecipe+"run(\"false\", echo = False)\n", "-a", "repo="+repo)
		o.expect(t, 1, "Error in run: run: `false`: exit code 1")
		if strings.Contains(o.stderr, "deferred") {
			t.Errorf("run %d: a deferred call failed:\n%s", i, o.stderr)
		}
		assertNoWorktree(t, repo, dir)
	}
}

// TestDeferRunsOnSIGINT sends a real SIGINT to a real `sous run`: the
// deferred calls run (newest first, with the embedded daemon still up to
// remove the worktree) and sous exits 130.
func TestDeferRunsOnSIGINT(t *testing.T) {
	t.Parallel()
	bin := sousBinary(t)
	repo := makeRepo(t)
	dir := testutil.WriteTree(t, map[string]string{"main.star": worktreeRecipe + "sleep(30)\n"})
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	cmd := exec.CommandContext(ctx, bin, "run", dir+"/main.star", "-a", "dir="+dir, "-a", "repo="+repo)
	stderr := &testutil.SyncBuffer{}
	cmd.Stderr = stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	waitFor(t, stderr, "started\n")
	cmd.Process.Signal(syscall.SIGINT)
	if code := exitCode(cmd.Wait()); code != 130 {
		t.Fatalf("exit code %d, want 130\n%s", code, stderr.String())
	}
	if !strings.HasPrefix(withoutRunLine(stderr.String()), "started\nsous: interrupted\n") || strings.Contains(stderr.String(), "deferred") {
		t.Errorf("stderr:\n%s", stderr.String())
	}
	assertNoWorktree(t, repo, dir)
}

// TestSecondSIGINTAbandonsCleanup: a second Ctrl-C while a deferred call
// runs stops it and skips the rest; sous still stops its processes and
// exits 130.
func TestSecondSIGINTAbandonsCleanup(t *testing.T) {
	t.Parallel()
	bin := sousBinary(t)
	dir := testutil.WriteTree(t, map[string]string{"main.star": `
defer(print, "never")
defer(run, "sh", ["-c", "echo $$ > ` + "\" + args[\"dir\"] + \"" + `/pid; exec sleep 30"], echo = False)
print("started")
sleep(30)
`})
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	cmd := exec.CommandContext(ctx, bin, "run", dir+"/main.star", "-a", "dir="+dir)
	stderr := &testutil.SyncBuffer{}
	cmd.Stderr = stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	waitFor(t, stderr, "started\n")
	cmd.Process.Signal(syscall.SIGINT)
	for deadline := time.Now().Add(10 * time.Second); !lineWritten(dir + "/pid"); time.Sleep(5 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("the deferred run did not start:\n%s", stderr.String())
		}
	}
	child := readPid(t, dir+"/pid")
	start := time.Now()
	cmd.Process.Signal(syscall.SIGINT)
	if code := exitCode(cmd.Wait()); code != 130 {
		t.Fatalf("exit code %d, want 130\n%s", code, stderr.String())
	}
	if d := time.Since(start); d > 5*time.Second {
		t.Errorf("sous took %s to stop after the second SIGINT", d)
	}
	out := stderr.String()
	if strings.Contains(out, "never") || !strings.Contains(out, "sous: cleanup abandoned: 1 deferred call not run\n") {
		t.Errorf("stderr:\n%s", out)
	}
	waitGone(t, child, 3*time.Second)
}

// waitFor waits until the buffer holds s.
func waitFor(t *testing.T, b *testutil.SyncBuffer, s string) {
	t.Helper()
	for deadline := time.Now().Add(10 * time.Second); !strings.Contains(b.String(), s); time.Sleep(5 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("no %q within 10 s:\n%s", s, b.String())
		}
	}
}

// TestAgentRecipesCleanUpWhenTheyFail: an agent recipe that stops before
// its report (here: no CLI to start) removes the worktrees and branches it
// made, so the next run starts clean.
func TestAgentRecipesCleanUpWhenTheyFail(t *testing.T) {
	t.Parallel()
	for _, r := range []struct{ name, task, branches string }{
		{"agent-fix.star", "task=fix it", "agent-fix/*"},
		{"agent-fanout.star", "prompt=write notes", "fanout-agent/*"},
		{"agent-triage.star", "task=CI is red", "agent-triage"},
	} {
		t.Run(r.name, func(t *testing.T) {
			t.Parallel()
			repo := makeRepo(t)
			into := filepath.Join(t.TempDir(), "trees")
			for range 2 {
				o := sous(t, "run", recipe(r.name), "-a", "repo="+repo, "-a", r.task, "-a", "into="+into, "-a", "cli=sous-no-such-claude")
				o.expect(t, 1, "sdk.session: cli: spawn sous-no-such-claude: executable file not found")
				if strings.Contains(o.stderr, "sous: deferred") {
					t.Errorf("a deferred call failed:\n%s", o.stderr)
				}
				if fileExists(into) {
					t.Error("the failed run left its worktrees")
				}
				out, err := exec.Command("git", "-C", repo, "branch", "--list", r.branches).Output()
				if err != nil || len(out) != 0 {
					t.Errorf("the failed run left its branches: %q %v", out, err)
				}
			}
		})
	}
}

// TestDeferredCallsDenyAgentRequests: once the recipe has ended, a
// permission request of a turn still running is denied ("the recipe is
// stopping") instead of going to the recipe's policies, even when a
// deferred call waits for that turn.
func TestDeferredCallsDenyAgentRequests(t *testing.T) {
	t.Parallel()
	var w *agentWorld
	w = newAgentWorld(t, claudecli.Latest, fakemodel.Options{Func: func(req *fakemodel.Request, n int) fakemodel.Reply {
		if toolTurn(req) == 0 {
			// Ask for the tool only once the recipe has ended.
			for deadline := time.Now().Add(30 * time.Second); !fileExists(filepath.Join(w.dir, "ended")); time.Sleep(10 * time.Millisecond) {
				if time.Now().After(deadline) {
					return fakemodel.Text("the recipe never ended")
				}
			}
			return fakemodel.ToolUse("Write", map[string]any{"file_path": filepath.Join(w.dir, "late.txt"), "content": "late\n"})
		}
		return fakemodel.Text("done")
	}})
	o := w.run(`
s = sdk.session(cwd = args["dir"], cli = json.decode(args["cli"]), policy = lambda req: approve(), timeout = 60)
p = s.start("write late.txt")
def finish():
    t = p.wait()
    print("denials:", [d.tool for d in t.denials], t.text)
defer(finish)
defer(run, "touch", [args["dir"] + "/ended"])
fail("stop here")
`)
	o.expect(t, 1, "Error in fail: fail: stop here",
		"approval: deny Write "+filepath.Join(w.dir, "late.txt")+" (by default: the recipe is stopping)",
		`denials: ["Write"] done`)
	if fileExists(filepath.Join(w.dir, "late.txt")) {
		t.Error("the agent wrote after the recipe ended")
	}
}
