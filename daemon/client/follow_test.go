package client_test

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"os/exec"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/seed5ad92d46/sous/daemon"
	"github.com/seed5ad92d46/sous/daemon/client"
	"github.com/seed5ad92d46/sous/daemon/mirror"
	"github.com/seed5ad92d46/sous/daemon/wire"
	"github.com/seed5ad92d46/sous/internal/daemontest"
)

// follower records the frames one Proc was handed, checking as they come
// that their seqs run on without a gap or a repeat.
type follower struct {
	mu    sync.Mutex
	first int64 // the seq the frames must start after
	last  int64
	out   bytes.Buffer
	bad   string
}

func (f *follower) handle(fr *wire.Frame) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if fr.Stream == wire.Exit && fr.Seq <= f.last {
		return // a reattach from past the end gets the exit all the same
	}
	if fr.Seq != f.last+1 && f.bad == "" {
		f.bad = fmt.Sprintf("seq %d after %d", fr.Seq, f.last)
	}
	f.last = fr.Seq
	if fr.Stream == wire.Stdout {
		f.out.Write(fr.Data)
	}
}

func (f *follower) check(t *testing.T, name string, p *client.Proc, want []byte) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if code, err := p.Wait(ctx); err != nil || code != 0 {
		t.Fatalf("%s: wait: %d, %v", name, code, err)
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.bad != "" {
		t.Fatalf("%s (from seq %d): %s", name, f.first, f.bad)
	}
	if !bytes.Equal(f.out.Bytes(), want) {
		t.Fatalf("%s (from seq %d): %d bytes, want %d", name, f.first, f.out.Len(), len(want))
	}
	if p.Lost() != 0 {
		t.Fatalf("%s: %d frames lost", name, p.Lost())
	}
}

// A process this client follows, reattached through the same client while
// it writes: the daemon moves its one subscription per connection to the
// new replay, and every Proc of the id must still get each of its frames
// once, in order. The spawner's Proc used to fail ("replaced by a new
// process") and the new one to lose the start of its replay to frames of
// the old subscription still on their way.
func TestReattachWhileFollowed(t *testing.T) {
	out, err := exec.Command("seq", "1", "300000").Output()
	if err != nil {
		t.Fatal(err)
	}
	for name, start := range bothLinks {
		t.Run(name, func(t *testing.T) {
			dial := start(t)
			c := dial()
			ctx := context.Background()
			for round := range 8 {
				id := fmt.Sprintf("r%d", round)
				// The child writes in bursts, so reattaches land while
				// frames are in flight, between bursts and after the end.
				script := fmt.Sprintf("seq 1 100000; sleep 0.0%d; seq 100001 200000; sleep 0.0%d; seq 200001 300000", round, round)
				spawner := &follower{}
				p, err := c.Spawn(ctx, client.SpawnSpec{ID: id, Command: "sh", Args: []string{"-c", script}}, spawner.handle)
				if err != nil {
					t.Fatal(err)
				}
				// One from the start, one from just past what the spawner
				// has (the daemon must not skip what the spawner lacks),
				// and one from the start again once the others follow.
				type extra struct {
					f *follower
					p *client.Proc
				}
				var extras []extra
				for _, from := range []func() int64{
					func() int64 { return 0 },
					func() int64 { return p.LastSeq() + 3 },
					func() int64 { return 0 },
				} {
					f := &follower{first: from()}
					f.last = f.first
					q, res, err := c.Reattach(ctx, id, f.first, f.handle)
					if err != nil || !res.Found {
						t.Fatalf("reattach from %d: %+v, %v", f.first, res, err)
					}
					extras = append(extras, extra{f, q})
				}
				spawner.check(t, id+" spawner", p, out)
				for i, e := range extras {
					// Its frames' data is whatever follows seq first: the
					// spawner's frames say where that is in the output.
					want := out
					if e.f.first > 0 {
						want = tailAfterSeq(t, c, id, e.f.first, out)
					}
					e.f.check(t, fmt.Sprintf("%s reattach %d", id, i), e.p, want)
				}
			}
		})
	}
}

// bothLinks start a daemon, embedded or on a Unix socket, and return a
// function that dials a client of it, closed when the test ends.
var bothLinks = map[string]func(t *testing.T) func() *client.Client{
	"embedded": func(t *testing.T) func() *client.Client {
		srv, _ := embeddedDaemon(t)
		return func() *client.Client {
			c := client.Embedded(srv)
			t.Cleanup(func() { c.Close() })
			return c
		}
	},
	"socket": func(t *testing.T) func() *client.Client {
		sock := startDaemon(t, daemon.Config{})
		return func() *client.Client {
			c, err := client.DialUnix(context.Background(), sock, testToken, client.Options{})
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { c.Close() })
			return c
		}
	},
}

// A reattach through the same client from past what the spawner has seen,
// while the child is quiet: the replay must start where the spawner is,
// not at the reattach's seq, or the spawner loses the frames in between.
func TestReattachAheadOfTheSpawner(t *testing.T) {
	out, err := exec.Command("sh", "-c", "seq 1 1000; seq 1001 2000").Output()
	if err != nil {
		t.Fatal(err)
	}
	for name, start := range bothLinks {
		t.Run(name, func(t *testing.T) {
			dial := start(t)
			c := dial()
			ctx := context.Background()
			spawner := &follower{}
			p, err := c.Spawn(ctx, client.SpawnSpec{ID: "quiet", Command: "sh", Args: []string{"-c", "seq 1 1000; read x; seq 1001 2000"}}, spawner.handle)
			if err != nil {
				t.Fatal(err)
			}
			waitFor(t, func() bool { return spawner.bytes() == 3893 }) // seq 1 1000
			ahead := &follower{first: p.LastSeq() + 2}
			ahead.last = ahead.first
			q, res, err := c.Reattach(ctx, "quiet", ahead.first, ahead.handle)
			if err != nil || !res.Found {
				t.Fatalf("reattach: %+v, %v", res, err)
			}
			if _, err := p.Write(ctx, []byte("go\n")); err != nil {
				t.Fatal(err)
			}
			spawner.check(t, "spawner", p, out)
			ahead.check(t, "reattach", q, tailAfterSeq(t, c, "quiet", ahead.first, out))
		})
	}
}

// tailAfterSeq is the stdout of process id after frame seq, from a replay
// by a client of its own.
func tailAfterSeq(t *testing.T, c *client.Client, id string, seq int64, out []byte) []byte {
	t.Helper()
	// The whole replay, frame by frame, gives the offset of seq's end.
	var offset, last int64
	f := &follower{}
	p, res, err := c.Reattach(context.Background(), id, 0, func(fr *wire.Frame) {
		f.handle(fr)
		if fr.Seq <= seq && fr.Stream == wire.Stdout {
			offset += int64(len(fr.Data))
		}
		last = fr.Seq
	})
	if err != nil || !res.Found {
		t.Fatalf("replay: %+v, %v", res, err)
	}
	f.check(t, id+" full replay", p, out)
	if seq >= last {
		return nil
	}
	return out[offset:]
}

// A reattach from a seq the running process has not reached yet, which
// it then never reaches: the exit must still come, not a wait forever.
func TestReattachFromPastTheEnd(t *testing.T) {
	for name, start := range bothLinks {
		t.Run(name, func(t *testing.T) {
			dial := start(t)
			c := dial()
			ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
			defer cancel()
			p, err := c.Spawn(ctx, client.SpawnSpec{ID: "short", Command: "sh", Args: []string{"-c", "read x; exit 3"}}, nil)
			if err != nil {
				t.Fatal(err)
			}
			// Another client, and this one again: neither follows from a
			// seq the daemon has.
			for _, rc := range []*client.Client{dial(), c} {
				q, res, err := rc.Reattach(ctx, "short", 1000, nil)
				if err != nil || !res.Found || !res.Running {
					t.Fatalf("reattach: %+v, %v", res, err)
				}
				defer func() {
					if code, err := q.Wait(ctx); err != nil || code != 3 {
						t.Errorf("reattached from past the end: wait %d, %v", code, err)
					}
				}()
			}
			if _, err := p.Write(ctx, []byte("x\n")); err != nil {
				t.Fatal(err)
			}
			if code, err := p.Wait(ctx); err != nil || code != 3 {
				t.Fatalf("spawner: wait %d, %v", code, err)
			}
		})
	}
}

// A replay the daemon kept only part of (no state dir, a small memory
// window) says how many frames it lacks, from the start or from a seq.
func TestReattachCountsTruncatedReplay(t *testing.T) {
	_, c := daemontest.Embedded(t, daemon.Config{ReplayMemLimit: 64 << 10})
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	p, err := c.Spawn(ctx, client.SpawnSpec{ID: "big", Command: "seq", Args: []string{"1", "200000"}}, nil)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := p.Wait(ctx); err != nil {
		t.Fatal(err)
	}
	for _, from := range []int64{0, 5} {
		f := &follower{first: from, last: from}
		q, res, err := c.Reattach(ctx, "big", from, func(fr *wire.Frame) {
			if f.last == from {
				f.last = fr.Seq - 1 // the frames before the first are the lost ones
			}
			f.handle(fr)
		})
		if err != nil || !res.Found || res.FirstSeq <= from+1 {
			t.Fatalf("reattach from %d: %+v, %v (want a replay truncated past it)", from, res, err)
		}
		if _, err := q.Wait(ctx); err != nil {
			t.Fatal(err)
		}
		if want := res.FirstSeq - from - 1; q.Lost() != want {
			t.Errorf("from %d: Lost() = %d, want %d (firstSeq %d)", from, q.Lost(), want, res.FirstSeq)
		}
		if f.bad != "" || f.out.Len() == 0 || f.out.Len() > 64<<10 {
			t.Errorf("from %d: %d bytes of replay; %s", from, f.out.Len(), f.bad)
		}
	}
}

// Reattaches of one id racing each other through the same client: each
// must get its own replay, not take the other's for it.
func TestConcurrentReattachesOfOneID(t *testing.T) {
	out, err := exec.Command("seq", "1", "300000").Output()
	if err != nil {
		t.Fatal(err)
	}
	for name, start := range bothLinks {
		t.Run(name, func(t *testing.T) {
			c := start(t)()
			ctx := context.Background()
			for round := range 15 {
				id := fmt.Sprintf("c%d", round)
				spawner := &follower{}
				p, err := c.Spawn(ctx, client.SpawnSpec{ID: id, Command: "sh", Args: []string{"-c", "seq 1 150000; sleep 0.05; seq 150001 300000"}}, spawner.handle)
				if err != nil {
					t.Fatal(err)
				}
				waitFor(t, func() bool { return spawner.seq() >= 20 }) // about 30 frames come before the pause
				froms := []int64{15, 3}
				fs := make([]*follower, len(froms))
				qs := make([]*client.Proc, len(froms))
				var wg sync.WaitGroup
				for i, from := range froms {
					fs[i] = &follower{first: from, last: from}
					wg.Go(func() {
						q, res, err := c.Reattach(ctx, id, from, fs[i].handle)
						if err != nil || !res.Found {
							t.Errorf("reattach from %d: %+v, %v", from, res, err)
						}
						qs[i] = q
					})
				}
				wg.Wait()
				if t.Failed() {
					return
				}
				spawner.check(t, id+" spawner", p, out)
				for i, f := range fs {
					f.check(t, fmt.Sprintf("%s reattach from %d", id, froms[i]), qs[i], tailAfterSeq(t, c, id, f.first, out))
				}
			}
		})
	}
}

func (f *follower) seq() int64 {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.last
}

func (f *follower) bytes() int {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.out.Len()
}

// A process this client spawned with its output mirrored is not
// reattached through the same client: the daemon would send the new
// follower the spawner's marked frames, without their data. Another
// client gets all of it.
func TestReattachOfOwnMirroredProcessRefused(t *testing.T) {
	dial := bothLinks["socket"](t)
	c := dial()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	r, w, err := os.Pipe()
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	defer w.Close()
	p, err := c.Spawn(ctx, client.SpawnSpec{ID: "m", Command: "sh", Args: []string{"-c", "echo hello; read x"}, Mirror: mirror.Spec{Stdout: w}}, nil)
	if err != nil {
		t.Fatal(err)
	}
	if _, _, err := c.Reattach(ctx, "m", 0, nil); err == nil || !strings.Contains(err.Error(), "mirrored") {
		t.Fatalf("same-client reattach of a mirrored process: %v", err)
	}
	other := &follower{}
	q, res, err := dial().Reattach(ctx, "m", 0, other.handle)
	if err != nil || !res.Found {
		t.Fatalf("another client: %+v, %v", res, err)
	}
	if _, err := p.Write(ctx, []byte("x\n")); err != nil {
		t.Fatal(err)
	}
	other.check(t, "other client", q, []byte("hello\n"))
	if _, err := p.Wait(ctx); err != nil {
		t.Fatal(err)
	}
}

// A follower from past the end of a running process whose connection
// drops: the reconnect's reattach must still bring the exit.
func TestReattachFromPastTheEndAcrossAReconnect(t *testing.T) {
	dial := bothLinks["socket"](t)
	ctx, cancel := context.WithTimeout(context.Background(), 15*time.Second)
	defer cancel()
	spawner := dial()
	p, err := spawner.Spawn(ctx, client.SpawnSpec{ID: "short", Command: "sh", Args: []string{"-c", "read x; exit 3"}}, nil)
	if err != nil {
		t.Fatal(err)
	}
	c := dial()
	q, _, err := c.Reattach(ctx, "short", 1000, nil)
	if err != nil {
		t.Fatal(err)
	}
	client.BreakLink(c)
	if err := c.Call(ctx, "server.ping", nil, nil); err != nil { // the reconnect is done
		t.Fatal(err)
	}
	if _, err := p.Write(ctx, []byte("x\n")); err != nil {
		t.Fatal(err)
	}
	if code, err := q.Wait(ctx); err != nil || code != 3 {
		t.Fatalf("after a reconnect: wait %d, %v", code, err)
	}
}
