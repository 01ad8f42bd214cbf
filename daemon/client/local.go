package client

import (
	"context"
	"encoding/json"
	"fmt"
	"net"
	"os"
	"sync"

	"github.com/seed5ad92d46/sous/daemon"
	"github.com/seed5ad92d46/sous/daemon/wire"
)

// Embedded returns a client for an in-process daemon. It never reconnects:
// there is nothing in between to break.
func Embedded(srv *daemon.Server) *Client {
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
	sess *daemon.Session
	recv receiver
	ctx  context.Context
	stop context.CancelFunc

	mu     sync.Mutex // orders send's wg.Add before close's wg.Wait
	closed bool
	wg     sync.WaitGroup
}

func newLocalLink(srv *daemon.Server, recv receiver) *localLink {
	ctx, stop := context.WithCancel(context.Background())
	l := &localLink{recv: recv, ctx: ctx, stop: stop}
	l.sess = srv.Local(l)
	return l
}

func (l *localLink) send(id uint64, method string, params json.RawMessage) error {
	return l.call(l.ctx, id, method, params)
}

func (l *localLink) passesFiles() bool { return true }

// sendFiles passes duplicates of files in the call's context
// (daemon.WithFiles): the daemon closes what it gets, as it closes the
// copies a socket delivers.
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
	if err := l.call(daemon.WithFiles(l.ctx, dups...), id, method, params); err != nil {
		closeAll(dups) // the call never reached the daemon
		return err
	}
	return nil
}

// call runs one request on the session, on a goroutine of its own.
func (l *localLink) call(ctx context.Context, id uint64, method string, params json.RawMessage) error {
	l.mu.Lock()
	if l.closed {
		l.mu.Unlock()
		return net.ErrClosed // a call racing Client.Close: it fails with the client
	}
	l.wg.Add(1)
	l.mu.Unlock()
	go func() {
		defer l.wg.Done()
		res, err := l.sess.Call(ctx, method, params)
		l.recv.response(l, id, res, err)
	}()
	return nil
}

// SendFrames implements daemon.FrameSink.
func (l *localLink) SendFrames(id string, _ []byte, frames []wire.Frame) error {
	l.recv.frames(l, id, frames)
	return nil
}

// DeliverInline implements daemon.InlineSink: frames are handed to the
// client on the goroutine that read them from the child, saving a
// goroutine hand-over per batch. Handlers return promptly, or block only
// as writing to a pipe would.
func (l *localLink) DeliverInline() bool { return true }

// SendGone implements daemon.FrameSink.
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
