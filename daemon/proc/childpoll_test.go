package proc

import (
	"fmt"
	"sync"
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
