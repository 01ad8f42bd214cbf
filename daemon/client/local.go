package client

import (
	"context"
	"encoding/json"
	"fmt"
	"net"
	"os"
	"sync"

	"github.com/seed5ad92d46/sous/daemon/wire"
)

// LocalServer is an in-process daemon, as the client takes it: Embedded
// and an "embedded" Target (through Target.Embedded.New) are handed one.
// The client never builds a daemon: the program composes it (cmd/sous from
// daemon.New) and passes it down, so that this library depends on the
// protocol's wire types alone.
//
// *daemon.Server satisfies it without importing this package: the method
// signatures use only wire and standard types, LocalSink and LocalSession
// being aliases of interface literals that the daemon spells the same
// (daemon.FrameSink, daemon.LocalSession). The program that composes the
// two asserts it at compile time.
type LocalServer interface {
	// Local opens a session: one client's calls, and the frames of the
	// processes it follows, handed to sink.
	Local(sink LocalSink) LocalSession
	// Close stops the daemon and every process it started (SIGTERM, then
	// SIGKILL after its grace).
	Close() error
}

// LocalSink receives the frames of the processes a local session follows,
// one process's frames in seq order, as the daemon's own values. SendGone
// says the session no longer follows a process that has not exited for
// it (process.gone). A sink that also has DeliverInline() bool, returning
// true, is handed frames on the goroutine that read them from the child.
type LocalSink = interface {
	SendFrames(id string, quotedID []byte, frames []wire.Frame) error
	SendGone(quotedID []byte, g wire.Gone) error
}

// LocalSession is one session on a LocalServer. Call runs a method, the
// caller trusted (no auth), and returns its result as the JSON a socket
// client would receive, or a *wire.Error; files are passed with the
// request as a Unix socket passes them (process.spawn's mirror names
// them), and the session owns them from the call on. Close ends the
// session's subscriptions; its processes keep running.
type LocalSession = interface {
	Call(ctx context.Context, method string, params json.RawMessage, files []*os.File) (json.RawMessage, error)
	Close()
}

// Embedded returns a client for an in-process daemon. It never reconnects:
// there is nothing in between to break.
func Embedded(srv LocalServer) *Client {
	c := newClient(Options{ReconnectTimeout: -1})
	c.local = true
	c.dial = func(_ context.Context, recv receiver) (link, error) { return newLocalLink(srv, recv), nil }
	l, _ := c.dial(context.Background(), c)
	c.cur = l
	c.connected = true
	close(c.ready)
	return c
}

// localLink calls an in-process daemon directly: no encoding, no auth, and
// frames arrive as the daemon's own values.
type localLink struct {
	sess LocalSession
	recv receiver
	ctx  context.Context
	stop context.CancelFunc

	mu     sync.Mutex // orders send's wg.Add before close's wg.Wait
	closed bool
	wg     sync.WaitGroup
}

func newLocalLink(srv LocalServer, recv receiver) *localLink {
	ctx, stop := context.WithCancel(context.Background())
	l := &localLink{recv: recv, ctx: ctx, stop: stop}
	l.sess = srv.Local(l)
	return l
}

func (l *localLink) send(id uint64, method string, params json.RawMessage) error {
	return l.call(id, method, params, nil)
}

func (l *localLink) passesFiles() bool { return true }

// sendFiles passes duplicates of files with the call: the daemon closes
// what it gets, as it closes the copies a socket delivers.
func (l *localLink) sendFiles(id uint64, method string, params json.RawMessage, files []*os.File) error {
	dups := make([]*os.File, 0, len(files))
	for _, f := range files {
		d, err := dupFile(f)
		if err != nil {
			closeAll(dups)
			return fmt.Errorf("%s: pass %s: %w", method, f.Name(), err)
		}
		dups = append(dups, d)
	}
	if err := l.call(id, method, params, dups); err != nil {
		closeAll(dups) // the call never reached the daemon
		return err
	}
	return nil
}

// call runs one request on the session, on a goroutine of its own, but a
// spawn on the caller's: its caller waits for the answer at once
// (Client.spawnCall), and the daemon answers as soon as the child is
// started, so a goroutine of its own added a start and a hand-back to
// every spawn (and woke the idle CPU for each). The daemon's waits in a
// spawn are short: a spawn of the same id under way, or the delivery of the
// frames of the process it replaces. (Tried once before and undone: a
// durable run's spawns then ran on goroutines the recipe's builtins started
// per call, whose stacks the fork's deep frames grew anew each time; they
// now run on the run's workers, which keep their stacks: runtime.Workers.)
func (l *localLink) call(id uint64, method string, params json.RawMessage, files []*os.File) error {
	l.mu.Lock()
	if l.closed {
		l.mu.Unlock()
		return net.ErrClosed // a call racing Client.Close: it fails with the client
	}
	l.wg.Add(1)
	l.mu.Unlock()
	if method == "process.spawn" {
		defer l.wg.Done()
		l.run(id, method, params, files)
		return nil
	}
	// A call without files, nearly every one, gets a closure that does not
	// hold them: it is smaller, and allocated once per call.
	if files == nil {
		go func() { defer l.wg.Done(); l.run(id, method, params, nil) }()
	} else {
		go func() { defer l.wg.Done(); l.run(id, method, params, files) }()
	}
	return nil
}

// run makes one call on the session and hands the client its answer.
func (l *localLink) run(id uint64, method string, params json.RawMessage, files []*os.File) {
	res, err := l.sess.Call(l.ctx, method, params, files)
	l.recv.response(l, id, res, err)
}

// SendFrames implements LocalSink.
func (l *localLink) SendFrames(id string, _ []byte, frames []wire.Frame) error {
	l.recv.frames(l, id, frames)
	return nil
}

// DeliverInline asks for inline delivery (see LocalSink): frames are
// handed to the client on the goroutine that read them from the child,
// saving a goroutine hand-over per batch. Handlers return promptly, or
// block only as writing to a pipe would.
func (l *localLink) DeliverInline() bool { return true }

// SendGone implements LocalSink.
func (l *localLink) SendGone(_ []byte, g wire.Gone) error {
	l.recv.gone(l, g)
	return nil
}

func (l *localLink) close() {
	l.mu.Lock()
	l.closed = true
	l.mu.Unlock()
	l.stop()
	l.sess.Close()
	l.wg.Wait()
}
