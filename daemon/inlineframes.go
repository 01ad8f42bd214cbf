package daemon

import (
	"errors"
	"net"

	"golang.org/x/sys/unix"

	"github.com/seed5ad92d46/sous/daemon/wire"
)

// Frames written inline on a Unix socket.
//
// A socket connection's frames went through a pump goroutine per
// subscription: the goroutine that appended a frame (the child poller on
// an exit, a pipe's reader for output) woke the pump, which wrote it. For
// a spawn of /bin/true that was a goroutine started per spawn and a
// hand-over on its exit, with an idle CPU woken for it. Now the appender
// writes a small batch itself, without waiting: only when the connection's
// writer is free (wmu.TryLock) and the socket takes the bytes at once (a
// write that does not block). Anything else (a big batch, a writer busy, a
// socket full) starts the pump as before, which then carries the
// subscription to its end: the appender never waits on a client, so a slow
// client still holds nothing back but through the log's window, and the
// child poller, shared by every child, is never held up by one connection.

// inlineMax is the largest batch an appender writes itself: an exit frame
// and a few lines of output, not a stream.
const inlineMax = 16 << 10

// tryOutcome is what trySendFrames did with a batch.
type tryOutcome int

const (
	notTried tryOutcome = iota // nothing written: the pump sends the batch
	sentAll                    // written whole
	// sentPart: written in part; wmu is still held, and the pump writes
	// the rest (finishPart) before anything else goes on the connection.
	sentPart
)

// tryWriter is a transport that can write without waiting.
type tryWriter interface {
	// tryWrite writes what it can of b at once and returns how much.
	tryWrite(b []byte) (int, error)
	// canTryWrite reports whether tryWrite works on this transport.
	canTryWrite() bool
}

// canTryWrite implements tryWriter: a Unix socket whose bytes are its own
// (not a connection.stdio one, whose socket is only watched).
func (t *streamTransport) canTryWrite() bool {
	_, ok := t.nc.(*net.UnixConn)
	return ok && t.stdio == nil
}

// tryWrite implements tryWriter: one write(2) that does not wait for room.
func (t *streamTransport) tryWrite(b []byte) (int, error) {
	rc, err := t.nc.(*net.UnixConn).SyscallConn()
	if err != nil {
		return 0, err
	}
	var n int
	var werr error
	if err := rc.Write(func(fd uintptr) bool {
		for {
			n, werr = unix.Write(int(fd), b)
			if werr != unix.EINTR {
				return true // never wait for room: the pump does
			}
		}
	}); err != nil {
		return 0, err
	}
	if n < 0 {
		n = 0
	}
	if errors.Is(werr, unix.EAGAIN) {
		werr = nil
	}
	return n, werr
}

// inlineWriter is c's transport when frames may be written inline to it,
// else nil.
func (c *conn) inlineWriter() tryWriter {
	if tw, ok := c.t.(tryWriter); ok && tw.canTryWrite() {
		return tw
	}
	return nil
}

// trySendFrames writes a small batch of frames without waiting, encoded as
// SendFrames would (with the answers held, first). With sentPart, wmu
// stays held and rest is what the pump must write (finishPart).
func (c *conn) trySendFrames(tw tryWriter, quotedID []byte, frames []wire.Frame) (out tryOutcome, rest []byte, err error) {
	size := 0
	for i := range frames {
		size += len(frames[i].Data)
	}
	if size > inlineMax || !c.wmu.TryLock() {
		return notTried, nil, nil
	}
	bp := c.bufs.Get().(*[]byte)
	defer c.bufs.Put(bp)
	b := append((*bp)[:0], c.held...)
	if c.binary.Load() {
		bt := c.batches.Get().(*frameBatch)
		bt.encode(quotedID, frames)
		for _, part := range bt.stream() {
			b = append(b, part...)
		}
		bt.release()
		c.batches.Put(bt)
	} else {
		for i := range frames {
			b = wire.AppendFrame(b, quotedID, &frames[i])
		}
	}
	*bp = b
	if len(b)-len(c.held) > 2*inlineMax {
		c.wmu.Unlock()
		return notTried, nil, nil // many tiny frames: the pump's
	}
	c.held = c.held[:0]
	if cap(c.held) > 64<<10 {
		c.held = nil
	}
	n, err := tw.tryWrite(b)
	switch {
	case err != nil:
		err = c.wrote(err)
		c.wmu.Unlock()
		return sentAll, nil, err
	case n < len(b):
		return sentPart, append([]byte(nil), b[n:]...), nil
	}
	c.wmu.Unlock()
	return sentAll, nil, nil
}

// finishPart writes the rest of a batch trySendFrames wrote in part, with
// wmu still held from it, and lets wmu go.
func (c *conn) finishPart(rest []byte) error {
	defer c.wmu.Unlock()
	return c.wrote(c.t.write(rest))
}
