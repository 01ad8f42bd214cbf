package proc

import (
	"fmt"
	"os/exec"
	"slices"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/seed5ad92d46/sous/daemon/wire"
)

// TestChildPollerPaths runs, many at once, children that take each of the
// child poller's paths: exiting silent (pipes closed with no reader),
// writing and exiting at once (the reaper finds data left), writing while
// running (a reader from the first output), closing stdout long before
// exiting (an ended pipe while the child lives), a descendant writing
// after the child's exit (the drain), and a nonzero exit. Each must give
// exactly its output and its exit code. Many at once, so that descriptors
// are closed and reused while events for them wait in one batch.
func TestChildPollerPaths(t *testing.T) {
	r := NewRegistry(Options{DrainAfterExit: 2 * time.Second})
	t.Cleanup(func() { r.Shutdown(false, 100*time.Millisecond) })
	cases := []struct {
		name     string
		args     []string
		out, err string
		code     int
	}{
		{"silent", []string{"true"}, "", "", 0},
		{"at-once", []string{"sh", "-c", "printf out; printf err >&2"}, "out", "err", 0},
		{"while-running", []string{"sh", "-c", "printf a; sleep 0.05; printf b >&2; sleep 0.05"}, "a", "b", 0},
		{"stdout-closed-early", []string{"sh", "-c", "exec >&-; sleep 0.1; printf late >&2"}, "", "late", 0},
		{"descendant", []string{"sh", "-c", "(sleep 0.2; printf bg) & printf fg"}, "fgbg", "", 0},
		{"failing", []string{"sh", "-c", "printf x >&2; exit 3"}, "", "x", 3},
	}
	const rounds = 15
	var wg sync.WaitGroup
	for i := range rounds {
		for _, c := range cases {
			wg.Add(1)
			go func() {
				defer wg.Done()
				id := fmt.Sprintf("%s-%d", c.name, i)
				p, err := r.Spawn(Spec{ID: id, Command: c.args[0], Args: c.args[1:]})
				if err != nil {
					t.Error(err)
					return
				}
				fs := frames(t, p)
				var out, errOut []byte
				for _, f := range fs {
					switch f.Stream {
					case wire.Stdout:
						out = append(out, f.Data...)
					case wire.Stderr:
						errOut = append(errOut, f.Data...)
					}
				}
				if string(out) != c.out || string(errOut) != c.err {
					t.Errorf("%s: stdout %q stderr %q, want %q %q", id, out, errOut, c.out, c.err)
				}
				if last := fs[len(fs)-1]; last.Stream != wire.Exit || last.ExitCode != c.code {
					t.Errorf("%s: last frame %+v, want exit %d", id, last, c.code)
				}
			}()
		}
	}
	wg.Wait()
}

// TestChildPollerBackToBack spawns a silent child as soon as the one
// before has its exit frame, as a client's loop does: the next child's
// descriptors then take the numbers the last one's just gave back, while
// the poller may still hold events for them.
func TestChildPollerBackToBack(t *testing.T) {
	r := newTestRegistry(t)
	for i := range 300 {
		p, err := r.Spawn(Spec{ID: fmt.Sprint(i % 7), Command: "true"})
		if err != nil {
			t.Fatal(err)
		}
		fs := frames(t, p)
		if len(fs) != 1 || fs[0].Stream != wire.Exit || fs[0].ExitCode != 0 {
			t.Fatalf("spawn %d: frames %+v, want only the exit frame", i, fs)
		}
	}
}

// TestChildPollerOneWakePerExit spawns silent children one after another
// and counts the poller's wake-ups: one an exit. Had the daemon let go of
// the children's ends of their output pipes at the spawn, each pipe would
// end on its own as the dying child's descriptors are closed, before its
// pidfd turns readable, and wake the poller by itself (2.00 an exit with
// that change alone).
func TestChildPollerOneWakePerExit(t *testing.T) {
	r := newTestRegistry(t)
	const n = 100
	before := r.poller.batches.Load()
	for i := range n {
		p, err := r.Spawn(Spec{ID: fmt.Sprint(i % 4), Command: "true"})
		if err != nil {
			t.Fatal(err)
		}
		<-p.Done()
	}
	if per := float64(r.poller.batches.Load()-before) / n; per > 1.2 {
		t.Errorf("the poller woke %.2f times an exit, want 1", per)
	}
}

// BenchmarkSpawnExitPoller spawns /bin/true and waits for its exit frame
// through two registries in one process, alternating batches: one with
// the child poller, one without (each child reaped and read by goroutines
// of its own, as before the poller). poller-x is the first's time as a
// multiple of the second's, batch by batch; on a shared machine that
// ratio holds where the times themselves drift. os/exec's Run of the same
// runs in a third batch beside them; the CPU figures are this process's
// own (every thread's, the children's not).
func BenchmarkSpawnExitPoller(b *testing.B) {
	with := NewRegistry(Options{})
	without := NewRegistry(Options{})
	b.Cleanup(func() {
		with.Shutdown(false, time.Second)
		without.Shutdown(false, time.Second)
	})
	without.poller.close()
	without.poller = nil
	cpu := map[*Registry]time.Duration{}
	spawn := func(r *Registry, n int) time.Duration {
		start, cpu0 := time.Now(), selfCPU(b)
		for i := range n {
			p, err := r.Spawn(Spec{ID: fmt.Sprint(i % 8), Command: "/bin/true"})
			if err != nil {
				b.Fatal(err)
			}
			<-p.Done()
		}
		cpu[r] += selfCPU(b) - cpu0
		return time.Since(start)
	}
	var execCPU, execTime time.Duration
	osExec := func(n int) {
		start, cpu0 := time.Now(), selfCPU(b)
		for range n {
			if err := exec.Command("/bin/true").Run(); err != nil {
				b.Fatal(err)
			}
		}
		execCPU += selfCPU(b) - cpu0
		execTime += time.Since(start)
	}
	const batch = 20
	spawn(with, batch)
	spawn(without, batch)
	var tw, two time.Duration
	var ratios []float64
	b.ResetTimer()
	for i := 0; i < b.N; i += batch {
		var x, y time.Duration
		if i/batch%2 == 0 {
			x, y = spawn(with, batch), spawn(without, batch)
		} else {
			y, x = spawn(without, batch), spawn(with, batch)
		}
		osExec(batch)
		tw, two = tw+x, two+y
		ratios = append(ratios, float64(x)/float64(y))
	}
	b.StopTimer()
	slices.Sort(ratios)
	b.ReportMetric(float64(tw.Nanoseconds())/float64(b.N), "poller-ns/spawn")
	b.ReportMetric(float64(two.Nanoseconds())/float64(b.N), "goroutines-ns/spawn")
	b.ReportMetric(ratios[len(ratios)/2], "poller-x")
	b.ReportMetric(float64(cpu[with].Microseconds())/float64(b.N), "poller-cpu-us/spawn")
	b.ReportMetric(float64(cpu[without].Microseconds())/float64(b.N), "goroutines-cpu-us/spawn")
	b.ReportMetric(float64(execCPU.Microseconds())/float64(b.N), "os-exec-cpu-us/spawn")
	b.ReportMetric(float64(execTime.Nanoseconds())/float64(b.N), "os-exec-ns/spawn")
}

// selfCPU is the CPU time this process has used, every thread's, its
// children's not.
func selfCPU(b *testing.B) time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		b.Fatal(err)
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}
