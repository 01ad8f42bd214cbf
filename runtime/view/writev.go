package view

import (
	"errors"
	"io"
	"os"

	"golang.org/x/sys/unix"
)

// vecWriter writes several buffers as one: a single writev(2) when it has
// a file descriptor, so that "erase the area, the lines, the area again"
// reaches the terminal in one write and costs the stream one system call,
// as the lines alone did. Without a descriptor (a test's buffer), they
// are joined for one Write.
type vecWriter struct {
	w      io.Writer
	fd     int     // -1: none
	joined *[]byte // without one, the buffers joined for one Write
}

func newVecWriter(w io.Writer) vecWriter {
	if f, ok := w.(*os.File); ok {
		return vecWriter{w: w, fd: int(f.Fd())}
	}
	return vecWriter{w: w, fd: -1, joined: new([]byte)}
}

// write writes bufs in order, all of them or until an error (which the
// terminal's writer has nothing to do with: a terminal that went away
// ends the run by SIGHUP).
func (v vecWriter) write(bufs [][]byte) {
	if v.fd < 0 {
		b := (*v.joined)[:0]
		for _, p := range bufs {
			b = append(b, p...)
		}
		*v.joined = b
		if len(b) > 0 {
			v.w.Write(b)
		}
		return
	}
	for {
		for len(bufs) > 0 && len(bufs[0]) == 0 {
			bufs = bufs[1:]
		}
		if len(bufs) == 0 {
			return
		}
		n, err := unix.Writev(v.fd, bufs)
		switch {
		case errors.Is(err, unix.EINTR):
			continue
		case errors.Is(err, unix.EAGAIN):
			// Someone set the terminal non-blocking: wait until it
			// takes more.
			fds := []unix.PollFd{{Fd: int32(v.fd), Events: unix.POLLOUT}}
			unix.Poll(fds, -1)
			continue
		case err != nil:
			return
		}
		for n > 0 {
			k := min(n, len(bufs[0]))
			bufs[0] = bufs[0][k:]
			n -= k
			if len(bufs[0]) == 0 {
				bufs = bufs[1:]
			}
		}
	}
}
