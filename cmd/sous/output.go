package main

import (
	"errors"
	"io"
	"os"
	"os/signal"
	"sync"
	"syscall"

	"github.com/seed5ad92d46/sous/daemon/mirror"
	"github.com/seed5ad92d46/sous/daemon/wire"
)

// streamWriter copies a process's frames to stdout and stderr. Frames arrive
// on the client's reader goroutine in seq order; writes block when the
// terminal or pipe is slow, which pushes back all the way to the child.
type streamWriter struct {
	mu     sync.Mutex
	out    io.Writer
	errOut io.Writer
	// broken and brokenErr are closed when a write to out or errOut fails
	// with EPIPE: whoever read sous's stdout or stderr is gone (see follow).
	broken, brokenErr         chan struct{}
	brokenOnce, brokenErrOnce sync.Once
	stopped                   bool        // set by stop: frames still arriving are dropped
	lastSeq                   int64       // the seq of the last frame written (or the daemon wrote: Mirrored)
	watched                   [2]*os.File // stdout and stderr the command writes itself (watchReaders)
}

// newStreamWriter writes a process's output to streams. It asks for SIGPIPE
// (until stop is called) so that a write to a closed stdout returns EPIPE
// instead of killing sous before it can stop the command. After stop, frames
// that still arrive (attach leaves a running process) are dropped, so that
// none is written once SIGPIPE would kill sous again.
func newStreamWriter(streams *IO) (w *streamWriter, stop func()) {
	growPipe(streams.Out)
	sigpipe := make(chan os.Signal, 1)
	signal.Notify(sigpipe, syscall.SIGPIPE)
	w = &streamWriter{out: streams.Out, errOut: streams.ErrOut, broken: make(chan struct{}), brokenErr: make(chan struct{})}
	return w, func() {
		w.mu.Lock()
		w.stopped = true
		w.mu.Unlock()
		signal.Stop(sigpipe)
	}
}

// outputFile returns w if a daemon can take it as a child's output: a pipe
// to tee into, a regular file or the null device to write to itself, or
// with direct a pipe or regular file to be the child's own (see
// mirror.Spec); else nil. A terminal is never passed: the command would
// find a terminal where sous gives it a pipe (use --tty for that).
func outputFile(w io.Writer, direct bool) *os.File {
	f, ok := w.(*os.File)
	switch {
	case !ok:
		return nil
	case direct && mirror.IsPipeOrRegular(f), !direct && (mirror.IsPipe(f) || mirror.IsFileOrNull(f)):
		return f
	}
	return nil
}

// inputFile returns r if it can be a child's stdin as it is (a pipe or a
// regular file: what a daemon takes as process.spawn.mirror's stdin), else
// nil.
func inputFile(r io.Reader) *os.File {
	f, ok := r.(*os.File)
	if !ok || !mirror.IsPipeOrRegular(f) {
		return nil
	}
	return f
}

// stopAt stops writing frames and returns the seq of the last one written:
// replay after it (--from-seq) goes on exactly where this output ends.
func (w *streamWriter) stopAt() int64 {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.stopped = true
	return w.lastSeq
}

func (w *streamWriter) frame(f *wire.Frame) {
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.stopped {
		return
	}
	w.lastSeq = f.Seq
	if f.Mirrored {
		return // the daemon wrote it already (SpawnSpec.Mirror)
	}
	switch f.Stream {
	case wire.Stdout:
		if _, err := w.out.Write(f.Data); errors.Is(err, syscall.EPIPE) {
			w.brokenOnce.Do(func() { close(w.broken) })
		}
	case wire.Stderr:
		if _, err := w.errOut.Write(f.Data); errors.Is(err, syscall.EPIPE) {
			w.brokenErrOnce.Do(func() { close(w.brokenErr) })
		}
	}
}
