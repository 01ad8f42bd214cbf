package client_test

import (
	"bytes"
	"context"
	"crypto/rand"
	"errors"
	"io"
	"os"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"github.com/seed5ad92d46/sous/daemon"
	"github.com/seed5ad92d46/sous/daemon/client"
	"github.com/seed5ad92d46/sous/daemon/mirror"
	"github.com/seed5ad92d46/sous/daemon/proc"
	"github.com/seed5ad92d46/sous/daemon/wire"
	"github.com/seed5ad92d46/sous/internal/faultproxy"
)

// mirrorRun spawns `cat FILE; cat FILE >&2` through c with both streams
// mirrored to pipes of this process, and returns what each pipe received
// and what arrived in frames, split by the Mirrored mark.
func mirrorRun(t *testing.T, c *client.Client, file string) (pipes [2][]byte, marked, unmarked [2][]byte, nMarked [2]int) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	var (
		wg sync.WaitGroup
		ws [2]*os.File
	)
	for i := range ws {
		r, w, err := os.Pipe()
		if err != nil {
			t.Fatal(err)
		}
		defer r.Close()
		defer w.Close()
		ws[i] = w
		wg.Add(1)
		go func() { defer wg.Done(); pipes[i], _ = io.ReadAll(r) }()
	}
	var mu sync.Mutex
	h := func(f *wire.Frame) {
		i := 0
		switch f.Stream {
		case wire.Stdout:
		case wire.Stderr:
			i = 1
		default:
			return
		}
		mu.Lock()
		defer mu.Unlock()
		if f.Mirrored {
			nMarked[i]++
			marked[i] = append(marked[i], f.Data...)
		} else {
			unmarked[i] = append(unmarked[i], f.Data...)
		}
	}
	p, err := c.Spawn(ctx, client.SpawnSpec{
		ID: "m", Command: "sh", Args: []string{"-c", `cat "$0"; cat "$0" >&2`, file},
		Mirror: mirror.Spec{Stdout: ws[0], Stderr: ws[1]},
	}, h)
	if err != nil {
		t.Fatal(err)
	}
	if code, err := p.Wait(ctx); err != nil || code != 0 {
		t.Fatalf("wait: %d %v", code, err)
	}
	ws[0].Close()
	ws[1].Close()
	wg.Wait()
	return pipes, marked, unmarked, nMarked
}

func randomFile(t *testing.T, n int) (string, []byte) {
	t.Helper()
	data := make([]byte, n)
	rand.Read(data)
	path := filepath.Join(t.TempDir(), "data")
	if err := os.WriteFile(path, data, 0o644); err != nil {
		t.Fatal(err)
	}
	return path, data
}

// On the embedded daemon both streams reach their pipes exactly, straight
// from the daemon's reader, and every frame says so.
func TestEmbeddedSpawnMirrors(t *testing.T) {
	_, c := embeddedDaemon(t)
	file, want := randomFile(t, 8<<20+17)
	pipes, marked, unmarked, _ := mirrorRun(t, c, file)
	for i, name := range []string{"stdout", "stderr"} {
		if !bytes.Equal(pipes[i], want) {
			t.Errorf("%s pipe got %d bytes, not the %d written", name, len(pipes[i]), len(want))
		}
		if !bytes.Equal(marked[i], want) || len(unmarked[i]) != 0 {
			t.Errorf("%s frames: %d bytes marked mirrored, %d not, of %d", name, len(marked[i]), len(unmarked[i]), len(want))
		}
	}
}

// A daemon on a Unix socket takes the pipes passed with the spawn
// (process.spawn.mirror): both streams reach them exactly, and every output
// frame arrives marked, without its data. A client that follows the process
// without having spawned it gets the frames whole.
func TestSocketSpawnMirrors(t *testing.T) {
	sock := startDaemon(t, daemon.Config{})
	c := dialProxy(t, sock)
	file, want := randomFile(t, 4<<20+17)
	pipes, marked, unmarked, nMarked := mirrorRun(t, c, file)
	if !client.PassesMirrors(c) {
		t.Error("a direct socket's client gave up passing mirrors")
	}
	for i, name := range []string{"stdout", "stderr"} {
		if !bytes.Equal(pipes[i], want) {
			t.Errorf("%s pipe got %d bytes, not the %d written", name, len(pipes[i]), len(want))
		}
		if nMarked[i] == 0 || len(marked[i]) != 0 || len(unmarked[i]) != 0 {
			t.Errorf("%s frames: %d marked carrying %d bytes, %d bytes unmarked; want only data-less marked ones",
				name, nMarked[i], len(marked[i]), len(unmarked[i]))
		}
	}
	reattachedWhole(t, sock, "m", want)
}

// reattachedWhole follows process id from its first frame through a
// client of its own, which passed no mirror: every frame must come whole
// and unmarked, and both streams must be want.
func reattachedWhole(t *testing.T, sock, id string, want []byte) {
	t.Helper()
	other := dialProxy(t, sock)
	var got [2][]byte
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	p, _, err := other.Reattach(ctx, id, 0, func(f *wire.Frame) {
		if f.Mirrored {
			t.Errorf("frame %d marked mirrored for a client that passed no mirror", f.Seq)
		}
		if f.Stream == wire.Stdout || f.Stream == wire.Stderr {
			got[f.Stream-wire.Stdout] = append(got[f.Stream-wire.Stdout], f.Data...)
		}
	})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := p.Wait(ctx); err != nil {
		t.Fatal(err)
	}
	for i := range got {
		if !bytes.Equal(got[i], want) {
			t.Errorf("reattached stream %d: %d bytes, want %d", i, len(got[i]), len(want))
		}
	}
}

// A relay between client and daemon (here a proxy that copies bytes, as
// socat would) drops the passed descriptors. The daemon refuses the mirror
// before starting anything, and the client spawns unmirrored: the frames
// carry everything and the pipes get nothing.
func TestSocketSpawnMirrorThroughARelay(t *testing.T) {
	proxy := faultproxy.Start(t, startDaemon(t, daemon.Config{}), faultproxy.Options{MinBytes: 1 << 40, MaxBytes: 1 << 40})
	c := dialProxy(t, proxy.Path())
	file, want := randomFile(t, 1<<20)
	for run := range 2 { // the second without trying, once the client knows
		pipes, marked, unmarked, _ := mirrorRun(t, c, file)
		for i := range pipes {
			if len(pipes[i]) != 0 || len(marked[i]) != 0 || !bytes.Equal(unmarked[i], want) {
				t.Errorf("stream %d: pipe %d bytes, marked %d, unmarked %d (want all %d unmarked)", i, len(pipes[i]), len(marked[i]), len(unmarked[i]), len(want))
			}
		}
		if client.PassesMirrors(c) {
			t.Fatalf("run %d: the client still passes mirrors through a relay that drops them", run)
		}
	}
}

type passingClient struct {
	name   string
	c      *client.Client
	passes bool // descriptors reach the daemon
}

// passingClients are the links a test of passed descriptors runs over: the
// embedded daemon and a Unix socket, which take them, and a relay that
// drops them.
func passingClients(t *testing.T) []passingClient {
	relay := faultproxy.Start(t, startDaemon(t, daemon.Config{}), faultproxy.Options{MinBytes: 1 << 40, MaxBytes: 1 << 40})
	_, embedded := embeddedDaemon(t)
	return []passingClient{
		{"embedded", embedded, true},
		{"unix socket", dialProxy(t, startDaemon(t, daemon.Config{})), true},
		{"relay", dialProxy(t, relay.Path()), false},
	}
}

// A pipe passed as SpawnSpec.Mirror.Stdin is the child's stdin itself on the
// embedded daemon and on a Unix socket (process.spawn.mirror.stdin), and
// writing to the process is refused there. Through a relay that drops
// descriptors the spawn falls back to the daemon's pipe, fed by Write.
func TestSpawnPassedStdin(t *testing.T) {
	_, want := randomFile(t, 2<<20+3)
	for _, tc := range passingClients(t) {
		t.Run(tc.name, func(t *testing.T) {
			ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
			defer cancel()
			r, w, err := os.Pipe()
			if err != nil {
				t.Fatal(err)
			}
			defer w.Close()
			var mu sync.Mutex
			var got []byte
			p, err := tc.c.Spawn(ctx, client.SpawnSpec{ID: "in", Command: "cat", Mirror: mirror.Spec{Stdin: r}}, func(f *wire.Frame) {
				mu.Lock()
				defer mu.Unlock()
				if f.Stream == wire.Stdout {
					got = append(got, f.Data...)
				}
				if f.Stream == wire.Stderr {
					t.Logf("stderr: %s", f.Data)
				}
			})
			r.Close() // the daemon has its own copy, or none
			if err != nil {
				t.Fatal(err)
			}
			if p.StdinPassed() != tc.passes {
				t.Fatalf("StdinPassed() = %v, want %v", p.StdinPassed(), tc.passes)
			}
			if tc.passes {
				var we *wire.Error
				if _, err := p.Write(ctx, []byte("x")); !errors.As(err, &we) || we.Message != proc.MsgStdinPassed {
					t.Errorf("Write to a passed stdin: %v, want %q", err, proc.MsgStdinPassed)
				}
				go func() { w.Write(want); w.Close() }()
			} else {
				if _, err := p.Write(ctx, want); err != nil {
					t.Fatal(err)
				}
				if err := p.CloseStdin(ctx); err != nil {
					t.Fatal(err)
				}
			}
			if code, err := p.Wait(ctx); err != nil || code != 0 {
				t.Fatalf("wait: %d %v", code, err)
			}
			mu.Lock()
			defer mu.Unlock()
			if !bytes.Equal(got, want) {
				t.Errorf("stdout: %d bytes, want the %d written", len(got), len(want))
			}
		})
	}
}

// With Mirror.Direct the child writes the passed pipe itself on the
// embedded daemon and on a Unix socket (process.spawn.mirror.direct), and
// no output frames come; through a relay that drops descriptors it falls
// back to frames carrying everything.
func TestSpawnDirectOutput(t *testing.T) {
	file, want := randomFile(t, 2<<20+3)
	for _, tc := range passingClients(t) {
		t.Run(tc.name, func(t *testing.T) {
			ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
			defer cancel()
			r, w, err := os.Pipe()
			if err != nil {
				t.Fatal(err)
			}
			defer r.Close()
			piped := make(chan []byte, 1)
			go func() { b, _ := io.ReadAll(r); piped <- b }()
			var mu sync.Mutex
			var framed []byte
			p, err := tc.c.Spawn(ctx, client.SpawnSpec{ID: "out", Command: "cat", Args: []string{file}, Mirror: mirror.Spec{Stdout: w, Direct: true}},
				func(f *wire.Frame) {
					mu.Lock()
					defer mu.Unlock()
					if f.Stream == wire.Stdout {
						framed = append(framed, f.Data...)
					}
				})
			w.Close() // the daemon has its own copy, or none
			if err != nil {
				t.Fatal(err)
			}
			if p.OutputPassed() != tc.passes {
				t.Fatalf("OutputPassed() = %v, want %v", p.OutputPassed(), tc.passes)
			}
			if code, err := p.Wait(ctx); err != nil || code != 0 {
				t.Fatalf("wait: %d %v", code, err)
			}
			got := <-piped
			mu.Lock()
			defer mu.Unlock()
			if tc.passes && (!bytes.Equal(got, want) || len(framed) != 0) {
				t.Errorf("pipe %d bytes (exact %v), frames %d bytes; want all %d in the pipe", len(got), bytes.Equal(got, want), len(framed), len(want))
			}
			if !tc.passes && (len(got) != 0 || !bytes.Equal(framed, want)) {
				t.Errorf("pipe %d bytes, frames %d bytes (exact %v); want all %d in frames", len(got), len(framed), bytes.Equal(framed, want), len(want))
			}
		})
	}
}

// A connection that breaks while the daemon tees a child's output to the
// spawner's pipe: everything the daemon teed before it noticed is in the
// pipe already, so the reattach must not bring it again (the client claims
// the mirror's marks, "mirrored":true). What the handler gets whole, it
// writes to the same pipe, as sous exec does: the pipe then holds the
// output exactly once.
func TestSocketMirrorSurvivesABrokenConnection(t *testing.T) {
	c := dialProxy(t, startDaemon(t, daemon.Config{}))
	file, want := randomFile(t, 8<<20+5)
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	r, w, err := os.Pipe()
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	defer w.Close()
	got := make(chan []byte)
	go func() { b, _ := io.ReadAll(r); got <- b }()

	var (
		broke   sync.Once
		mu      sync.Mutex
		unteed  int
		written int
	)
	h := func(f *wire.Frame) {
		if f.Stream != wire.Stdout {
			return
		}
		// The first frame breaks the link while the child writes on: the
		// daemon tees on until it sees the connection gone.
		broke.Do(func() {
			client.BreakLink(c)
			time.Sleep(50 * time.Millisecond)
		})
		if f.Mirrored {
			return
		}
		mu.Lock()
		unteed++
		written += len(f.Data)
		mu.Unlock()
		if _, err := w.Write(f.Data); err != nil {
			t.Errorf("write frame %d: %v", f.Seq, err)
		}
	}
	p, err := c.Spawn(ctx, client.SpawnSpec{ID: "teed", Command: "cat", Args: []string{file}, Mirror: mirror.Spec{Stdout: w}}, h)
	if err != nil {
		t.Fatal(err)
	}
	if code, err := p.Wait(ctx); err != nil || code != 0 {
		t.Fatalf("wait: %d %v", code, err)
	}
	w.Close()
	out := <-got
	if !bytes.Equal(out, want) {
		t.Errorf("the pipe holds %d bytes, not the %d written once (%d bytes in %d frames came whole after the break)",
			len(out), len(want), written, unteed)
	}
	if !client.PassesMirrors(c) {
		t.Error("the client gave up passing mirrors")
	}
}
