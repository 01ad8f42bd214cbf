package main

import (
	"os"
	"testing"
	"time"
)

// For output the command writes itself (Mirror.Direct), sous learns that
// its reader went away from the pipe, not from a failed write: watchReaders
// closes broken or brokenErr as a failed write would, and readerGone says
// so to follow, which turns a command the kernel's SIGPIPE killed first
// into exit 141 rather than 255.
func TestWatchReaders(t *testing.T) {
	for _, stream := range []string{"stdout", "stderr"} {
		t.Run(stream, func(t *testing.T) {
			r, w, err := os.Pipe()
			if err != nil {
				t.Fatal(err)
			}
			defer w.Close()
			sw, stopSigpipe := newStreamWriter(&IO{In: os.Stdin, Out: w, ErrOut: w})
			defer stopSigpipe()
			watched, other := sw.broken, sw.brokenErr
			stdout, stderr := w, (*os.File)(nil)
			if stream == "stderr" {
				watched, other = sw.brokenErr, sw.broken
				stdout, stderr = nil, w
			}
			stop := sw.watchReaders(stdout, stderr)
			defer stop()
			if sw.readerGone() {
				t.Fatal("readerGone with the reader still there")
			}
			select {
			case <-watched:
				t.Fatal("broken closed with the reader still there")
			case <-time.After(50 * time.Millisecond):
			}
			r.Close()
			select {
			case <-watched:
			case <-time.After(5 * time.Second):
				t.Fatal("the reader went away and nothing closed broken")
			}
			if !sw.readerGone() {
				t.Error("readerGone false after the reader went away")
			}
			select {
			case <-other:
				t.Error("the other stream was marked broken too")
			default:
			}
		})
	}
	// stop ends a watch whose readers never go.
	r, w, err := os.Pipe()
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	defer w.Close()
	sw, stopSigpipe := newStreamWriter(&IO{In: os.Stdin, Out: w, ErrOut: w})
	defer stopSigpipe()
	stopped := make(chan struct{})
	go func() { sw.watchReaders(w, w)(); close(stopped) }()
	select {
	case <-stopped:
	case <-time.After(5 * time.Second):
		t.Fatal("stop did not end the watch")
	}
}
