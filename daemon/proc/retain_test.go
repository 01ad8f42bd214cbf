package proc

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/seed5ad92d46/sous/daemon/streamlog"
	"github.com/seed5ad92d46/sous/daemon/wire"
)

func TestRetentionForgetsOldestExited(t *testing.T) {
	r := NewRegistry(Options{RetainExited: 2})
	defer r.Shutdown(false, time.Second)
	for i := range 4 {
		runToExit(t, r, Spec{ID: fmt.Sprint("p", i), Command: "true"})
	}
	live, err := r.Spawn(Spec{ID: "live", Command: "sleep", Args: []string{"5"}})
	if err != nil {
		t.Fatal(err)
	}
	defer live.Signal(9)
	r.prune(time.Now())
	for i, want := range []bool{false, false, true, true} {
		if got := r.Get(fmt.Sprint("p", i)) != nil; got != want {
			t.Errorf("p%d retained = %v, want %v", i, got, want)
		}
	}
	if r.Get("live") == nil {
		t.Error("a running process was forgotten")
	}
	// Age: everything that exited is past a 0-length window an hour later.
	r.prune(time.Now().Add(2 * time.Hour))
	if r.Get("p3") != nil || r.Get("live") == nil {
		t.Errorf("after an hour: p3 retained %v, live retained %v", r.Get("p3") != nil, r.Get("live") != nil)
	}
}

// An exited process is forgotten once RetainFor has passed, even when no
// other process exits to trigger a prune.
func TestRetentionExpiresWhileIdle(t *testing.T) {
	r := NewRegistry(Options{RetainFor: 200 * time.Millisecond})
	defer r.Shutdown(false, time.Second)
	runToExit(t, r, Spec{ID: "old", Command: "true"})
	time.Sleep(100 * time.Millisecond)
	runToExit(t, r, Spec{ID: "newer", Command: "true"})
	if r.Get("old") == nil || r.Get("newer") == nil {
		t.Fatal("forgotten before RetainFor passed")
	}
	deadline := time.Now().Add(5 * time.Second)
	for r.Get("old") != nil || r.Get("newer") != nil {
		if time.Now().After(deadline) {
			t.Fatalf("still retained 5 s later: old %v, newer %v", r.Get("old") != nil, r.Get("newer") != nil)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// Spilled replay is bounded across processes: past the total, the process
// that exited first loses its spill, and the newest keeps an exact replay.
func TestReplayDiskTotalDropsOldestExited(t *testing.T) {
	const size = 600 << 10
	r := NewRegistry(Options{
		Log:             streamlog.Options{MemLimit: 64 << 10, SpillDir: t.TempDir(), SegmentSize: 128 << 10},
		ReplayDiskTotal: 1 << 20,
	})
	defer r.Shutdown(false, time.Second)
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	for i := range 3 {
		runToExit(t, r, Spec{ID: fmt.Sprint("p", i), Command: "head", Args: []string{"-c", fmt.Sprint(size), "/dev/zero"}})
	}
	// Reclaiming runs on its own goroutine: wait for it to settle.
	for r.spilled.Load() > 1<<20 || r.reclaiming.Load() {
		if ctx.Err() != nil {
			t.Fatalf("spilled %d stays over the 1 MiB total", r.spilled.Load())
		}
		time.Sleep(5 * time.Millisecond)
	}
	var sum int64
	for i := range 3 {
		sum += r.Get(fmt.Sprint("p", i)).Log.Stats().Disk
	}
	if sum != r.spilled.Load() {
		t.Fatalf("registry counts %d spilled, the logs hold %d", r.spilled.Load(), sum)
	}
	if st := r.Get("p0").Log.Stats(); st.FirstSeq <= 1 || st.Disk != 0 {
		t.Errorf("the oldest exited process kept its spill: %+v", st)
	}
	if st := r.Get("p2").Log.Stats(); st.FirstSeq != 1 || st.Disk == 0 {
		t.Errorf("the newest process lost replay: %+v", st)
	}
}

// Replay memory is bounded across exited processes: past the total, those
// that exited first shed theirs, to disk where the daemon spills (replay
// stays exact) and else down to the exit frame; the newest keep theirs.
func TestReplayMemTotalShedsOldestExited(t *testing.T) {
	const size = 300 << 10 // each keeps all of it in a 1 MiB window
	for _, spill := range []bool{true, false} {
		t.Run(fmt.Sprint("spill=", spill), func(t *testing.T) {
			opt := streamlog.Options{MemLimit: 1 << 20}
			if spill {
				opt.SpillDir = t.TempDir()
			}
			r := NewRegistry(Options{Log: opt, ReplayMemTotal: 1 << 20})
			defer r.Shutdown(false, time.Second)
			for i := range 5 {
				runToExit(t, r, Spec{ID: fmt.Sprint("p", i), Command: "head", Args: []string{"-c", fmt.Sprint(size), "/dev/zero"}})
			}
			// The last exit's shedding runs on its supervisor: let it finish.
			deadline := time.Now().Add(5 * time.Second)
			for {
				total := 0
				for i := range 5 {
					total += r.Get(fmt.Sprint("p", i)).Log.Stats().MemBytes
				}
				r.mu.Lock()
				counted := r.exitedMem
				r.mu.Unlock()
				if total <= 1<<20 && counted == total {
					break
				}
				if time.Now().After(deadline) {
					t.Fatalf("the exited hold %d bytes of memory (counted %d), over the 1 MiB total", total, counted)
				}
				time.Sleep(5 * time.Millisecond)
			}
			oldest, newest := r.Get("p0").Log.Stats(), r.Get("p4").Log.Stats()
			if newest.MemBytes < size || newest.FirstSeq != 1 {
				t.Errorf("the newest shed its replay: %+v", newest)
			}
			if oldest.MemBytes > 64 {
				t.Errorf("the oldest kept %d bytes of memory", oldest.MemBytes)
			}
			// Its replay: exact from disk, or only the exit frame.
			var out int
			var exit bool
			for _, f := range frames(t, r.Get("p0")) {
				out += len(f.Data)
				exit = exit || f.Stream == wire.Exit
			}
			if want := map[bool]int{true: size, false: 0}[spill]; out != want || !exit {
				t.Errorf("the oldest replays %d bytes (want %d) and exit %v", out, want, exit)
			}
		})
	}
}

// A process replaced by a new one with its id leaves the retained count;
// the queue keeps counting only what is still retained.
func TestRetentionCountsReplacedOnce(t *testing.T) {
	r := NewRegistry(Options{RetainExited: 2})
	defer r.Shutdown(false, time.Second)
	run := func(id string) { runToExit(t, r, Spec{ID: id, Command: "true"}) }
	run("a")
	run("b")
	run("a") // replaces the first a: two retained, a and b
	r.mu.Lock()
	n := r.nexited
	r.mu.Unlock()
	if n != 2 || r.Get("a") == nil || r.Get("b") == nil {
		t.Fatalf("retained %d (want 2): a %v, b %v", n, r.Get("a") != nil, r.Get("b") != nil)
	}
	run("c") // one too many: b, the oldest retained, goes
	if r.Get("b") != nil || r.Get("a") == nil || r.Get("c") == nil {
		t.Fatalf("after c: a %v, b %v, c %v", r.Get("a") != nil, r.Get("b") != nil, r.Get("c") != nil)
	}
}

// runToExit spawns spec and waits for its exit frame, then a moment more so
// that the next process exits at a distinct time.
func runToExit(t *testing.T, r *Registry, spec Spec) *Process {
	t.Helper()
	p, err := r.Spawn(spec)
	if err != nil {
		t.Fatal(err)
	}
	select {
	case <-p.Done():
	case <-time.After(10 * time.Second):
		t.Fatalf("%s did not exit", spec.ID)
	}
	time.Sleep(2 * time.Millisecond)
	return p
}
