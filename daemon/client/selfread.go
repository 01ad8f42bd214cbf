package client

import (
	"context"
	"errors"
	"io"
	"os"
	"time"

	"golang.org/x/sys/unix"
)

// ensureReader makes sure someone reads: a parked reader goroutine gets the
// role back. Called with rmu held.
func (l *streamLink) ensureReader() {
	if l.parked && !l.reading {
		l.reading, l.parked = true, false
		l.readerWakes.Add(1)
		l.wake <- struct{}{}
	}
}

// wakeReader makes sure the reader goroutine reads: for a call sent on
// behalf of a caller already waiting (a resend after a reconnect).
func (l *streamLink) wakeReader() {
	l.rmu.Lock()
	l.ensureReader()
	l.rmu.Unlock()
}

// readUntil waits for done, reading the stream on the caller's goroutine
// while nobody else does and the client follows no process (whose frame
// handlers then run on this goroutine, as on the reader's) but spawning,
// whose frames come after the answer; otherwise it
// makes sure the reader goroutine reads, and returns for the caller to wait
// as usual. It also returns, handing the reading on, once ctx ends. When it
// returns, done may still be open.
//
// A spawn's caller reads its own answer so: when the reader goroutine read
// it, the answer cost a wake-up of that goroutine and another of the
// caller, on the path of every spawn.
func (l *streamLink) readUntil(ctx context.Context, done <-chan struct{}, spawning *Proc) {
	if l.hints == nil {
		return
	}
	l.rmu.Lock()
	if l.reading || l.ended || !l.hints.quiet(spawning) {
		l.ensureReader()
		l.rmu.Unlock()
		return
	}
	l.reading = true
	l.rmu.Unlock()

	// A read cannot watch ctx: a deadline in the past interrupts it.
	var interrupted chan struct{}
	stop := func() bool { return true }
	if ctx.Done() != nil {
		interrupted = make(chan struct{})
		stop = context.AfterFunc(ctx, func() {
			l.uc.SetReadDeadline(time.Unix(1, 0))
			close(interrupted)
		})
	}
	var err error
	// Deferred, so that a frame handler that panics on this goroutine (one
	// dispatched after another goroutine started following a process), and
	// is recovered up the stack, still leaves the reading to someone and no
	// deadline on the socket.
	defer func() {
		if !stop() {
			<-interrupted
			l.uc.SetReadDeadline(time.Time{})
			if errors.Is(err, os.ErrDeadlineExceeded) {
				err = nil // ctx ended, not the link
			}
		}
		l.rmu.Lock()
		if err != nil {
			l.fail(err)
			return
		}
		l.release()
		l.rmu.Unlock()
	}()
	for {
		select {
		case <-done:
			l.selfReads.Add(1)
			return
		default:
		}
		if !l.hints.quiet(spawning) {
			return // a process to follow now: the reader goroutine's job
		}
		if err = l.step(); err != nil {
			return
		}
	}
}

// release gives up the reading role a caller held. Someone must read on when
// anything is expected, or to the failure that ends a closed link and its
// parked reader goroutine. Frames of a process spawned without a handler
// that nobody asked after yet are not expected (readerHints.unwatched):
// the spawn's caller goes on to Wait, which reads them itself, and waking
// the reader goroutine here cost a wake-up of it on every spawn, and
// another of the caller when it read the exit frame. Called with rmu held.
func (l *streamLink) release() {
	l.reading = false
	if l.closing || !l.hints.unwatched() {
		l.ensureReader()
	}
}

// probe checks, before a call is sent on a link nobody reads, that the
// daemon has not closed it meanwhile: the reader goroutine would have seen
// that at once and reconnected, and a call that cannot be resent must not
// go out on a dead connection when a live one is a dial away. Lines nobody
// expected (answers to calls given up on) may stand before the close, so
// they are read first. It reports false when the link broke (the receiver
// has been told).
func (l *streamLink) probe() bool {
	if l.hints == nil {
		return true
	}
	l.rmu.Lock()
	for {
		if l.reading || l.ended {
			ok := !l.ended
			l.rmu.Unlock()
			return ok
		}
		waiting, err := l.peek()
		if err == nil && !waiting {
			l.rmu.Unlock()
			return true // open, nothing waiting
		}
		l.reading = true
		if err == nil {
			l.rmu.Unlock()
			err = l.drain()
			l.rmu.Lock()
			if err == nil {
				l.release() // to the reader goroutine, if a caller waits meanwhile
				continue    // look again
			}
		}
		l.fail(err)
		return false
	}
}

// peek reports whether bytes wait on the socket, without reading them or
// waiting: io.EOF when the daemon closed it and nothing is left.
func (l *streamLink) peek() (bool, error) {
	rc, err := l.uc.SyscallConn()
	if err != nil {
		return false, err // closed on this side
	}
	var n int
	var perr error
	if err := rc.Control(func(fd uintptr) {
		var b [1]byte
		for {
			n, _, perr = unix.Recvfrom(int(fd), b[:], unix.MSG_PEEK|unix.MSG_DONTWAIT)
			if perr != unix.EINTR {
				return
			}
		}
	}); err != nil {
		return false, err
	}
	switch {
	case perr == unix.EAGAIN:
		return false, nil
	case perr != nil:
		return false, perr
	case n == 0:
		return false, io.EOF
	}
	return true, nil
}

// drainWait bounds how long drain waits for the rest of a line it found
// begun.
const drainWait = 100 * time.Millisecond

// drain reads and dispatches what waits on the socket without waiting for
// more, then returns nil; or the error that ends the link (io.EOF for a
// daemon that closed it). Only the reading role's holder calls it.
func (l *streamLink) drain() error {
	l.uc.SetReadDeadline(time.Now().Add(drainWait))
	defer l.uc.SetReadDeadline(time.Time{})
	for {
		if err := l.step(); err != nil {
			if errors.Is(err, os.ErrDeadlineExceeded) {
				return nil // a line cut short stays in carry for the next reader
			}
			return err
		}
		if l.r.Buffered() > 0 {
			continue
		}
		switch waiting, err := l.peek(); {
		case err != nil:
			return err
		case !waiting:
			return nil
		}
	}
}
