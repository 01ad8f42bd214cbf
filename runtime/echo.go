package runtime

import (
	"bytes"
	"encoding/base64"
	"unicode/utf8"

	"github.com/seed5ad92d46/sous/daemon/wire"
)

// maxPartialLine is how much of a line without a newline the echo holds
// before it writes it anyway: a child printing a progress bar or one huge
// line must not grow sous without bound, and echo never drops output.
const maxPartialLine = 64 << 10

// echo is the live echo of one process. Its Write runs on the client's
// frame reader goroutine; it holds the output's mutex only to format and
// write what it was given.
type echo struct {
	o       *output
	id      string
	partial [2][]byte // stdout, stderr: bytes after the last newline
	midLine [2]bool   // a partial line was written already: no prefix before the rest
	closed  bool
}

func streamSlot(s wire.Stream) int {
	if s == wire.Stderr {
		return 1
	}
	return 0
}

// Write implements Echo: complete lines go out at once, in one
// write per chunk, the rest waits for its newline.
func (e *echo) Write(stream wire.Stream, data []byte) {
	o := e.o
	o.mu.Lock()
	defer o.mu.Unlock()
	if e.closed || o.closed {
		return
	}
	i := streamSlot(stream)
	buf := append(e.partial[i], data...)
	o.buf = o.buf[:0]
	for {
		n := bytes.IndexByte(buf, '\n')
		if n < 0 {
			break
		}
		o.buf = e.appendLine(o.buf, stream, buf[:n+1])
		e.midLine[i] = false
		buf = buf[n+1:]
	}
	if len(buf) > maxPartialLine {
		cut := runeBoundary(buf)
		o.buf = e.appendLine(o.buf, stream, buf[:cut])
		e.midLine[i] = true
		buf = buf[cut:]
	}
	e.partial[i] = append(e.partial[i][:0], buf...)
	e.flush(stream)
}

// Close implements Echo: a last line without a newline goes out
// (with one added in human mode, so the next line starts on its own).
func (e *echo) Close() {
	o := e.o
	o.mu.Lock()
	defer o.mu.Unlock()
	if e.closed {
		return
	}
	e.closed = true
	o.echoing--
	if o.closed {
		return
	}
	for i, stream := range []wire.Stream{wire.Stdout, wire.Stderr} {
		if len(e.partial[i]) == 0 && !e.midLine[i] {
			continue
		}
		o.buf = o.buf[:0]
		line := e.partial[i]
		if !o.json {
			line = append(line, '\n')
		}
		if len(line) > 0 {
			o.buf = e.appendLine(o.buf, stream, line)
		}
		e.partial[i] = nil
		e.flush(stream)
	}
}

// appendLine formats one line (or a piece of one) for the runner: an
// output event in --json mode, else the bytes, prefixed with "[id] " at
// the start of a line once more than one process echoed at a time (see
// output.prefixed).
func (e *echo) appendLine(b []byte, stream wire.Stream, line []byte) []byte {
	o := e.o
	if o.json {
		fields := []field{{"id", e.id}, {"stream", stream.String()}, {"data", string(line)}}
		if !utf8.Valid(line) {
			// data, a JSON string, cannot hold these bytes: base64 keeps
			// them exactly for whoever needs them.
			fields = append(fields, field{"base64", base64.StdEncoding.EncodeToString(line)})
		}
		return o.appendEvent(b, "output", fields...)
	}
	if o.prefixed && !e.midLine[streamSlot(stream)] {
		b = append(b, '[')
		b = append(b, e.id...)
		b = append(b, "] "...)
	}
	return append(b, line...)
}

// flush writes what appendLine gathered in o.buf.
func (e *echo) flush(stream wire.Stream) {
	o := e.o
	if len(o.buf) == 0 {
		return
	}
	w := o.stdout
	if stream == wire.Stderr && !o.json {
		w = o.stderr
	}
	w.Write(o.buf)
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
