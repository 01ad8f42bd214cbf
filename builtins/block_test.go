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

	"go.starlark.net/starlark"

	"github.com/seed5ad92d46/sous/internal/daemontest"
	"github.com/seed5ad92d46/sous/runtime"
)

// blockEnv is the part of a run's Env that block uses: its context, loop
// and workers.
func blockEnv(ctx context.Context) *runtime.Env {
	return &runtime.Env{Ctx: ctx, Loop: runtime.NewLoop(), Workers: runtime.NewWorkers()}
}

// TestBlockRunsCallbacksWhileTheCallBlocks: a call on a worker that waits
// for a callback posted to the recipe thread finishes, because the recipe
// thread runs callbacks while it waits for the call. (The callbacks append
// without a lock: the race detector shows they run on the waiting
// goroutine.)
func TestBlockRunsCallbacksWhileTheCallBlocks(t *testing.T) {
	t.Parallel()
	e := blockEnv(context.Background())
	defer e.Workers.Close()
	var ran []int
	for i := range 20 {
		err := block(e, e.Ctx, func(context.Context) error {
			served := make(chan struct{})
			e.Loop.Post(func() { ran = append(ran, i); close(served) })
			select {
			case <-served:
				return nil
			case <-time.After(5 * time.Second):
				return errors.New("the callback did not run while the call blocked")
			}
		})
		if err != nil {
			t.Fatalf("call %d: %v", i, err)
		}
	}
	if len(ran) != 20 {
		t.Errorf("%d callbacks ran, want 20", len(ran))
	}
	if n := e.Workers.Alive(); n < 1 || n > 2 {
		t.Errorf("%d workers for calls one after another, want 1 (or 2 when a call came as the first was getting ready)", n)
	}
}

// TestBlockInterruptedLeavesTheWorkersUsable: a call that goes on after
// its context ended (block stops waiting for it) holds its worker, so the
// calls after it go to another one; once it returns, its worker takes calls
// again. blockSettled waits for the call to return.
func TestBlockInterruptedLeavesTheWorkersUsable(t *testing.T) {
	t.Parallel()
	e := blockEnv(context.Background())
	defer e.Workers.Close()
	ctx, cancel := context.WithCancel(e.Ctx)
	release := make(chan struct{})
	started := make(chan struct{})
	go func() { <-started; cancel() }()
	err := block(e, ctx, func(context.Context) error { close(started); <-release; return nil })
	if !errors.Is(err, context.Canceled) {
		t.Fatalf("block interrupted = %v, want context.Canceled", err)
	}
	for i := range 5 {
		if err := block(e, e.Ctx, func(context.Context) error { return nil }); err != nil {
			t.Fatalf("call %d after an interrupted one: %v", i, err)
		}
	}
	close(release)
	for i := range 50 {
		if err := block(e, e.Ctx, func(context.Context) error { return nil }); err != nil {
			t.Fatalf("call %d after the interrupted one returned: %v", i, err)
		}
	}
	if n := e.Workers.Alive(); n > 3 {
		t.Errorf("%d workers alive after 56 calls, never more than 2 at once; want them kept, at most 3", n)
	}

	ctx, cancel = context.WithCancel(e.Ctx)
	cancel()
	returned := false
	if err := blockSettled(e, ctx, func(context.Context) error { time.Sleep(20 * time.Millisecond); returned = true; return nil }); err == nil {
		t.Errorf("blockSettled with its context ended = nil, want the context's error")
	}
	if !returned {
		t.Error("blockSettled returned before its call did")
	}
}

// probePlugin is a builtin that reports how many of the run's workers are
// alive, and keeps the run's Env for the test to look at after the run.
func probePlugin(env **runtime.Env) runtime.Plugin {
	return runtime.Plugin{Name: "probe",
		OnStart: func(e *runtime.Env) any { *env = e; return nil },
		Entries: []runtime.Entry{{Name: "workers_alive", Sig: "workers_alive() -> int", Doc: "test only",
			Fn: func(c *runtime.Call) (starlark.Value, error) { return starlark.MakeInt(c.Env.Workers.Alive()), nil }}}}
}

// TestARunLeavesNoWorkers: the workers that ran a recipe's run() calls
// (the spawn and the stdin of each) end with the run, whether it finished
// or was interrupted while a call waited.
func TestARunLeavesNoWorkers(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name, recipe string
		interrupt    bool
	}{
		{"finished", `
for i in range(10):
    run("true")
r = run("cat", stdin="through a worker")
if r.stdout != "through a worker":
    fail("stdout: " + r.stdout)
# No stdin: the spawn's own call on a worker closes it, so cat ends.
if run("cat").stdout != "":
    fail("cat read something from no stdin")
if workers_alive() < 1:
    fail("no worker ran the calls")
`, false},
		{"interrupted", `
run("true")
if workers_alive() < 1:
    fail("no worker ran the calls")
run(["sh", "-c", "echo $$ > ` + "\" + args[\"dir\"] + \"" + `/pid; exec sleep 30"])
`, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			dir := t.TempDir()
			recipe := filepath.Join(dir, "main.star")
			if err := os.WriteFile(recipe, []byte(tc.recipe), 0o644); err != nil {
				t.Fatal(err)
			}
			var env *runtime.Env
			ctx, cancel := context.WithCancelCause(context.Background())
			defer cancel(nil)
			var stderr bytes.Buffer
			done := make(chan error, 1)
			go func() {
				done <- runtime.Run(ctx, runtime.Options{
					Recipe: recipe, Args: map[string]string{"dir": dir}, Stdout: &bytes.Buffer{}, Stderr: &stderr,
					Table: runtime.MustTable(append(Plugins(), probePlugin(&env))...), Host: daemontest.EmbeddedTarget(),
				})
			}()
			if tc.interrupt {
				waitForPid(t, filepath.Join(dir, "pid"))
				cancel(&runtime.Interrupt{Signal: syscall.SIGINT, Code: 130})
			}
			var err error
			select {
			case err = <-done:
			case <-time.After(30 * time.Second):
				t.Fatal("the run did not end")
			}
			if code := exitCode(err); (code != 0) != tc.interrupt {
				t.Fatalf("Run = %v\n%s", err, stderr.String())
			}
			for deadline := time.Now().Add(5 * time.Second); env.Workers.Alive() > 0; time.Sleep(time.Millisecond) {
				if time.Now().After(deadline) {
					t.Fatalf("%d of the run's workers alive 5 s after it ended", env.Workers.Alive())
				}
			}
		})
	}
}

// waitForPid waits for a recipe's process to write its pid to path.
func waitForPid(t *testing.T, path string) int {
	t.Helper()
	for deadline := time.Now().Add(10 * time.Second); ; time.Sleep(10 * time.Millisecond) {
		if b, err := os.ReadFile(path); err == nil && bytes.HasSuffix(b, []byte("\n")) {
			pid, _ := strconv.Atoi(strings.TrimSpace(string(b)))
			return pid
		}
		if time.Now().After(deadline) {
			t.Fatal("the recipe never started its process")
		}
	}
}
