package builtins_test

// These tests run recipes with real processes, on the embedded daemon and
// on one served on a Unix socket. None runs in parallel: noHeldFrames looks
// at every goroutine of the test binary.

import (
	"bytes"
	"context"
	"errors"
	"os"
	"path/filepath"
	goruntime "runtime"
	"strings"
	"testing"
	"time"

	"github.com/seed5ad92d46/sous/builtins"
	"github.com/seed5ad92d46/sous/daemon"
	"github.com/seed5ad92d46/sous/daemon/client"
	"github.com/seed5ad92d46/sous/internal/daemontest"
	sous "github.com/seed5ad92d46/sous/runtime"
)

// frameSlack is what one frame may take an iteration past its bound: the
// daemon reads a child's output 32 KiB at a time.
const frameSlack = 32 << 10

// runRecipe runs src on host (nil: the embedded daemon) and returns its
// error and its log.
func runRecipe(t *testing.T, ctx context.Context, host *client.Target, src string) (error, string) {
	t.Helper()
	return runRecipeLimited(t, ctx, host, builtins.LinesLimits{}, src)
}

// runRecipeLimited is runRecipe with lines() limits of its own.
func runRecipeLimited(t *testing.T, ctx context.Context, host *client.Target, lim builtins.LinesLimits, src string) (error, string) {
	t.Helper()
	dir := t.TempDir()
	path := filepath.Join(dir, "main.star")
	if err := os.WriteFile(path, []byte(src), 0o644); err != nil {
		t.Fatal(err)
	}
	table := sous.MustTable(builtins.Config{Lines: lim}.Plugins()...)
	opt := sous.Options{Recipe: path, Stdout: new(bytes.Buffer), Table: table, Host: daemontest.EmbeddedTarget()}
	var log bytes.Buffer
	opt.Stderr = &log
	if host != nil {
		opt.Host = *host
	}
	err := sous.Run(ctx, opt)
	noHeldFrames(t)
	return err, log.String()
}

// noHeldFrames fails the test if a frame handler is still waiting for a
// lines() iteration once the run is over (a leaked, held-back producer).
func noHeldFrames(t *testing.T) {
	t.Helper()
	deadline := time.Now().Add(5 * time.Second)
	for {
		buf := make([]byte, 1<<20)
		stacks := string(buf[:goruntime.Stack(buf, true)])
		if !strings.Contains(stacks, "builtins.(*Process).onFrame") {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("a frame is still held back after the run:\n%s", stacks)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// socketHost serves a daemon on a Unix socket until the test ends.
func socketHost(t *testing.T) *client.Target {
	t.Helper()
	sock, _ := daemontest.ServeUnix(t, daemon.Config{Token: "tok", ShutdownGrace: time.Second})
	return &client.Target{URL: "unix://" + sock, Token: "tok"}
}

// A producer far faster than the loop: everything arrives, in order, and
// the iteration never holds more than its bound in memory.
func TestLinesFastProducerStaysBounded(t *testing.T) {
	stats := new(builtins.LinesStats)
	err, log := runRecipeLimited(t, context.Background(), nil, builtins.LinesLimits{Stats: stats}, `
p = spawn("seq", ["1", "3000000"], echo=False)
n = 0
last = ""
for l in p.lines():
    n += 1
    last = l
print(n, last)
`)
	if err != nil || log != "3000000 3000000\n" {
		t.Fatalf("err=%v log=%q", err, log)
	}
	if peak, _ := stats.Take(); peak > builtins.LinesBound+frameSlack {
		t.Errorf("the iteration held %d bytes in memory (bound %d)", peak, builtins.LinesBound)
	}
}

// The child is not held back for a loop that stalls: a loop that waits,
// on the line that says a server is ready, for a client that needs the
// server to go on, goes on (holding the child back hung it). What the
// loop has not read meanwhile waits on disk, and every line still comes.
func TestLinesLoopWaitingForTheChildGoesOn(t *testing.T) {
	stats := new(builtins.LinesStats)
	flag := filepath.Join(t.TempDir(), "flag")
	err, log := runRecipeLimited(t, context.Background(), nil, builtins.LinesLimits{Stats: stats}, `
flag = "`+flag+`"
p = spawn(["sh", "-c", "echo ready; seq 1 1000000; touch " + flag + "; echo end"], echo=False)
n = 0
for l in p.lines():
    if l == "ready":
        r = run(["sh", "-c", "while [ ! -e " + flag + " ]; do sleep 0.05; done"], echo=False, timeout=30, check=False)
        print("client:", r.status)
    n += 1
print(n, l, p.wait().exit_code)
`)
	if err != nil || log != "client: ok\n1000002 end 0\n" {
		t.Fatalf("err=%v log=%q", err, log)
	}
	if peak, spilled := stats.Take(); peak > builtins.LinesBound+frameSlack || spilled == 0 {
		t.Errorf("held %d bytes, spilled %d (want some)", peak, spilled)
	}
}

// Waiting for the process inside its own loop returns: wait, wait_all,
// stop, and kill then wait, and the loop then reads every line, kept on
// disk meanwhile.
func TestLinesWaitForTheProcessInsideTheLoop(t *testing.T) {
	stats := new(builtins.LinesStats)
	err, log := runRecipeLimited(t, context.Background(), nil, builtins.LinesLimits{Stats: stats}, `
def count(p, wait):
    n = 0
    for l in p.lines():
        if n == 0:
            wait(p)
        n += 1
    return n
print(count(spawn("seq", ["1", "2000000"], echo=False), lambda p: p.wait()))
print(count(spawn("seq", ["1", "2000000"], echo=False), lambda p: wait_all([p])))
print(count(spawn(["sh", "-c", "seq 1 2000000; sleep 30"], echo=False), lambda p: p.stop(grace=0)) > 0)
print(count(spawn(["sh", "-c", "seq 1 2000000; sleep 30"], echo=False), lambda p: [p.kill("KILL"), p.wait()]) > 0)
`)
	if err != nil || log != "2000000\n2000000\nTrue\nTrue\n" {
		t.Fatalf("err=%v log=%q", err, log)
	}
	if peak, spilled := stats.Take(); peak > builtins.LinesBound+frameSlack || spilled == 0 {
		t.Errorf("held %d bytes, spilled %d (want some)", peak, spilled)
	}
}

// Another lines() of the same process inside the loop gets its lines.
func TestLinesNestedIterationOfTheSameProcess(t *testing.T) {
	err, log := runRecipe(t, context.Background(), nil, `
p = spawn(["sh", "-c", "seq 1 2000000; echo e >&2; sleep 30"], echo=False)
for l in p.lines():
    for e in p.lines("stderr"):
        print("stderr", e)
        break
    break
p.kill("KILL")
`)
	if err != nil || log != "stderr e\n" {
		t.Fatalf("err=%v log=%q", err, log)
	}
}

// The end of the run, or an interrupt, with an iteration unread or
// stalled: the run returns, and no frame handler is left waiting
// (runRecipe checks).
func TestLinesRunEndReleasesTheProducer(t *testing.T) {
	start := time.Now()
	err, log := runRecipe(t, context.Background(), nil, `
p = spawn("seq", ["1", "5000000"], echo=False)
it = p.lines()  # never read: its bound is reached at once
sleep(0.5)
print("end")
`)
	if err != nil || log != "end\n" {
		t.Fatalf("err=%v log=%q", err, log)
	}
	ctx, cancel := context.WithCancel(context.Background())
	time.AfterFunc(time.Second, cancel)
	err, _ = runRecipe(t, ctx, nil, `
p = spawn("seq", ["1", "5000000"], echo=False)
for l in p.lines():
    sleep(30)
`)
	var ee *sous.ExitError
	if !errors.As(err, &ee) || time.Since(start) > 15*time.Second {
		t.Fatalf("interrupted run: %v after %s", err, time.Since(start))
	}
}

// On a remote daemon the frame reader serves every process of the
// connection and every call's answer: nothing is held back, a stalled loop
// can still wait for another process, and what it has not read waits on
// disk, losing nothing.
func TestLinesRemoteSpillsInsteadOfBlocking(t *testing.T) {
	host := socketHost(t)
	stats := new(builtins.LinesStats)
	err, log := runRecipeLimited(t, context.Background(), host, builtins.LinesLimits{Stats: stats}, `
p = spawn("seq", ["1", "3000000"], echo=False)
q = spawn(["sh", "-c", "sleep 0.5; echo q"], echo=False)
n = 0
last = ""
for l in p.lines():
    if n == 0:
        print("q says", q.wait().stdout.strip())
        sleep(1)
    n += 1
    last = l
print(n, last)
`)
	if err != nil || log != "q says q\n3000000 3000000\n" {
		t.Fatalf("err=%v log=%q", err, log)
	}
	if peak, spilled := stats.Take(); peak > builtins.LinesBound+frameSlack || spilled == 0 {
		t.Errorf("held %d bytes, spilled %d (want some)", peak, spilled)
	}
}

// Past the spill file's cap, the iteration fails with a message that names
// lines() and the bounds, after the lines before the gap.
func TestLinesRemoteFallingTooFarBehindFails(t *testing.T) {
	host := socketHost(t)
	err, log := runRecipeLimited(t, context.Background(), host, builtins.LinesLimits{Bound: 1 << 20, SpillCap: 4 << 20}, `
p = spawn("seq", ["1", "3000000"], echo=False)
want = 1
for l in p.lines():
    if want == 1:
        sleep(2)
    if l != str(want):
        fail("got line %s, want %d" % (l, want))
    want += 1
`)
	var ee *sous.ExitError
	if !errors.As(err, &ee) || ee.Code != 1 {
		t.Fatalf("err=%v, want exit code 1\n%s", err, log)
	}
	for _, w := range []string{"Process.lines: the recipe fell more than 5 MiB behind process", "stdout (lines() holds 1 MiB in memory and 4 MiB on disk)"} {
		if !strings.Contains(log, w) {
			t.Errorf("log lacks %q:\n%s", w, log)
		}
	}
	if strings.Contains(log, "got line") {
		t.Errorf("lines were skipped:\n%s", log)
	}
}
