package runtime

import (
	"bytes"
	"unicode/utf8"

	"github.com/seed5ad92d46/sous/daemon/wire"
	"github.com/seed5ad92d46/sous/runtime/event"
)

// maxPartialLine is how much of a line without a newline the echo holds
// before it writes it anyway: a child printing a progress bar or one huge
// line must not grow sous without bound, and echo never drops output.
const maxPartialLine = 64 << 10

// echo is the live echo of one process: it cuts the process's output into
// whole lines and publishes them, many lines to an event. Its Write runs
// on the client's frame reader goroutine and is the hot path of a run
// that echoes a lot: it reuses one event and one buffer, so a chunk costs
// no allocation.
type echo struct {
	bus     *event.Bus
	id      string
	partial [2][]byte // stdout, stderr: bytes after the last newline
	midLine [2]bool   // a piece of the partial line went out already
	closed  bool
	ev      event.Output // handed to every sink for every chunk
	joined  []byte       // a held partial line and the chunk that ends it
}

func streamSlot(s wire.Stream) int {
	if s == wire.Stderr {
		return 1
	}
	return 0
}

// Write implements Echo: complete lines go out at once, in one event per
// chunk; the rest waits for its newline.
func (e *echo) Write(stream wire.Stream, data []byte) {
	e.bus.Lock()
	defer e.bus.Unlock()
	if e.closed || e.bus.Ended() {
		return
	}
	i := streamSlot(stream)
	if n := bytes.LastIndexByte(data, '\n'); n >= 0 {
		lines := data[:n+1]
		if len(e.partial[i]) > 0 {
			e.joined = append(append(e.joined[:0], e.partial[i]...), lines...)
			lines = e.joined
			e.partial[i] = e.partial[i][:0]
		}
		e.publish(stream, lines, false)
		e.midLine[i] = false
		data = data[n+1:]
	}
	e.partial[i] = append(e.partial[i], data...)
	if len(e.partial[i]) > maxPartialLine {
		cut := runeBoundary(e.partial[i])
		e.publish(stream, e.partial[i][:cut], false)
		e.midLine[i] = true
		e.partial[i] = append(e.partial[i][:0], e.partial[i][cut:]...)
	}
}

// publish hands one piece of output to the sinks (lock held).
func (e *echo) publish(stream wire.Stream, data []byte, last bool) {
	e.ev.Stream, e.ev.Data, e.ev.MidLine, e.ev.Last = stream, data, e.midLine[streamSlot(stream)], last
	e.bus.PublishLocked(&e.ev)
	e.ev.Data = nil
}

// Close implements Echo: a last line without a newline goes out (the
// human output ends it with one, so the next line starts on its own).
func (e *echo) Close() {
	e.bus.Lock()
	defer e.bus.Unlock()
	if e.closed {
		return
	}
	e.closed = true
	for i, stream := range []wire.Stream{wire.Stdout, wire.Stderr} {
		if len(e.partial[i]) == 0 && !e.midLine[i] {
			continue
		}
		e.publish(stream, e.partial[i], true)
		e.partial[i] = nil
	}
	// After the last lines: the bus lets out, at EchoEnd, what it held
	// back of the streams that had none (the start of a secret).
	e.bus.PublishLocked(&event.EchoEnd{ID: e.id})
}

// runeBoundary returns where to cut b so that an incomplete UTF-8
// sequence at its end stays for the next write, so text stays text. Bytes
// that are not UTF-8 at all are cut anywhere.
func runeBoundary(b []byte) int {
	start := len(b) - 1
	for start > 0 && len(b)-start < utf8.UTFMax && !utf8.RuneStart(b[start]) {
		start--
	}
	if start > 0 && !utf8.FullRune(b[start:]) {
		return start
	}
	return len(b)
}
