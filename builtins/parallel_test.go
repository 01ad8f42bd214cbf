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

	"github.com/seed5ad92d46/sous/daemon"
	"github.com/seed5ad92d46/sous/daemon/client"
	"github.com/seed5ad92d46/sous/internal/daemontest"
	"github.com/seed5ad92d46/sous/internal/testutil"
	"github.com/seed5ad92d46/sous/runtime"
)

// TestParallelLimitBoundsRunningTasks: 40 tasks of 0.1 s with limit 4.
// Each task counts, while it runs, the tasks that are inside their own
// window (a file per task in a directory): never more than 4. Every task
// ran, the results are in item order, and the parallel events say so.
func TestParallelLimitBoundsRunningTasks(t *testing.T) {
	t.Parallel()
	f := newFixture(t).withEmbeddedDaemon().withJSON()
	r := f.run(`
d = args["dir"]
run(["mkdir", d + "/running"], check=True)
script = 'touch "$1/running/$$"; ls "$1/running" | wc -l >> "$1/counts"; sleep 0.1; rm "$1/running/$$"; echo "$2"'
def start(i):
    return spawn(["sh", "-c", script, "sh", d, "item-%d" % i], echo=False)
results = parallel(list(range(40)), start, limit=4)
if len(results) != 40:
    fail("got %d results" % len(results))
for i, res in enumerate(results):
    if type(res) != "Result" or not res.ok or res.stdout != "item-%d\n" % i:
        fail("result %d: %s %r" % (i, res, res.stdout))
print("all in order")
`)
	r.expect(t, 0)
	b, err := os.ReadFile(filepath.Join(f.dir, "counts"))
	if err != nil {
		t.Fatal(err)
	}
	counts := strings.Fields(string(b))
	if len(counts) != 40 {
		t.Fatalf("%d tasks counted, want 40", len(counts))
	}
	most := 0
	for _, c := range counts {
		n, _ := strconv.Atoi(c)
		most = max(most, n)
	}
	if most > 4 {
		t.Errorf("%d tasks ran at once, limit 4", most)
	}
	if most < 2 {
		t.Errorf("at most %d task ran at once: nothing ran in parallel", most)
	}
	var last map[string]any
	events, prev := 0, ""
	for line := range strings.Lines(r.stdout) {
		var ev map[string]any
		if err := json.Unmarshal([]byte(line), &ev); err != nil {
			t.Fatalf("not JSON: %q", line)
		}
		if ev["event"] != "parallel" {
			continue
		}
		events++
		counts := strings.SplitN(line, `"done"`, 2)[1]
		if counts == prev {
			t.Errorf("the same progress twice in a row: %s", line)
		}
		prev = counts
		if ev["running"].(float64) > 4 {
			t.Errorf("event says %v running", ev["running"])
		}
		last = ev
	}
	if events < 10 || last == nil || last["done"] != 40.0 || last["running"] != 0.0 || last["remaining"] != 0.0 ||
		last["failed"] != 0.0 || last["total"] != 40.0 {
		t.Errorf("%d parallel events, the last %v", events, last)
	}
}

// TestParallelFailFastStopsEverything: the first failure stops launching,
// stops the tasks that run (a deferred check, while the daemon is still
// up, finds none of their processes alive) and fails naming the item.
func TestParallelFailFastStopsEverything(t *testing.T) {
	t.Parallel()
	f := newFixture(t).withEmbeddedDaemon()
	start := time.Now()
	r := f.run(`
d = args["dir"]
def start(i):
    if i == 1:
        return spawn(["sh", "-c", "echo 1 >> \"$0/started\"; sleep 0.2; exit 3", d], echo=False)
    return spawn(["sh", "-c", "echo $$ >> \"$0/pids\"; echo \"$1\" >> \"$0/started\"; exec sleep 30", d, str(i)], echo=False)
def check():
    alive = run(["sh", "-c", 'for p in $(cat "$0/pids"); do kill -0 "$p" 2>/dev/null && echo "alive $p"; done; true', d])
    print("check:", alive.stdout.strip() or "none alive")
defer(check)
parallel(list(range(10)), start, limit=3, fail_fast=True)
print("not reached")
`)
	r.expect(t, 1, `parallel: item 1 (1): status "failed", exit code 3`, "check: none alive")
	if strings.Contains(r.stderr, "not reached") {
		t.Errorf("the recipe went on:\n%s", r.stderr)
	}
	if el := time.Since(start); el > 15*time.Second {
		t.Errorf("took %s: the running tasks were not stopped", el)
	}
	b, _ := os.ReadFile(filepath.Join(f.dir, "started"))
	started := strings.Fields(string(b))
	if len(started) != 3 {
		t.Errorf("started %v, want items 0, 1 and 2 only", started)
	}
	for _, s := range started {
		if s != "0" && s != "1" && s != "2" {
			t.Errorf("item %s started after the failure", s)
		}
	}
}

// TestParallelWithoutFailFastRunsEverything: a task that is not ok is in
// the list, a task whose fn fails does not stop the others, and the call
// fails once all ran, naming every failed item.
func TestParallelWithoutFailFastRunsEverything(t *testing.T) {
	t.Parallel()
	f := newFixture(t).withEmbeddedDaemon()
	r := f.run(`
d = args["dir"]
def start(i):
    if i in (2, 5):
        fail("no item %d" % i)
    if i == 3:
        return "plain"
    return spawn(["sh", "-c", "echo \"$1\" >> \"$0/ran\"; exit $(($1 % 2))", d, str(i)], echo=False)
parallel(list(range(8)), start, limit=2)
`)
	r.expect(t, 1, "parallel: 2 of 8 items failed: item 2 (2): ", "no item 2", "; item 5 (5): ", "no item 5")
	b, _ := os.ReadFile(filepath.Join(f.dir, "ran"))
	if got := len(strings.Fields(string(b))); got != 5 {
		t.Errorf("%d processes ran, want 5 (items 0, 1, 4, 6, 7):\n%s", got, b)
	}
	r = f.run(`
def start(i):
    if i == 2:
        return "plain"
    return spawn(["sh", "-c", "exit %d" % (i % 2)], echo=False)
res = parallel([0, 1, 2, 3], start)
print([r if type(r) == "string" else r.exit_code for r in res])
`)
	r.expect(t, 0, "[0, 1, \"plain\", 1]")
}

// TestParallelChecksItsArguments: the arguments are checked before any
// task starts.
func TestParallelChecksItsArguments(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	f.run(`parallel("abc", print)`).expect(t, 1, "parallel: items: want list or tuple, got string")
	f.run(`parallel([1], 3)`).expect(t, 1, "parallel: fn: want function, got int")
	f.run(`parallel([1], print, limit=0)`).expect(t, 1, "parallel: limit: want at least 1, got 0")
	f.run(`print(parallel([], print), shard.index, shard.count)`).expect(t, 0, "[] 0 1")
}

// TestParallelInterruptStopsItsTasks: an interrupt while parallel waits
// stops its running tasks even on a daemon whose processes outlive their
// clients: when Run returns, none of them runs.
func TestParallelInterruptStopsItsTasks(t *testing.T) {
	t.Parallel()
	sock, srv := daemontest.ServeUnix(t, daemon.Config{Token: "tok", ShutdownGrace: time.Second, Env: []string{"PATH=" + os.Getenv("PATH")}})
	dir := testutil.WriteTree(t, map[string]string{"main.star": `
parallel(list(range(6)), lambda i: spawn(["sleep", "60"], echo=False), limit=3)
`})
	ctx, cancel := context.WithCancelCause(context.Background())
	done := make(chan error, 1)
	go func() {
		done <- runtime.Run(ctx, runtime.Options{
			Recipe: filepath.Join(dir, "main.star"), Stdout: &bytes.Buffer{}, Stderr: &bytes.Buffer{},
			Table: DefaultTable(), Host: client.Target{URL: "unix://" + sock, Token: "tok"},
		})
	}()
	for deadline := time.Now().Add(10 * time.Second); len(srv.Registry().List()) < 3; time.Sleep(10 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatal("the recipe never started its tasks")
		}
	}
	cancel(&runtime.Interrupt{Signal: syscall.SIGINT, Code: 130})
	select {
	case err := <-done:
		if exitCode(err) != 130 {
			t.Fatalf("Run = %v, want exit code 130", err)
		}
	case <-time.After(20 * time.Second):
		t.Fatal("the run did not end after the interrupt")
	}
	procs := srv.Registry().List()
	if len(procs) != 3 {
		t.Errorf("%d processes started, want 3 (limit 3)", len(procs))
	}
	for _, p := range procs {
		if p.Running() {
			t.Errorf("%s still runs after the interrupted run returned", p.ID)
		}
	}
}
