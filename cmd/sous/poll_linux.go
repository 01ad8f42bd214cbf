// The pipe plumbing of exec and attach: Linux's F_SETPIPE_SZ, and poll(2)
// on the write ends of sous's stdout and stderr to learn that their reader
// went away.

package main

import (
	"io"
	"os"

	"github.com/seed5ad92d46/sous/daemon/mirror"
	"golang.org/x/sys/unix"
)

// outPipeSize is what sous exec grows its stdout to when that is a pipe: the
// consumer then drains in large steps instead of taking turns with sous
// every 64 KiB (which costs both a sleep and a wake-up per step).
const outPipeSize = 1 << 20

// growPipe enlarges w's pipe, if w is one; failing (the user's pipe budget)
// keeps the size it had.
func growPipe(w io.Writer) {
	f := outputFile(w, false)
	if f == nil {
		return
	}
	if rc, err := f.SyscallConn(); err == nil {
		_ = rc.Control(func(fd uintptr) { _, _ = unix.FcntlInt(fd, unix.F_SETPIPE_SZ, outPipeSize) })
	}
}

// watchReaders stands in for the failed writes that tell frame the reader
// of sous's stdout or stderr went away, for output the command writes
// itself (Mirror.Direct): it waits for either pipe to lose its reader and
// closes broken or brokenErr, so that follow treats the command as it
// would have. stop ends the watch.
func (w *streamWriter) watchReaders(stdout, stderr *os.File) (stop func()) {
	var wake [2]int
	if unix.Pipe2(wake[:], unix.O_CLOEXEC) != nil {
		return func() {} // the command still gets SIGPIPE from the kernel itself
	}
	w.watched = [2]*os.File{stdout, stderr}
	done := make(chan struct{})
	go func() {
		defer close(done)
		defer unix.Close(wake[0])
		fds := []unix.PollFd{{Fd: int32(wake[0]), Events: unix.POLLIN}}
		marks := []func(){nil}
		for i, f := range w.watched {
			if f == nil || !mirror.IsPipe(f) {
				continue
			}
			// Events 0: a write end reports only POLLERR, once its
			// reader is gone.
			fds = append(fds, unix.PollFd{Fd: rawFd(f), Events: 0})
			if i == 0 {
				marks = append(marks, func() { w.brokenOnce.Do(func() { close(w.broken) }) })
			} else {
				marks = append(marks, func() { w.brokenErrOnce.Do(func() { close(w.brokenErr) }) })
			}
		}
		for len(fds) > 1 {
			if _, err := unix.Poll(fds, -1); err != nil && err != unix.EINTR {
				return
			}
			if fds[0].Revents != 0 {
				return
			}
			for i := len(fds) - 1; i > 0; i-- {
				if fds[i].Revents&(unix.POLLERR|unix.POLLHUP) != 0 {
					marks[i]()
					fds = append(fds[:i], fds[i+1:]...)
					marks = append(marks[:i], marks[i+1:]...)
				}
			}
		}
	}()
	return func() {
		unix.Write(wake[1], []byte{0})
		<-done
		unix.Close(wake[1])
	}
}

// readerGone reports whether the reader of a pipe the command wrote to
// itself (watchReaders) is gone.
func (w *streamWriter) readerGone() bool {
	for _, f := range w.watched {
		if f == nil || !mirror.IsPipe(f) {
			continue
		}
		fds := []unix.PollFd{{Fd: rawFd(f), Events: 0}}
		if n, err := unix.Poll(fds, 0); err == nil && n > 0 && fds[0].Revents&unix.POLLERR != 0 {
			return true
		}
	}
	return false
}

// rawFd is f's descriptor, without Fd's side effect of making it blocking
// (the description is the command's too). f stays open while it is used.
func rawFd(f *os.File) int32 {
	fd := int32(-1)
	if rc, err := f.SyscallConn(); err == nil {
		_ = rc.Control(func(d uintptr) { fd = int32(d) })
	}
	return fd
}
