package daemon

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"syscall"
	"time"

	"golang.org/x/sys/unix"

	"github.com/seed5ad92d46/sous/daemon/proc"
	"github.com/seed5ad92d46/sous/daemon/wire"
	"github.com/seed5ad92d46/sous/internal/iovec"
)

// The bridge's descriptors (extension connection.stdio, docs/PROTOCOL.md
// §6.26). Over ssh, every byte the daemon sends went daemon → socket →
// bridge → sshd's pipe: the bridge read each byte and wrote it again, a
// copy and two wake-ups that a raw `ssh host cmd` does not pay. A bridge
// that passes its stdin and stdout (sshd's pipes) with the first request of
// its connection has the daemon read the requests from the one and write
// everything to the other itself; the bridge then only waits, and the
// socket only says whether it is still there.
//
// The request carries no token: it runs no command and reads nothing, it
// only changes where this connection's bytes come from and go, and every
// request read through the passed descriptors is checked as on the socket.
// Whoever can connect to the socket could relay those bytes itself. So it
// is looked at before the contract's checks, and only as the very first
// line of a Unix-socket connection, alone on the socket (nothing sent after
// it before its answer).

// stdioIO is a connection's passed descriptors once adopted: requests come
// from in, everything is written to out. Both are non-blocking, so that
// closing them wakes a reader or writer waiting on them.
type stdioIO struct {
	in, out *os.File
	outRaw  syscall.RawConn
	// napOnFull: out is a pipe of stdioPipeSize (writev).
	napOnFull bool
}

// adoptStdio looks at a connection's first line: when it is
// connection.stdio, it answers it and, if the descriptors passed with it
// fit, moves the connection onto them. handled reports whether the line was
// that request (answered, adopted or not: the caller goes on to the next
// line).
func (c *conn) adoptStdio(line []byte, files []*os.File) (handled bool) {
	st, ok := c.t.(*streamTransport)
	if !ok || st.fd == nil || len(line) > maxInlineLine || !bytes.Contains(line, []byte(wire.StdioMethod)) ||
		!c.s.enabled(wire.FeatureConnectionStdio) {
		return false
	}
	req, err := decodeRequest(line)
	if err != nil || req.Method != wire.StdioMethod {
		return false
	}
	sio, err := stdioOf(files, st.lr.start == st.lr.end)
	if err != nil {
		closeFiles(files)
		c.writeResponse(req.ID, nil, toWireError(err))
		return true
	}
	// The answer goes on the socket, the last thing written there: the
	// bridge reads it to know which way the bytes go from now on.
	c.writeResponse(req.ID, []byte(`{}`), nil)
	st.adopt(sio)
	c.s.log.Info("connection", "state", "stdio", "transport", st.kind())
	return true
}

// connectionStdioLate answers connection.stdio anywhere but where it
// works (adoptStdio): a line after the connection's first.
func connectionStdioLate(_ context.Context, se *Session, _ json.RawMessage) (any, func(), error) {
	if !se.s.enabled(wire.FeatureConnectionStdio) {
		return nil, nil, wire.Errorf(wire.CodeMethodNotFound, "Unknown method: %s", wire.StdioMethod)
	}
	return nil, nil, wire.InvalidParams("connection.stdio: only as the first request of a Unix-socket connection, with two descriptors passed")
}

// stdioOf checks the descriptors passed with connection.stdio (exactly
// two: a pipe or socket to read, one to write) and makes them pollable.
// alone says the request was all the socket had sent.
func stdioOf(files []*os.File, alone bool) (*stdioIO, error) {
	if !alone {
		return nil, wire.InvalidParams("connection.stdio: nothing may follow the request before its answer")
	}
	if len(files) != 2 {
		return nil, wire.InvalidParams(fmt.Sprintf("connection.stdio: %d descriptors passed with the request; want 2, to read and to write "+
			"(they travel as SCM_RIGHTS over a Unix socket)", len(files)))
	}
	for i, wrong := range []int{unix.O_WRONLY, unix.O_RDONLY} {
		if !streamFile(files[i], wrong) {
			return nil, wire.InvalidParams(fmt.Sprintf("connection.stdio: descriptor %d is not a pipe or socket open for %s",
				i, [...]string{"reading", "writing"}[i]))
		}
	}
	in, err := pollable(files[0])
	if err != nil {
		return nil, err
	}
	out, err := pollable(files[1])
	if err != nil {
		in.Close()
		return nil, err
	}
	closeFiles(files)
	raw, err := out.SyscallConn()
	if err != nil {
		in.Close()
		out.Close()
		return nil, wire.Internal(err)
	}
	// A pipe of stdioPipeSize lets the writer nap when it is full (see
	// writev). Best effort: the kernel refuses users over their share
	// (fs.pipe-user-pages-soft), and a socket has no such size.
	nap := false
	_ = raw.Control(func(fd uintptr) {
		got, err := unix.FcntlInt(fd, unix.F_SETPIPE_SZ, stdioPipeSize)
		nap = err == nil && got >= stdioPipeSize
	})
	return &stdioIO{in: in, out: out, outRaw: raw, napOnFull: nap}, nil
}

// stdioPipeSize is what the passed output pipe is raised to, and fullNap
// how long a writer that found it full waits before trying again: sshd
// drains a few hundred MB/s here, so a full pipe still holds several
// milliseconds of work when the nap ends, and the writer wakes once a
// millisecond instead of each time sshd takes 32 KiB from a full pipe
// (which the poller would wake it for: a goroutine's wake-up for every
// 32 KiB, on two CPUs that ssh, sshd and the child keep busy).
const (
	stdioPipeSize = 1 << 20
	fullNap       = time.Millisecond
)

// streamFile reports whether f is a pipe or socket not open with the
// access mode wrongMode.
func streamFile(f *os.File, wrongMode int) bool {
	rc, err := f.SyscallConn()
	if err != nil {
		return false
	}
	ok := false
	_ = rc.Control(func(fd uintptr) {
		var st unix.Stat_t
		if unix.Fstat(int(fd), &st) != nil {
			return
		}
		if t := st.Mode & unix.S_IFMT; t != unix.S_IFIFO && t != unix.S_IFSOCK {
			return
		}
		flags, err := unix.FcntlInt(fd, unix.F_GETFL, 0)
		ok = err == nil && flags&unix.O_ACCMODE != wrongMode
	})
	return ok
}

// pollable is proc.PollableDup with the protocol's error.
func pollable(f *os.File) (*os.File, error) {
	d, err := proc.PollableDup(f)
	if err != nil {
		return nil, wire.Internal(fmt.Errorf("connection.stdio: %w", err))
	}
	return d, nil
}

// adopt moves the transport onto sio: the line reader reads io.in, writes go
// to io.out, and the socket is watched for the bridge's end. Called by the
// connection's reader before it hands out any request, so nothing writes
// concurrently; close may run concurrently, hence mu.
func (t *streamTransport) adopt(sio *stdioIO) {
	t.mu.Lock()
	if t.closed {
		t.mu.Unlock()
		sio.close()
		return
	}
	t.stdio = sio
	t.mu.Unlock()
	t.fd.closeAll()
	t.fd = nil // nothing is passed through a pipe
	t.lr.r = sio.in
	go t.watchBridge()
}

// watchBridge ends the connection when the socket says anything more: the
// bridge's end (it exited, was killed, or its ssh session went) or bytes it
// must not send. The bridge is what sshd waits for, so the connection lives
// no longer than it, as with a relaying bridge.
func (t *streamTransport) watchBridge() {
	var b [1]byte
	_, err := t.nc.Read(b[:])
	if err == nil {
		err = errors.New("bytes on the socket of a connection moved to the bridge's descriptors")
	}
	t.close(err)
}

func (sio *stdioIO) close() {
	sio.in.Close()
	sio.out.Close()
}

// write writes b whole to the passed output.
func (sio *stdioIO) write(b []byte) error { return sio.writev([][]byte{b}) }

// writev writes parts whole, in as few writev calls as the pipe takes.
// It consumes parts. On a full pipe it naps (napOnFull) or waits on the
// poller for room.
func (sio *stdioIO) writev(parts [][]byte) error {
	for {
		var werr error
		full := false
		err := sio.outRaw.Write(func(fd uintptr) bool {
			for len(parts) > 0 {
				n, err := unix.Writev(int(fd), parts[:min(len(parts), iovec.Max)])
				switch {
				case err == unix.EAGAIN:
					if sio.napOnFull {
						full = true
						return true
					}
					return false // wait for room
				case err == unix.EINTR:
					continue
				case err != nil:
					werr = err
					return true
				}
				parts = iovec.Consumed(parts, n)
			}
			return true
		})
		if werr != nil {
			return werr
		}
		if err != nil || !full {
			return err
		}
		time.Sleep(fullNap)
	}
}

// peerClosed reports whether whoever reads the passed output is gone (ssh's
// session ended: POLLERR on a pipe's writing end) or the bridge is.
func (sio *stdioIO) peerClosed() bool {
	closed := true
	_ = sio.outRaw.Control(func(fd uintptr) {
		fds := []unix.PollFd{{Fd: int32(fd), Events: unix.POLLOUT}}
		n, err := unix.Poll(fds, 0)
		closed = err == nil && n > 0 && fds[0].Revents&(unix.POLLHUP|unix.POLLERR|unix.POLLNVAL) != 0
	})
	return closed
}
