package main

import (
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"github.com/seed5ad92d46/sous/internal/testutil"
	"github.com/seed5ad92d46/sous/runtime/event"
	"github.com/seed5ad92d46/sous/runtime/view"
)

// runWithEnv runs `sous run` of src (as main.star in a fresh directory,
// args["dir"] set) in process, with buffers for stdout and stderr (no
// terminal) and env as the whole environment.
func runWithEnv(t *testing.T, env []string, src string, flags ...string) (outcome, string) {
	t.Helper()
	dir := testutil.WriteTree(t, map[string]string{"main.star": src})
	w := &agentWorld{t: t, env: env}
	return w.sous(append([]string{"run", filepath.Join(dir, "main.star"), "-a", "dir=" + dir}, flags...)...), dir
}

// twoEchoing has two processes echo at once (so lines are prefixed), in
// an order that never changes.
const twoEchoing = `
a = spawn(["sh", "-c", "read x; echo a-out; echo a-err >&2"], id = "a")
b = spawn(["sh", "-c", "echo b-out"], id = "b")
b.wait()
a.write("go\n")
a.close_stdin()
a.wait()
print("done")
`

// colourfulEnv is an environment that asks for colours every way it can.
var colourfulEnv = []string{"PATH=" + os.Getenv("PATH"), "TERM=xterm-256color", "COLORTERM=truecolor", "CLICOLOR=1"}

// TestRunOffTerminalIsPlain: not on a terminal, sous run writes the lines
// it always wrote, byte for byte, and not one escape code, whatever TERM
// and COLORTERM say.
func TestRunOffTerminalIsPlain(t *testing.T) {
	t.Parallel()
	o, _ := runWithEnv(t, colourfulEnv, twoEchoing)
	o.expect(t, 0)
	if want := "[b] b-out\n[a] a-out\n"; o.stdout != want {
		t.Errorf("stdout = %q, want %q", o.stdout, want)
	}
	if want := "[a] a-err\ndone\n"; o.stderr != want {
		t.Errorf("stderr = %q, want %q", o.stderr, want)
	}
	if strings.Contains(o.stdout+o.stderr, "\x1b") {
		t.Error("an escape code off a terminal")
	}
}

// TestRunColorAlwaysQuietVerbose: --color=always colours the prefixes off
// a terminal too, each id in its own colour; --quiet keeps only the
// recipe's print; --verbose adds a line per process start and end and the
// summary; the two cannot go together.
func TestRunColorAlwaysQuietVerbose(t *testing.T) {
	t.Parallel()
	o, _ := runWithEnv(t, colourfulEnv, twoEchoing, "--color=always")
	o.expect(t, 0)
	// Each id in its own colour: its preferred one, the next free one for
	// the second if they would share it.
	ca := event.ColorOf("a")
	cb := event.ColorOf("b")
	if cb == ca {
		cb = (ca + 1) % event.ColorSlots
	}
	prefix := func(id string, slot int) string { return view.IDColor(slot) + "[" + id + "]" + view.Reset + " " }
	if want := prefix("b", cb) + "b-out\n" + prefix("a", ca) + "a-out\n"; o.stdout != want {
		t.Errorf("--color=always: stdout = %q, want %q", o.stdout, want)
	}

	o, _ = runWithEnv(t, colourfulEnv, twoEchoing, "--quiet")
	o.expect(t, 0)
	if o.stdout != "" || o.stderr != "done\n" {
		t.Errorf("--quiet: stdout %q, stderr %q; want only the print", o.stdout, o.stderr)
	}

	o, dir := runWithEnv(t, colourfulEnv, twoEchoing, "--verbose")
	o.expect(t, 0)
	want := []string{
		`^sous: \[a\] started: sh -c read x; echo a-out; echo a-err >&2$`,
		`^sous: \[b\] exited with code 0 after \d+`,
		`^─ ok after \S+ · 2 processes$`,
		`^  \[a\]  ok  +\S+  exit 0$`,
	}
	for _, re := range want {
		if !regexp.MustCompile("(?m)" + re).MatchString(o.stderr) {
			t.Errorf("--verbose: stderr lacks a line like %s:\n%s", re, o.stderr)
		}
	}
	if strings.Contains(o.stdout+o.stderr, "\x1b") {
		t.Error("--verbose: an escape code off a terminal")
	}

	o = sous(t, "run", filepath.Join(dir, "main.star"), "--quiet", "--verbose")
	o.expect(t, 2, "sous: run: --quiet and --verbose: choose one\n")
	o = sous(t, "run", filepath.Join(dir, "main.star"), "--color=sometimes")
	o.expect(t, 2, `invalid argument "sometimes" for "--color" flag: want auto, always or never, got "sometimes"`)
}

// githubRecipe has a privileged command denied (no approver: stdin is no
// terminal), a process that fails with something on stderr, and fails
// on line 7.
const githubRecipe = `r = run(["true"], privileged = True, check = False, reason = "just a test")
print("privileged:", r.status)
p = spawn(["sh", "-c", "echo compiling; echo 'boom: the build broke' >&2; exit 3"], id = "build")
p.wait()
s = spawn(["true"], id = "ok")
s.wait()
fail("the build failed with " + str(p.exit_code))
`

// TestRunGitHubActions: with GITHUB_ACTIONS=true a denial is a ::warning::
// line, the failure an ::error line with the recipe's file (relative to
// the workspace) and line, and the summary is appended to
// $GITHUB_STEP_SUMMARY as a Markdown table with the failure and the
// failed process's stderr. With --json the same lines go to stderr and
// stdout stays JSON.
func TestRunGitHubActions(t *testing.T) {
	t.Parallel()
	summary := filepath.Join(t.TempDir(), "step-summary.md")
	if err := os.WriteFile(summary, []byte("earlier step\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	dir := testutil.WriteTree(t, map[string]string{"ci/main.star": githubRecipe})
	env := []string{"PATH=" + os.Getenv("PATH"), "GITHUB_ACTIONS=true", "GITHUB_STEP_SUMMARY=" + summary, "GITHUB_WORKSPACE=" + dir}
	w := &agentWorld{t: t, env: env}
	o := w.sous("run", filepath.Join(dir, "ci", "main.star"))
	o.expect(t, 1,
		"::warning title=sous%3A approval denied::deny Sudo true (by default: no approver allowed this request)\n",
		"::error file=ci/main.star,line=7,col=5,title=sous run failed::fail: the build failed with 3\n")
	if strings.Contains(o.stdout, "::") {
		t.Errorf("workflow commands on stdout: %q", o.stdout)
	}
	b, err := os.ReadFile(summary)
	if err != nil {
		t.Fatal(err)
	}
	md := string(b)
	for _, want := range []string{
		"earlier step\n### ❌ sous run `ci/main.star`: failed after ",
		"| | id | status | duration | exit code | cost | denials |\n",
		"| process | build | failed | ",
		" | 3 |  |  |\n",
		"| process | ok | ok | ",
		"**Denied requests**\n\n- `deny Sudo true (by default: no approver allowed this request)`\n",
		"**Failure** at `ci/main.star:7`: `fail(\"the build failed with \" + str(p.exit_code))`\n\n```\nfail: the build failed with 3\n```\n",
		"stderr of `build` (exit code 3), its last lines:\n\n```\nboom: the build broke\n```\n",
	} {
		if !strings.Contains(md, want) {
			t.Errorf("the step summary lacks %q:\n%s", want, md)
		}
	}
	if !strings.Contains(md, "| **total** | | | ") {
		t.Errorf("the step summary has no total row:\n%s", md)
	}

	os.Remove(summary)
	o = w.sous("run", filepath.Join(dir, "ci", "main.star"), "--json")
	o.expect(t, 1, "::error file=ci/main.star,line=7,col=5,title=sous run failed::fail: the build failed with 3\n")
	o.events(t) // stdout is JSON lines only
	if b, err := os.ReadFile(summary); err != nil || !strings.Contains(string(b), "| process | build | failed | ") {
		t.Errorf("--json: the step summary is %q (%v)", b, err)
	}
}
