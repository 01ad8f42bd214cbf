package proc

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"runtime"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/seed5ad92d46/sous/daemon/streamlog"
	"github.com/seed5ad92d46/sous/daemon/wire"
	"github.com/seed5ad92d46/sous/internal/testutil"
)

func i64(v int64) *int64 { return &v }

func TestStdinOffsets(t *testing.T) {
	r, w, err := os.Pipe()
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	q := newStdinQueue(0)
	done := make(chan struct{})
	go func() { defer close(done); q.run(w) }()
	ctx := context.Background()
	steps := []struct {
		data    string
		off     *int64
		applied int64
		dup     bool
		gap     bool
	}{
		{"", nil, 0, false, false},
		{"abc", nil, 3, false, false},
		{"def", i64(3), 6, false, false},
		{"abc", i64(0), 6, true, false},
		{"f", i64(5), 6, true, false},
		{"", i64(6), 6, false, false},
		{"", i64(2), 6, true, false},
		{"zz", i64(7), 6, false, true},
		{"efgh", i64(4), 8, false, false}, // partial overlap: only "gh" is new
		{"ij", nil, 10, false, false},
	}
	for i, s := range steps {
		applied, dup, err := q.Offer(ctx, []byte(s.data), s.off)
		var we *wire.Error
		if s.gap != (errors.As(err, &we) && we.Code == wire.CodeStdinGap && we.Message == wire.MsgStdinGap) {
			t.Fatalf("step %d: err %v", i, err)
		}
		if applied != s.applied || dup != s.dup {
			t.Fatalf("step %d: applied %d dup %v, want %d %v", i, applied, dup, s.applied, s.dup)
		}
	}
	q.Close()
	if _, _, err := q.Offer(ctx, []byte("late"), nil); err == nil || err.Error() != "-32602: "+MsgStdinClosed {
		t.Fatalf("data after close: %v", err)
	}
	if applied, dup, err := q.Offer(ctx, []byte("ij"), i64(8)); err != nil || !dup || applied != 10 {
		t.Fatalf("a retried request after close: %d %v %v", applied, dup, err)
	}
	got, _ := io.ReadAll(r)
	<-done
	if string(got) != "abcdefghij" {
		t.Fatalf("the child received %q", got)
	}
}

// A writer blocked on a pipe nobody reads (a descendant holds the read end)
// is released by stop.
func TestStdinStopUnblocksWriter(t *testing.T) {
	r, w, err := os.Pipe()
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	q := newStdinQueue(0)
	done := make(chan struct{})
	go func() { defer close(done); q.run(w) }()
	if _, _, err := q.Offer(context.Background(), make([]byte, 1<<20), nil); err != nil {
		t.Fatal(err)
	}
	time.Sleep(20 * time.Millisecond)
	q.stop()
	select {
	case <-done:
	case <-time.After(5 * time.Second):
		t.Fatal("writer still blocked after stop")
	}
}

// A full queue makes Offer wait, and the wait ends with the caller's context.
func TestStdinQueueBound(t *testing.T) {
	r, w, _ := os.Pipe()
	defer r.Close()
	q := newStdinQueue(64 << 10)
	go q.run(w)
	defer q.stop()
	ctx, cancel := context.WithTimeout(context.Background(), 50*time.Millisecond)
	defer cancel()
	var err error
	for i := 0; i < 100 && err == nil; i++ {
		_, _, err = q.Offer(ctx, make([]byte, 32<<10), nil)
	}
	if !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("Offer did not wait: %v", err)
	}
}

func newTestRegistry(t *testing.T) *Registry {
	r := NewRegistry(Options{DrainAfterExit: 50 * time.Millisecond})
	t.Cleanup(func() { r.Shutdown(false, 100*time.Millisecond) })
	return r
}

func frames(t *testing.T, p *Process) []wire.Frame {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	c := p.Log.NewCursor(0)
	defer c.Close()
	var all []wire.Frame
	for {
		var err error
		all, err = c.Next(ctx, all, 1<<20)
		if errors.Is(err, io.EOF) {
			return all
		}
		if err != nil {
			t.Fatal(err)
		}
	}
}

func TestExitCodes(t *testing.T) {
	r := newTestRegistry(t)
	for script, want := range map[string]int{"exit 0": 0, "exit 42": 42, "kill -TERM $$": -1, "kill -9 $$": -1} {
		p, err := r.Spawn(Spec{ID: script, Command: "sh", Args: []string{"-c", script}})
		if err != nil {
			t.Fatal(err)
		}
		fs := frames(t, p)
		if last := fs[len(fs)-1]; last.Stream != wire.Exit || last.ExitCode != want {
			t.Errorf("%s: %+v", script, last)
		}
		if code, ok := p.ExitCode(); !ok || code != want {
			t.Errorf("%s: ExitCode %d %v", script, code, ok)
		}
	}
}

// Running children cost the daemon no OS thread each: waiting for an exit
// in waitid held one per child (Go stops a program at 10,000 threads). The
// children still end as they should, a pipeline's stages each reaped.
func TestRunningChildrenHoldNoThreads(t *testing.T) {
	r := newTestRegistry(t)
	before := threads(t)
	const n = 100
	ps := make([]*Process, n)
	for i := range ps {
		var err error
		ps[i], err = r.Spawn(Spec{ID: fmt.Sprint(i), Command: "sleep", Args: []string{"30"}})
		if err != nil {
			t.Fatal(err)
		}
	}
	pipe, err := r.Spawn(Spec{ID: "pipe", Pipeline: [][]string{{"sleep", "30"}, {"sh", "-c", "read x; exit 3"}}})
	if err != nil {
		t.Fatal(err)
	}
	time.Sleep(200 * time.Millisecond) // the reapers are waiting by now
	if grew := threads(t) - before; grew > n/4 {
		t.Fatalf("%d running children took %d more threads", n+1, grew)
	}
	for _, p := range append(ps, pipe) {
		p.Signal(syscall.SIGKILL)
	}
	for _, p := range append(ps, pipe) {
		if last := frames(t, p); last[len(last)-1].ExitCode != -1 {
			t.Fatalf("%s: exit frame %+v", p.ID, last[len(last)-1])
		}
	}
	if code, ok := pipe.ExitCode(); !ok || code != -1 {
		t.Fatalf("pipeline: exit code %d %v", code, ok)
	}
}

// threads counts this process's OS threads.
func threads(t *testing.T) int {
	t.Helper()
	entries, err := os.ReadDir("/proc/self/task")
	if err != nil {
		t.Fatal(err)
	}
	return len(entries)
}

func TestNoSignalAfterReap(t *testing.T) {
	r := newTestRegistry(t)
	p, err := r.Spawn(Spec{ID: "t", Command: "true"})
	if err != nil {
		t.Fatal(err)
	}
	<-p.Done()
	if p.Signal(syscall.SIGKILL) {
		t.Fatal("signalled a reaped process")
	}
	if res := p.KillAndWait(context.Background(), syscall.SIGTERM, time.Second, true); res != (wire.KillAndWaitResult{Found: true, Died: true, AlreadyExited: true}) {
		t.Fatalf("KillAndWait %+v", res)
	}
}

func TestReplaceDiscardsOld(t *testing.T) {
	r := newTestRegistry(t)
	old, err := r.Spawn(Spec{ID: "x", Command: "sleep", Args: []string{"60"}})
	if err != nil {
		t.Fatal(err)
	}
	cur := old.Log.NewCursor(0)
	nu, err := r.Spawn(Spec{ID: "x", Command: "true"})
	if err != nil {
		t.Fatal(err)
	}
	if r.Get("x") != nu {
		t.Fatal("not replaced")
	}
	select {
	case <-old.Reaped():
	case <-time.After(5 * time.Second):
		t.Fatal("old process not killed")
	}
	// Its readers are dropped: no frame (not even its exit) reaches them.
	if fs, err := cur.Next(context.Background(), nil, 1); !errors.Is(err, streamlog.ErrClosed) || len(fs) != 0 {
		t.Fatalf("old cursor: %v %v", fs, err)
	}
}

func TestLookPath(t *testing.T) {
	dir := t.TempDir()
	os.WriteFile(dir+"/tool", []byte("#!/bin/sh\n"), 0o755)
	os.WriteFile(dir+"/plain", []byte(""), 0o644)
	env := []string{"PATH=/nonexistent:" + dir}
	for _, tc := range []struct{ cmd, dir, want, err string }{
		{"tool", "", dir + "/tool", ""},
		{"plain", "", "", "not found"},
		{"./tool", dir, "./tool", ""},
		{"./nope", dir, "", "no such file"},
		{"", "", "", "empty command"},
	} {
		got, err := lookPath(tc.cmd, env, tc.dir)
		if got != tc.want || (err == nil) != (tc.err == "") || err != nil && !strings.Contains(err.Error(), tc.err) {
			t.Errorf("lookPath(%q) = %q, %v", tc.cmd, got, err)
		}
	}
}

func TestDrainAfterExit(t *testing.T) {
	// The child exits but a descendant keeps its stdout open and quiet: the
	// exit frame still comes, soon after.
	r := newTestRegistry(t)
	p, err := r.Spawn(Spec{ID: "bg", Command: "sh", Args: []string{"-c", "echo a; (sleep 3; echo late) & exit 5"}})
	if err != nil {
		t.Fatal(err)
	}
	defer syscall.Kill(-p.Pid, syscall.SIGKILL) // the quiet descendant; its group is still alive
	start := time.Now()
	fs := frames(t, p)
	if el := time.Since(start); el > 2*time.Second {
		t.Fatalf("exit frame after %v", el)
	}
	var out bytes.Buffer
	for _, f := range fs {
		out.Write(f.Data)
	}
	if out.String() != "a\n" || fs[len(fs)-1].ExitCode != 5 {
		t.Fatalf("frames %+v", fs)
	}
}

// Large stdin writes grow the child's stdin pipe (a 512 KiB request then
// goes in at once, not in eight turns of 64 KiB), the pooled buffers come
// back once written, and the grown pipe's slot of the budget is given back
// when the writer stops.
func TestStdinGrowsThePipeAndRecycles(t *testing.T) {
	r := newTestRegistry(t)
	// The child reports its stdin's capacity once the first byte is there.
	p, err := r.Spawn(Spec{ID: "g", Command: "python3", Args: []string{"-c", `
import fcntl, os, sys
os.read(0, 1)
print(fcntl.fcntl(0, 1032))  # F_GETPIPE_SZ
sys.stdout.flush()
while os.read(0, 1 << 20): pass
`}})
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	var given [][]byte
	for range 3 {
		b := r.StdinBuffer(512 << 10)
		if cap(b) != StdinBufSize {
			t.Fatalf("a 512 KiB buffer of capacity %d, not from the pool", cap(b))
		}
		given = append(given, b)
		if _, _, err := p.WriteStdin(ctx, b, nil); err != nil {
			t.Fatal(err)
		}
	}
	p.CloseStdin()
	var out []byte
	for _, f := range frames(t, p) {
		out = append(out, f.Data...)
	}
	if strings.TrimSpace(string(out)) != "1048576" {
		t.Errorf("the child's stdin pipe holds %q bytes, want it grown to 1 MiB", out)
	}
	if n := r.bigPipes.Load(); n != 0 {
		t.Errorf("%d grown pipes still counted after the writer stopped", n)
	}
	back := 0
	for range len(given) * 4 { // the pool may hand out what it holds in any order
		b := r.StdinBuffer(512 << 10)
		for _, g := range given {
			if &b[0] == &g[0] {
				back++
			}
		}
	}
	if back == 0 && !testutil.RaceEnabled {
		t.Error("none of the written buffers came back to the pool")
	}
}

// Spawns racing Shutdown: every child a spawn started is stopped (or, with
// keep, counted as left running), and a spawn after Shutdown began is
// refused. A child started just before Shutdown looked at the processes, but
// not yet in them, was neither: it outlived the daemon, and the keep-children
// count missed it (TestCloseKeepChildren failed that way once in CI).
func TestShutdownWaitsForSpawnsUnderWay(t *testing.T) {
	for _, keep := range []bool{false, true} {
		for round := range 20 {
			r := NewRegistry(Options{DrainAfterExit: 50 * time.Millisecond})
			started := make(chan *Process, 8)
			var refused int
			done := make(chan struct{})
			go func() {
				defer close(done)
				for i := range 8 {
					p, err := r.Spawn(Spec{ID: string(rune('a' + i)), Command: "sleep", Args: []string{"60"}})
					if err != nil {
						if !strings.Contains(err.Error(), "the daemon is shutting down") {
							t.Errorf("spawn: %v", err)
						}
						refused++
						continue
					}
					started <- p
				}
			}()
			time.Sleep(time.Duration(round) * 200 * time.Microsecond)
			kept := r.Shutdown(keep, 100*time.Millisecond)
			<-done
			close(started)
			var pids []int
			for p := range started {
				pids = append(pids, p.Pid)
			}
			if len(pids)+refused != 8 {
				t.Fatalf("%d started and %d refused of 8", len(pids), refused)
			}
			for _, pid := range pids {
				if keep {
					syscall.Kill(-pid, syscall.SIGKILL)
				} else if testutil.Alive(pid) {
					syscall.Kill(-pid, syscall.SIGKILL)
					t.Fatalf("round %d: pid %d outlived Shutdown", round, pid)
				}
			}
			if keep && kept != len(pids) {
				t.Fatalf("round %d: Shutdown(keep) counted %d running of the %d started", round, kept, len(pids))
			}
		}
	}
}

// A child's stdio is in blocking mode, as a program expects of it (a read
// of an empty non-blocking pipe fails with EAGAIN): for a spawn, and for a
// pipeline, whose stages are also joined by pipes that only children hold.
// childPipe makes only the daemon's end non-blocking; os.Pipe made both so
// and exec switched the child's back, which this guards now that nothing
// does. (That the daemon's ends are polled, every test that reads output
// relies on.)
func TestChildStdioBlocking(t *testing.T) {
	r := newTestRegistry(t)
	// fdinfo's flags are octal; O_NONBLOCK is 04000.
	const script = `for fd in 0 1 2; do f=$(sed -n 's/^flags:[[:space:]]*//p' /proc/self/fdinfo/$fd); ` +
		`if [ $(( 0$f & 04000 )) -ne 0 ]; then echo "$1 fd $fd non-blocking" >&2; exit 1; fi; done`
	single, err := r.Spawn(Spec{ID: "single", Command: "sh", Args: []string{"-c", script, "sh", "single"}})
	if err != nil {
		t.Fatal(err)
	}
	pipeline, err := r.Spawn(Spec{ID: "pipeline", Pipeline: [][]string{
		{"sh", "-c", script, "sh", "first"}, {"sh", "-c", script, "sh", "middle"}, {"sh", "-c", script, "sh", "last"}}})
	if err != nil {
		t.Fatal(err)
	}
	for _, p := range []*Process{single, pipeline} {
		all := frames(t, p)
		for _, f := range all {
			if f.Stream == wire.Stderr {
				t.Errorf("%s: %s", p.ID, f.Data)
			}
		}
		if exit := all[len(all)-1]; exit.ExitCode != 0 {
			t.Errorf("%s: exit frame %+v", p.ID, exit)
		}
	}
}

// A running child costs the daemon three goroutines: its supervisor, which
// reaps it too, and a reader for each of stdout and stderr. It cost five
// while the reaping and the stdin writer had one each (the writer now starts
// with the first data): each one more to start, park and wake on the path
// from a child's exit to its exit frame, and a stack while it runs. Stdin
// still reaches the child, and closing it unwritten still ends it.
func TestRunningChildGoroutines(t *testing.T) {
	r := newTestRegistry(t)
	settle := func() int {
		time.Sleep(100 * time.Millisecond) // the readers are parked by now
		return runtime.NumGoroutine()
	}
	before := settle()
	const n = 50
	ps := make([]*Process, n)
	for i := range ps {
		var err error
		ps[i], err = r.Spawn(Spec{ID: fmt.Sprint(i), Command: "cat"})
		if err != nil {
			t.Fatal(err)
		}
	}
	// The child poller (childpoll.go) watches a quiet child: it holds no
	// goroutine of its own (it held three: a reaper and two readers).
	if per := float64(settle()-before) / n; per > 0.2 {
		t.Errorf("a quiet running child holds %.2f goroutines, want none", per)
	}
	for i, p := range ps {
		if i%2 == 0 {
			if _, _, err := p.WriteStdin(context.Background(), []byte("hello\n"), nil); err != nil {
				t.Fatal(err)
			}
		}
		p.CloseStdin()
	}
	for i, p := range ps {
		fs := frames(t, p)
		want := map[bool]string{true: "hello\n", false: ""}[i%2 == 0]
		var out []byte
		for _, f := range fs {
			if f.Stream == wire.Stdout {
				out = append(out, f.Data...)
			}
		}
		if got := string(out); got != want {
			t.Errorf("%s: stdout %q, want %q", p.ID, got, want)
		}
		if last := fs[len(fs)-1]; last.Stream != wire.Exit || last.ExitCode != 0 {
			t.Errorf("%s: exit frame %+v", p.ID, last)
		}
	}
}
