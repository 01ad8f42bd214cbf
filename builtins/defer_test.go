package builtins

import (
	"bytes"
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/seed5ad92d46/sous/internal/daemontest"

	"github.com/seed5ad92d46/sous/internal/testutil"
	"github.com/seed5ad92d46/sous/runtime"
)

// TestDeferOrderAndArguments: deferred calls run when the recipe ends,
// newest first, with the arguments given to defer; one that defers another
// call has it run next.
func TestDeferOrderAndArguments(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	f.file("lib.star", `
def setup():
    defer(print, "second (from lib.star)")
`)
	r := f.run(`
load("lib.star", "setup")
def note(what, suffix = ""):
    print("deferred", what + suffix)
defer(note, "first", suffix = "!")
setup()
defer(print, "third", "x", sep = "-")
defer(lambda: defer(note, "from a deferred call"))
print("body done")
`)
	if r.err != nil {
		t.Fatalf("Run: %v\n%s", r.err, r.stderr)
	}
	want := "body done\ndeferred from a deferred call\nthird-x\nsecond (from lib.star)\ndeferred first!\n"
	if r.stderr != want {
		t.Errorf("stderr:\n%s\nwant:\n%s", r.stderr, want)
	}
}

// TestDeferOnFailure: the deferred calls run however the recipe ends; a
// deferred call that fails is one line, the others still run, and the exit
// code is the recipe's own failure's, or 1 when only cleanup failed.
func TestDeferOnFailure(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name, src string
		code      int
		want      []string // in this order on stderr
	}{
		{"fail", "defer(print, \"cleaned\")\nfail(\"boom\")\n", 1,
			[]string{"Error in fail: fail: boom", "cleaned\n"}},
		{"failing builtin", "defer(print, \"cleaned\")\nrun(\"false\", echo = False)\n", 1,
			[]string{"Error in run: run: `false`: exit code 1", "cleaned\n"}},
		{"runtime error in a function", "def f():\n    defer(print, \"cleaned\")\n    return {}[1]\nf()\n", 1,
			[]string{"key 1 not in dict", "cleaned\n"}},
		{"only a deferred call fails", "defer(print, \"last\")\ndefer(fail, \"cleanup\\nbroke\")\ndefer(print, \"first\")\nprint(\"body\")\n", 1,
			[]string{"body\n", "first\n", "sous: deferred fail (DIR/main.star:2:6) failed: fail: cleanup; broke\n", "last\n"}},
		{"a deferred call fails after the recipe failed", "defer(run, \"false\", echo = False)\ndefer(print, \"first\")\nfail(\"boom\")\n", 1,
			[]string{"Error in fail: fail: boom", "first\n", "sous: deferred run (DIR/main.star:1:6) failed: run: `false`: exit code 1 (status \"failed\")\n"}},
		{"a deferred Starlark function fails", "def cleanup():\n    x = 1\n    return x.nope\ndefer(cleanup)\n", 1,
			[]string{"sous: deferred cleanup (DIR/main.star:4:6) failed: int has no .nope field or method\n"}},
		{"not a function", "defer(print, \"never\")\ndefer(1)\n", 1,
			[]string{"Error in defer: defer: fn: want a function, got int", "never\n"}},
		{"no function", "defer()\n", 1, []string{"Error in defer: defer: missing argument for fn"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			// run("false") on the fake daemon: a program that exits 1.
			f := newFixture(t)
			f.daemon.program("false", fakeProgram{exit: 1})
			r := f.run(tt.src)
			stderr := r.stderr
			if r.code != tt.code {
				t.Fatalf("exit code %d, want %d\n%s", r.code, tt.code, stderr)
			}
			rest := stderr
			for _, w := range tt.want {
				i := strings.Index(rest, w)
				if i < 0 {
					t.Fatalf("stderr lacks %q after what came before:\n%s", w, stderr)
				}
				rest = rest[i+len(w):]
			}
		})
	}
}

// TestDeferFailureInJSON: a failing deferred call is a log event, and the
// end event says the run failed because of it.
func TestDeferFailureInJSON(t *testing.T) {
	t.Parallel()
	r := newFixture(t).withJSON().run("defer(fail, \"cleanup broke\")\nprint(\"body\")\n")
	stdout, stderr := r.stdout, r.stderr
	if r.code != 1 {
		t.Fatalf("exit code %d, want 1\n%s", r.code, stderr)
	}
	var events []map[string]any
	for _, line := range strings.Split(strings.TrimSpace(stdout), "\n") {
		var e map[string]any
		if err := json.Unmarshal([]byte(line), &e); err != nil {
			t.Fatalf("not JSON: %q", line)
		}
		events = append(events, e)
	}
	report := "sous: deferred fail (DIR/main.star:1:6) failed: fail: cleanup broke"
	if len(events) != 4 || events[1]["text"] != "body" || events[2]["event"] != "log" || events[2]["text"] != report {
		t.Fatalf("events:\n%s", stdout)
	}
	end := events[3]
	if end["event"] != "end" || end["status"] != "failed" || end["exit_code"] != 1.0 || end["error"] != strings.TrimPrefix(report, "sous: ") {
		t.Errorf("end event: %v", end)
	}
	if !strings.Contains(stderr, report) {
		t.Errorf("stderr:\n%s", stderr)
	}
}

// TestDeferRunsWhenInterrupted: on an interrupt the deferred calls run
// after the recipe stopped and before the embedded daemon shuts down, so
// they can still use it; its processes are stopped after them.
func TestDeferRunsWhenInterrupted(t *testing.T) {
	t.Parallel()
	dir := testutil.WriteTree(t, map[string]string{"main.star": `
defer(run, "sh", ["-c", "echo cleanup ran > ` + "\" + args[\"dir\"] + \"" + `/cleanup"], echo = False)
spawn(["sh", "-c", "echo $$ > ` + "\" + args[\"dir\"] + \"" + `/pid; exec sleep 30"], echo = False)
sleep(30)
`})
	ctx, cancel := context.WithCancelCause(context.Background())
	var stderr testutil.SyncBuffer
	done := make(chan error, 1)
	go func() {
		done <- runtime.Run(ctx, runtime.Options{
			Recipe: filepath.Join(dir, "main.star"), Args: map[string]string{"dir": dir},
			Stdout: &bytes.Buffer{}, Stderr: &stderr, Table: DefaultTable(), Host: daemontest.EmbeddedTarget(),
		})
	}()
	pid := waitPidFile(t, filepath.Join(dir, "pid"))
	cancel(&runtime.Interrupt{Signal: syscall.SIGINT, Code: 130})
	select {
	case err := <-done:
		if code := exitCode(err); code != 130 {
			t.Fatalf("exit code %d, want 130\n%s", code, stderr.String())
		}
	case <-time.After(10 * time.Second):
		t.Fatal("the run did not stop when its context was cancelled")
	}
	if b, err := os.ReadFile(filepath.Join(dir, "cleanup")); err != nil || string(b) != "cleanup ran\n" {
		t.Errorf("the deferred run did not run: %q %v\n%s", b, err, stderr.String())
	}
	if !testutil.Exits(pid, 3*time.Second) {
		t.Errorf("process %d survived the interrupted run", pid)
	}
	if !strings.HasPrefix(stderr.String(), "sous: interrupted\n") {
		t.Errorf("stderr:\n%s", stderr.String())
	}
}

// TestSecondInterruptAbandonsCleanup: when the cleanup context ends (a
// second Ctrl-C), the deferred call running stops and the others are not
// run; the run still ends interrupted and its processes are stopped.
func TestSecondInterruptAbandonsCleanup(t *testing.T) {
	t.Parallel()
	dir := testutil.WriteTree(t, map[string]string{"main.star": `
defer(print, "never")
defer(run, "sh", ["-c", "echo $$ > ` + "\" + args[\"dir\"] + \"" + `/pid; exec sleep 30"], echo = False)
print("started")
sleep(30)
`})
	ctx, cancel := context.WithCancelCause(context.Background())
	cleanup, abandon := context.WithCancel(context.Background())
	defer abandon()
	var stderr testutil.SyncBuffer
	done := make(chan error, 1)
	go func() {
		done <- runtime.Run(ctx, runtime.Options{
			Recipe: filepath.Join(dir, "main.star"), Args: map[string]string{"dir": dir},
			Stdout: &bytes.Buffer{}, Stderr: &stderr, Table: DefaultTable(), Host: daemontest.EmbeddedTarget(), Cleanup: cleanup,
		})
	}()
	for deadline := time.Now().Add(10 * time.Second); !strings.Contains(stderr.String(), "started"); time.Sleep(5 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatal("the recipe did not start")
		}
	}
	cancel(&runtime.Interrupt{Signal: syscall.SIGINT, Code: 130})
	pid := waitPidFile(t, filepath.Join(dir, "pid")) // the deferred run started
	abandon()
	select {
	case err := <-done:
		if code := exitCode(err); code != 130 {
			t.Fatalf("exit code %d, want 130\n%s", code, stderr.String())
		}
	case <-time.After(10 * time.Second):
		t.Fatal("the run did not stop when its cleanup was abandoned")
	}
	out := stderr.String()
	if strings.Contains(out, "never") || !strings.Contains(out, "sous: cleanup abandoned: 1 deferred call not run\n") {
		t.Errorf("stderr:\n%s", out)
	}
	if !testutil.Exits(pid, 3*time.Second) {
		t.Errorf("process %d survived the interrupted run", pid)
	}
}

// waitPidFile waits for a recipe's child to write its pid to path.
func waitPidFile(t *testing.T, path string) int {
	t.Helper()
	for deadline := time.Now().Add(10 * time.Second); ; time.Sleep(5 * time.Millisecond) {
		if b, err := os.ReadFile(path); err == nil && bytes.HasSuffix(b, []byte("\n")) {
			pid, err := strconv.Atoi(strings.TrimSpace(string(b)))
			if err != nil {
				t.Fatalf("%s: %v", path, err)
			}
			return pid
		}
		if time.Now().After(deadline) {
			t.Fatalf("nothing wrote %s", path)
		}
	}
}
