package main

import (
	"errors"
	"io"
	"os"
	"sync"
	"syscall"

	"golang.org/x/sys/unix"
)

// watchReader returns a writer for w that calls gone, once, when w's
// reader has gone away (EPIPE: `sous run ... | head`), so the run can stop
// its processes and exit 141 as a shell's command would.
//
// Go kills a program outright (SIGPIPE) when a write to its own fd 1 or 2
// finds the pipe closed, before the writer ever sees an error: `sous run`
// died that way, and its embedded daemon's grandchildren ran on. A
// duplicate of the descriptor reports EPIPE instead. The duplicate is
// close-on-exec: children get the original, as before.
func watchReader(w io.Writer, gone func()) io.Writer {
	f, ok := w.(*os.File)
	if !ok || (f.Fd() != 1 && f.Fd() != 2) {
		return w
	}
	fd, err := unix.FcntlInt(f.Fd(), unix.F_DUPFD_CLOEXEC, 3)
	if err != nil {
		return w // as before: the signal ends sous
	}
	return &goneWriter{w: os.NewFile(uintptr(fd), f.Name()), gone: gone}
}

type goneWriter struct {
	w    *os.File
	gone func()
	once sync.Once
}

func (g *goneWriter) Write(p []byte) (int, error) {
	n, err := g.w.Write(p)
	if errors.Is(err, syscall.EPIPE) {
		g.once.Do(g.gone)
	}
	return n, err
}
