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
	se := srv.Local(sink) // not closed on failure: a deadlocked follow holds its lock
	p, cur, err := srv.reg.SpawnFollowed(proc.Spec{ID: "twice", Command: "sh", Args: []string{"-c", "echo hi; sleep 10"}})
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

// An in-process caller passes a spawn's pipes in the call's context
// (WithFiles), with the meaning they have over a socket: the spawn claims
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
	if _, err := se.Call(WithFiles(ctx, w), "server.ping", nil); err != nil {
		t.Fatal(err)
	}
	if err := w.Close(); !errors.Is(err, os.ErrClosed) {
		t.Errorf("a descriptor passed with a ping was left open (Close: %v)", err)
	}

	r, w := testutil.Pipe(t)
	if _, err := se.Call(WithFiles(ctx, w), "process.spawn", json.RawMessage(`{"id":"m","command":"echo","args":["hi"],"mirror":["stdout"]}`)); err != nil {
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
		_, err := se.Call(context.Background(), "process.reattach", []byte(`{"id":"fast","fromSeq":0}`))
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
