package builtins

import (
	"bytes"
	"testing"
)

// FuzzCaptureLines feeds an output stream to a capture in random frame
// sizes, starts a Process.lines() reader after a random number of frames and
// pops lines between frames. The reader must see exactly the lines of the
// whole stream, in order, each once (the first ones replayed from the
// capture, the rest live), and the capture must keep exactly the first
// limit bytes; a reader started after bytes were dropped must refuse to
// start rather than begin mid-stream.
func FuzzCaptureLines(f *testing.F) {
	f.Add([]byte("one\ntwo\r\nthree"), []byte{2, 5, 1}, uint16(64), byte(1))
	f.Add([]byte("\n\n\r\nx\n"), []byte{1}, uint16(3), byte(0))
	f.Add([]byte("h\xc3\xa9llo\nw\xf0\x9f\x98\x80\n"), []byte{1, 2}, uint16(5), byte(2))
	f.Fuzz(func(t *testing.T, stream, cuts []byte, limit uint16, startAfter byte) {
		c := &capture{limit: int(limit)}
		var r *lineReader
		var got []string
		pop := func() {
			for {
				line, ok, done := r.next()
				if done || !ok {
					return
				}
				got = append(got, line)
			}
		}
		start := func(fed int) bool {
			r = c.reader("test", LinesLimits{})
			if r != nil {
				r.bound = int(startAfter%16) + 1 // the rest goes through the spill file
			}
			if r == nil {
				if fed <= int(limit) {
					t.Fatalf("reader refused after %d bytes with a %d-byte limit", fed, limit)
				}
				return false
			}
			return true
		}
		fed, frames := 0, 0
		rest := stream
		for i := 0; len(rest) > 0; i++ {
			if r == nil && frames == int(startAfter) && !start(fed) {
				return
			}
			n := len(rest)
			if len(cuts) > 0 {
				n = min(n, max(1, int(cuts[i%len(cuts)])))
			}
			frame := bytes.Clone(rest[:n])
			c.add(frame)
			clear(frame) // the capture must have copied what it keeps
			fed += n
			frames++
			rest = rest[n:]
			if r != nil {
				pop()
			}
		}
		if r == nil && !start(fed) {
			return
		}
		c.end()
		pop()
		if _, ok, done := r.next(); ok || !done {
			t.Fatal("the reader is not done after the end")
		}

		want := captureModel(stream)
		if len(got) != len(want) {
			t.Fatalf("%d lines, want %d\n got %q\nwant %q", len(got), len(want), got, want)
		}
		for i := range want {
			if got[i] != want[i] {
				t.Fatalf("line %d = %q, want %q", i, got[i], want[i])
			}
		}
		keep := stream[:min(len(stream), int(limit))]
		if !bytes.Equal(c.buf, keep) || c.total != int64(len(stream)) || c.truncated() != (len(stream) > int(limit)) {
			t.Fatalf("capture kept %q (total %d, truncated %v), want %q of %d", c.buf, c.total, c.truncated(), keep, len(stream))
		}
	})
}

// captureModel: every "\n"-terminated line without it and one "\r" before
// it (blank lines included), then an unterminated tail as is.
func captureModel(stream []byte) []string {
	parts := bytes.Split(stream, []byte("\n"))
	var out []string
	for _, p := range parts[:len(parts)-1] {
		out = append(out, string(bytes.TrimSuffix(p, []byte("\r"))))
	}
	if tail := parts[len(parts)-1]; len(tail) > 0 {
		out = append(out, string(tail))
	}
	return out
}
