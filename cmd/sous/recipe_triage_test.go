package main

import (
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"github.com/seed5ad92d46/sous/internal/claudecli"
)

// commitTree makes dir a git repository with everything in it committed.
func commitTree(t *testing.T, dir string) {
	t.Helper()
	for _, args := range [][]string{{"init", "-q", "-b", "main"}, {"add", "."}, {"commit", "-q", "-m", "first"}} {
		cmd := exec.Command("git", args...)
		cmd.Dir = dir
		cmd.Env = append(os.Environ(), "GIT_AUTHOR_NAME=t", "GIT_AUTHOR_EMAIL=t@e", "GIT_COMMITTER_NAME=t",
			"GIT_COMMITTER_EMAIL=t@e", "GIT_CONFIG_GLOBAL=/dev/null", "GIT_CONFIG_NOSYSTEM=1")
		if out, err := cmd.CombinedOutput(); err != nil {
			t.Fatalf("git %v: %v\n%s", args, err, out)
		}
	}
}

// TestRecipeAgentTriage runs recipes/agent-triage.star the way its header
// says to run it offline, sous run --fake-model recipes/agent-triage.fake.json,
// with the real CLI of both versions, on a module whose TestAdd fails: the
// shipped script's tool call runs go test for real, the guard hook denies
// the rm and the write outside the worktree, the report comes back as typed
// data, and the worktree and branch are gone afterwards. The environment
// names a model API nobody serves: --fake-model must win over it.
func TestRecipeAgentTriage(t *testing.T) {
	t.Parallel()
	escape := "/tmp/agent-triage-was-here.txt" // where the script's Write aims
	for _, version := range []string{claudecli.WebSocket, claudecli.Latest} {
		t.Run(version, func(t *testing.T) {
			t.Parallel()
			cli, err := json.Marshal(claudecli.Find(t, version))
			if err != nil {
				t.Fatal(err)
			}
			repo, err := filepath.EvalSymlinks(goModule(t, false))
			if err != nil {
				t.Fatal(err)
			}
			commitTree(t, repo)
			w := &agentWorld{t: t}
			w.env = []string{"PATH=" + os.Getenv("PATH"), "LANG=C.UTF-8", "TERM=dumb"}
			for k, v := range claudecli.Env(t.TempDir(), "http://127.0.0.1:9") {
				w.env = append(w.env, k+"="+v)
			}
			w.shareGoCache()

			o := w.sous("run", "--fake-model", recipe("agent-triage.fake.json"), recipe("agent-triage.star"), "-a", "repo="+repo, "-a", "cli="+string(cli))
			wt := repo + ".triage"
			o.expect(t, 0,
				"triage of "+repo+" in "+wt+"\n",
				"run_tests: go test -count=1 ./...: exit code 1, failing: TestAdd\n",
				"tool: mcp__sous__run_tests ok [session ",
				"guard: deny Bash rm -rf /tmp/agent-triage-scratch: no rm during a triage\n",
				"hook: PreToolUse deny Bash rm -rf /tmp/agent-triage-scratch (no rm during a triage) [session ",
				"guard: deny Write "+escape+": edits stay inside the worktree "+wt+"\n",
				"hook: PreToolUse deny Write "+escape+" (edits stay inside the worktree "+wt+") [session ",
				"failing: TestAdd\n",
				"suspect files: add.go\n",
				"plan: Add returns the wrong sum for (1, 2): ",
			)
			// The CLI prices the script's usage for the model it picked.
			if !regexp.MustCompile(`\nagent: success, \$0\.01\d\d, \d+ turns, 2 tool uses blocked by the guard\n`).MatchString(o.stderr) {
				t.Errorf("no agent line with its cost, turns and the guard's two blocks:\n%s", o.stderr)
			}
			for _, unwanted := range []string{"note: run_tests never saw", "sous: --fake-model:", "sous: deferred"} {
				if strings.Contains(o.stderr, unwanted) {
					t.Errorf("stderr has %q:\n%s", unwanted, o.stderr)
				}
			}
			if fileExists(wt) {
				t.Error("the worktree is still there")
			}
			if out, err := exec.Command("git", "-C", repo, "branch", "--list", "agent-triage").Output(); err != nil || len(out) != 0 {
				t.Errorf("the branch is still there: %q %v", out, err)
			}
			if fileExists(escape) {
				t.Errorf("%s was written: the guard let the write outside the worktree through", escape)
			}
		})
	}
}

// TestRecipeAgentTriageTools: the recipe's own logic, with a script of the
// test's: run_tests refuses a package that is a flag (the model gets an
// error, the turn goes on) and passes -run; the guard has no objection to
// a write inside the worktree, which the policy allows; a report naming a
// test run_tests never saw fail gets a note.
func TestRecipeAgentTriageTools(t *testing.T) {
	t.Parallel()
	cli, err := json.Marshal(claudecli.Find(t, claudecli.Latest))
	if err != nil {
		t.Fatal(err)
	}
	repo, err := filepath.EvalSymlinks(goModule(t, false))
	if err != nil {
		t.Fatal(err)
	}
	commitTree(t, repo)
	wt := filepath.Join(t.TempDir(), "tree")
	notes := filepath.Join(wt, "NOTES.md")
	script := writeScript(t, `[
  {"tool_use": {"name": "mcp__sous__run_tests", "input": {"packages": ["-exec=/bin/true", "./..."]}}},
  {"tool_use": {"name": "mcp__sous__run_tests", "input": {"run": "TestAdd"}}},
  {"tool_use": {"name": "Write", "input": {"file_path": "`+notes+`", "content": "Add is off by one\n"}}},
  {"structured_output": {"failing": ["TestAdd", "TestGhost"], "suspect_files": [], "plan": "look again"}}
]`)
	w := &agentWorld{t: t}
	w.env = []string{"PATH=" + os.Getenv("PATH"), "LANG=C.UTF-8", "TERM=dumb"}
	for k, v := range claudecli.Env(t.TempDir(), "http://127.0.0.1:9") {
		w.env = append(w.env, k+"="+v)
	}
	w.shareGoCache()
	// The worktree, NOTES.md with it, is gone when the recipe ends: the
	// guard's and the approval's lines say the write went through.
	o := w.sous("run", "--fake-model", script, recipe("agent-triage.star"), "-a", "repo="+repo, "-a", "into="+wt, "-a", "cli="+string(cli))
	o.expect(t, 0,
		"tool: mcp__sous__run_tests error [session ",
		"run_tests: go test -count=1 -run TestAdd ./...: exit code 1, failing: TestAdd\n",
		"guard: no objection to Write "+notes+"\n",
		"approval: allow Write "+notes+" (by session",
		"failing: TestAdd, TestGhost\n",
		"suspect files: none\n",
		"note: run_tests never saw TestGhost fail\n",
	)
	if n := strings.Count(o.stderr, "run_tests: go test"); n != 1 {
		t.Errorf("go test ran %d times, want once (the flag refused before it ran):\n%s", n, o.stderr)
	}
	if fileExists(wt) {
		t.Error("the worktree is still there")
	}
}
