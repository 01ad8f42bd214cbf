package builtins

import (
	"bytes"
	"context"
	"errors"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/seed5ad92d46/sous/daemon/client"
	"github.com/seed5ad92d46/sous/internal/daemontest"
	"github.com/seed5ad92d46/sous/internal/testutil"
	"github.com/seed5ad92d46/sous/runtime"
)

// TestDefaultHostConnectsOnFirstUse points the default host at a socket
// nobody serves: a recipe that touches no process, file or repository
// never notices; the first one that does fails there.
func TestDefaultHostConnectsOnFirstUse(t *testing.T) {
	t.Parallel()
	dir := testutil.WriteTree(t, map[string]string{
		"quiet.star": "print(\"no daemon needed\")\n",
		"busy.star":  "print(\"before\")\nfiles.stat(\"/\")\n",
	})
	if err, log := runWithoutDaemon(dir, "quiet.star"); err != nil || log != "no daemon needed\n" {
		t.Errorf("quiet recipe: %v\n%s", err, log)
	}
	err, log := runWithoutDaemon(dir, "busy.star")
	var ee *runtime.ExitError
	if !errors.As(err, &ee) || ee.Code != runtime.CodeFailed {
		t.Fatalf("busy recipe: %v, want exit code 1", err)
	}
	if !strings.Contains(log, "busy.star:2:11") || !strings.Contains(log, "files.stat: unix:///nonexistent/sous.sock: connect to daemon") {
		t.Errorf("log:\n%s", log)
	}
}

// runWithoutDaemon runs the recipe dir/name with its default host a socket
// nobody serves, and returns its error and its log (stderr).
func runWithoutDaemon(dir, name string) (error, string) {
	var stdout, stderr bytes.Buffer
	err := runtime.Run(context.Background(), runtime.Options{
		Recipe: filepath.Join(dir, name), Stdout: &stdout, Stderr: &stderr,
		Host: client.Target{URL: "unix:///nonexistent/sous.sock"}, Table: DefaultTable(),
	})
	return err, stderr.String()
}

// TestInterruptStopsTheThreadAndTheProcesses cancels a run's context as
// the command does on SIGINT.
func TestInterruptStopsTheThreadAndTheProcesses(t *testing.T) {
	t.Parallel()
	dir := testutil.WriteTree(t, map[string]string{"main.star": `
spawn(["sh", "-c", "echo $$ > ` + "\" + args[\"dir\"] + \"" + `/pid; exec sleep 30"], echo=False)
sleep(30)
`})
	ctx, cancel := context.WithCancelCause(context.Background())
	done := make(chan error, 1)
	go func() {
		done <- runtime.Run(ctx, runtime.Options{
			Recipe: filepath.Join(dir, "main.star"), Args: map[string]string{"dir": dir},
			Stdout: &bytes.Buffer{}, Stderr: &bytes.Buffer{}, Table: DefaultTable(), Host: daemontest.EmbeddedTarget(),
		})
	}()
	pidFile := filepath.Join(dir, "pid")
	var pid int
	for deadline := time.Now().Add(10 * time.Second); ; time.Sleep(10 * time.Millisecond) {
		if b, err := os.ReadFile(pidFile); err == nil && bytes.HasSuffix(b, []byte("\n")) {
			pid, _ = strconv.Atoi(strings.TrimSpace(string(b)))
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("the recipe never started its process")
		}
	}
	cancel(&runtime.Interrupt{Signal: syscall.SIGTERM, Code: 143})
	var ee *runtime.ExitError
	select {
	case err := <-done:
		if !errors.As(err, &ee) || ee.Code != 143 {
			t.Fatalf("Run = %v, want exit code 143 from the interrupt's cause", err)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("the run did not stop when its context was cancelled")
	}
	// The embedded daemon is shut down when Run returns: its process group
	// got SIGTERM (gone, or a zombie of an init that does not reap).
	if !testutil.Exits(pid, 3*time.Second) {
		t.Fatalf("process %d survived the interrupted run", pid)
	}
}

// An interrupt during `for l in p.lines()` stops the recipe in the loop:
// nothing after it runs and the run ends interrupted. The iterator used to
// end the loop as if the output had ended, and the statement after it
// could run before the runtime's own cancel of the thread arrived.
func TestInterruptStopsALinesLoop(t *testing.T) {
	t.Parallel()
	dir := testutil.WriteTree(t, map[string]string{"main.star": `
p = spawn(["sh", "-c", "echo $$ > ` + "\" + args[\"dir\"] + \"" + `/pid; while :; do echo tick; sleep 0.005; done"], echo=False)
n = 0
for l in p.lines():
    n += 1
print("AFTER THE LOOP", n)
`})
	pidFile := filepath.Join(dir, "pid")
	for i := range 30 {
		os.Remove(pidFile)
		ctx, cancel := context.WithCancelCause(context.Background())
		var stderr bytes.Buffer
		done := make(chan error, 1)
		go func() {
			done <- runtime.Run(ctx, runtime.Options{
				Recipe: filepath.Join(dir, "main.star"), Args: map[string]string{"dir": dir},
				Stdout: &bytes.Buffer{}, Stderr: &stderr, Table: DefaultTable(), Host: daemontest.EmbeddedTarget(),
			})
		}()
		for deadline := time.Now().Add(10 * time.Second); ; time.Sleep(5 * time.Millisecond) {
			if b, err := os.ReadFile(pidFile); err == nil && bytes.HasSuffix(b, []byte("\n")) {
				break
			}
			if time.Now().After(deadline) {
				t.Fatal("the recipe never started its process")
			}
		}
		time.Sleep(time.Duration(20+i) * time.Millisecond)
		cancel(&runtime.Interrupt{Signal: syscall.SIGINT, Code: 130})
		var ee *runtime.ExitError
		select {
		case err := <-done:
			if !errors.As(err, &ee) || ee.Code != 130 {
				t.Fatalf("run %d: Run = %v, want exit code 130", i, err)
			}
		case <-time.After(10 * time.Second):
			t.Fatalf("run %d: the run did not stop when its context was cancelled", i)
		}
		if strings.Contains(stderr.String(), "AFTER THE LOOP") {
			t.Fatalf("run %d: the recipe went on past the interrupted loop:\n%s", i, stderr.String())
		}
	}
}

// An interrupt while read_line waits stops the recipe there, with the
// run's exit code for the signal, and nothing after it runs.
func TestInterruptStopsReadLine(t *testing.T) {
	t.Parallel()
	dir := testutil.WriteTree(t, map[string]string{"main.star": `
p = spawn(["sh", "-c", "echo ready; exec sleep 30"], echo=False)
print(p.read_line())
p.read_line()
print("AFTER READ_LINE")
`})
	ctx, cancel := context.WithCancelCause(context.Background())
	var stderr testutil.SyncBuffer
	done := make(chan error, 1)
	go func() {
		done <- runtime.Run(ctx, runtime.Options{Recipe: filepath.Join(dir, "main.star"), Stdout: &bytes.Buffer{}, Stderr: &stderr, Table: DefaultTable(), Host: daemontest.EmbeddedTarget()})
	}()
	for deadline := time.Now().Add(10 * time.Second); !strings.Contains(stderr.String(), "ready\n"); time.Sleep(5 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("the recipe never read its first line:\n%s", stderr.String())
		}
	}
	time.Sleep(20 * time.Millisecond) // into the second read_line's wait
	cancel(&runtime.Interrupt{Signal: syscall.SIGINT, Code: 130})
	var ee *runtime.ExitError
	select {
	case err := <-done:
		if !errors.As(err, &ee) || ee.Code != 130 {
			t.Fatalf("Run = %v, want exit code 130", err)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("the run did not stop when its context was cancelled")
	}
	if strings.Contains(stderr.String(), "AFTER READ_LINE") {
		t.Fatalf("the recipe went on past the interrupted read_line:\n%s", stderr.String())
	}
}
