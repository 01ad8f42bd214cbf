package daemon

import (
	"context"
	"encoding/json"
	"errors"
	"io"
	"os"
	"sync"
	"testing"
	"time"

	"github.com/seed5ad92d46/sous/daemon/proc"
	"github.com/seed5ad92d46/sous/daemon/wire"
	"github.com/seed5ad92d46/sous/internal/testutil"
)

// inlineSink is an in-process sink that takes its frames on the goroutine
// that changed the log (InlineSink), as the embedded client's link does.
type inlineSink struct {
	mu     sync.Mutex
	frames []wire.Frame
	gone   []wire.Gone
}

func (s *inlineSink) DeliverInline() bool { return true }

func (s *inlineSink) SendFrames(_ string, _ []byte, fs []wire.Frame) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	for _, f := range fs {
		f.Data = append([]byte(nil), f.Data...)
		s.frames = append(s.frames, f)
	}
	return nil
}

func (s *inlineSink) SendGone(_ []byte, g wire.Gone) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.gone = append(s.gone, g)
	return nil
}

// A follow that finds the session already subscribed to the id (two
// follows racing) ends the older subscription. With inline delivery that
// ending runs right there, and it must not need the session's lock while
// the follow holds it.
func TestInlineFollowReplacingASubscription(t *testing.T) {
	srv, err := New(Config{})
	if err != nil {
		t.Fatal(err)
	}
	defer srv.Close()
	sink := &inlineSink{}
	se := newSession(srv, sink) // not closed on failure: a deadlocked follow holds its lock
	p, cur, _, err := srv.reg.SpawnFollowed(proc.Spec{ID: "twice", Command: "sh", Args: []string{"-c", "echo hi; sleep 10"}})
	if err != nil {
		t.Fatal(err)
	}
	defer p.Signal(9)
	done := make(chan error, 1)
	go func() {
		if err := se.followCursor(p, cur, -1, false, false); err != nil {
			done <- err
			return
		}
		// The second, as a racing follow would: the first is still there.
		done <- se.followCursor(p, p.Log.NewCursor(0), -1, false, false)
	}()
	select {
	case err := <-done:
		if err != nil {
			t.Fatal(err)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("the second follow deadlocked ending the first")
	}
	deadline := time.Now().Add(10 * time.Second)
	for {
		sink.mu.Lock()
		n := len(sink.frames)
		sink.mu.Unlock()
		se.mu.Lock()
		subs := len(se.subs)
		se.mu.Unlock()
		if n >= 1 && subs == 1 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("%d frames delivered, %d subscriptions", n, subs)
		}
		time.Sleep(10 * time.Millisecond)
	}
	se.Close()
}

// An in-process caller passes a spawn's pipes with the call (Session.Call's
// files), with the meaning they have over a socket: the spawn claims
// them and the daemon closes them once the output is read; a request that
// takes none (a ping) closes what came with it.
func TestCallWithFiles(t *testing.T) {
	srv, err := New(Config{})
	if err != nil {
		t.Fatal(err)
	}
	defer srv.Close()
	sink := &inlineSink{}
	se := srv.Local(sink)
	defer se.Close()
	ctx := context.Background()

	_, w := testutil.Pipe(t)
	if _, err := se.Call(ctx, "server.ping", nil, []*os.File{w}); err != nil {
		t.Fatal(err)
	}
	if err := w.Close(); !errors.Is(err, os.ErrClosed) {
		t.Errorf("a descriptor passed with a ping was left open (Close: %v)", err)
	}

	r, w := testutil.Pipe(t)
	if _, err := se.Call(ctx, "process.spawn", json.RawMessage(`{"id":"m","command":"echo","args":["hi"],"mirror":["stdout"]}`), []*os.File{w}); err != nil {
		t.Fatal(err)
	}
	// The daemon's is the only copy, and it closes it after the output.
	got, err := io.ReadAll(r)
	if err != nil || string(got) != "hi\n" {
		t.Fatalf("mirror got %q (%v)", got, err)
	}
}

// slowSink is an inlineSink whose every batch takes a millisecond: a
// consumer slower than the child.
type slowSink struct{ inlineSink }

func (s *slowSink) SendFrames(id string, q []byte, fs []wire.Frame) error {
	time.Sleep(time.Millisecond)
	return s.inlineSink.SendFrames(id, q, fs)
}

// A reattach answers once it has replayed what was there: the live frames
// after that are not delivered on the caller's goroutine, where a child
// writing faster than the sink takes them held the answer (and the
// caller's *Proc) until the child stopped.
func TestInlineReattachAnswersWhileTheChildWrites(t *testing.T) {
	srv, err := New(Config{})
	if err != nil {
		t.Fatal(err)
	}
	defer srv.Close()
	se := srv.Local(&slowSink{})
	defer se.Close()
	p, err := srv.reg.Spawn(proc.Spec{ID: "fast", Command: "yes", Args: []string{"a line of output"}})
	if err != nil {
		t.Fatal(err)
	}
	defer p.Signal(9)
	time.Sleep(50 * time.Millisecond) // some output to replay
	answered := make(chan error, 1)
	go func() {
		_, err := se.Call(context.Background(), "process.reattach", []byte(`{"id":"fast","fromSeq":0}`), nil)
		answered <- err
	}()
	select {
	case err := <-answered:
		if err != nil {
			t.Fatal(err)
		}
	case <-time.After(5 * time.Second):
		p.Signal(9)
		t.Fatal("reattach did not answer while the child kept writing")
	}
}

// batchSink records each batch it is sent, as a socket's connection
// would write it; it is not an InlineSink, so a pump delivers to it.
type batchSink struct {
	mu      sync.Mutex
	frames  []wire.Frame
	batches int
	exited  chan struct{}
}

func (s *batchSink) SendFrames(_ string, _ []byte, fs []wire.Frame) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.batches++
	for _, f := range fs {
		f.Data = append([]byte(nil), f.Data...)
		s.frames = append(s.frames, f)
		if f.Stream == wire.Exit {
			close(s.exited)
		}
	}
	return nil
}

func (s *batchSink) SendGone([]byte, wire.Gone) error { return nil }

// The spawner of a mirrored stream gets its frames' seqs paced into few
// batches, every seq once and in order, marked, and then the exit; so does
// the spawner of a short output.
func TestSpawnerFramesPaced(t *testing.T) {
	srv, err := New(Config{})
	if err != nil {
		t.Fatal(err)
	}
	defer srv.Close()
	for _, tc := range []struct {
		name, size string
		paced      bool
	}{{"stream", "67108864", true}, {"short", "100", false}} {
		t.Run(tc.name, func(t *testing.T) {
			sink := &batchSink{exited: make(chan struct{})}
			se := srv.Local(sink)
			defer se.Close()
			r, w := testutil.Pipe(t)
			go io.Copy(io.Discard, r)
			spawn := `{"id":"` + tc.name + `","command":"head","args":["-c","` + tc.size + `","/dev/zero"],"mirror":["stdout"]}`
			start := time.Now()
			if _, err := se.Call(context.Background(), "process.spawn", json.RawMessage(spawn), []*os.File{w}); err != nil {
				t.Fatal(err)
			}
			select {
			case <-sink.exited:
			case <-time.After(20 * time.Second):
				t.Fatal("no exit frame")
			}
			took := time.Since(start)
			sink.mu.Lock()
			defer sink.mu.Unlock()
			for i, f := range sink.frames {
				if f.Seq != int64(i+1) {
					t.Fatalf("frame %d has seq %d", i, f.Seq)
				}
				if f.Stream != wire.Exit && !f.Mirrored {
					t.Fatalf("frame %d is not marked mirrored", f.Seq)
				}
			}
			n := len(sink.frames)
			t.Logf("%d frames in %d batches, %v", n, sink.batches, took)
			if tc.paced && sink.batches > n/paceFrames {
				t.Errorf("%d frames came in %d batches: not paced", n, sink.batches)
			}
		})
	}
}
