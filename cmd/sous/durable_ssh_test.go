package main

import (
	"os/exec"
	"strings"
	"testing"
)

// TestDurableOverSSH: a run over ssh is journaled by the daemon the ssh
// bridge reaches, with no flag; killed, it is listed as resumable and
// resumed over ssh by another runner, with every command done once. Its
// runner's ssh session ends with it (ssh reads EOF), and with it the
// connection that held the run: the resume may have to wait for that.
func TestDurableOverSSH(t *testing.T) {
	f := newSSHFixture(t)
	dir := durableDir(t, daemonRecipe)
	sous := func(cwd string, extra []string, args ...string) (outcome, bool) {
		t.Helper()
		cmd := exec.Command(f.bin, args...)
		cmd.Dir, cmd.Env = cwd, append(append([]string(nil), f.env...), extra...)
		return runKillable(t, cmd)
	}
	o, killed := sous(dir, []string{"SOUS_FAULT_JOURNAL=4"}, "run", "main.star", "-a", "dir="+dir, "--remote", f.remote)
	if !killed {
		t.Fatalf("not killed: %d\n%s", o.code, o.stderr)
	}
	id := runIDOf(t, o)
	if got := counts(t, dir); got != `a="a\n" b="" c="" ` {
		t.Fatalf("before the resume: counters %s", got)
	}
	// The dead runner's ssh session may still be closing.
	o, _ = retryWhileReleased([]string{"resume"}, func() (outcome, bool) {
		return sous(t.TempDir(), nil, "resume", id, "--remote", f.remote)
	})
	o.expect(t, 0, "sous: resuming run "+id)
	if recipePrints(o) != "done" {
		t.Errorf("the resume printed %q, want only what the run had not printed", recipePrints(o))
	}
	if got := counts(t, dir); got != eachOnce {
		t.Errorf("counters %s, want each once", got)
	}
	o, _ = sous(t.TempDir(), nil, "runs", "--remote", f.remote)
	o.expect(t, 0)
	if line := runsLine(t, o, id); !strings.Contains(line, "finished ok") {
		t.Errorf("runs: %q", line)
	}
}
