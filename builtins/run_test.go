package builtins

import (
	"slices"
	"strings"
	"testing"
)

// TestRunShapesAProcess: run and spawn on a process that wrote canned
// output and exited: the echo goes to the runner's stdout and stderr, the
// Result and Process carry what the daemon's frames said, and check=True
// fails naming the command, its status and the end of its stderr.
func TestRunShapesAProcess(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	f.daemon.program("greet", fakeProgram{stdout: "hello\nworld\n", stderr: "careful\n", exit: 3})
	r := f.run(`
r = run("greet", ["--loud"], check=False, echo=False)
print(r.status, r.exit_code, r.ok, repr(r.stdout), repr(r.stderr), r.stages[0].exit_code)
p = spawn("greet", id="g1", echo=False)
print(p.id, p.pid, p.wait().exit_code, repr(p.output()), repr(p.output("stderr")))
run(["greet", "again"])
`)
	r.expect(t, 1,
		`failed 3 False "hello\nworld\n" "careful\n" 3`+"\n"+`g1 1002 3 "hello\nworld\n" "careful\n"`+"\n",
		"careful\n", // the last run's echo
		"Error in run: run: `greet again`: exit code 3 (status \"failed\")")
	if r.stdout != "hello\nworld\n" {
		t.Errorf("stdout (the last run's echo): %q", r.stdout)
	}
	sent := []string{"process.spawn greet --loud", "process.spawn greet", "process.spawn greet again"}
	if got := f.daemon.sent(); !slices.Equal(got, sent) {
		t.Errorf("sent:\n%s\nwant:\n%s", strings.Join(got, "\n"), strings.Join(sent, "\n"))
	}
}
