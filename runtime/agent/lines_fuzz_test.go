package agent

import (
	"bytes"
	"testing"
)

// FuzzLineSplitter feeds a stream to the frame reassembler in random frame
// sizes (cut anywhere: mid-line, mid-"\r\n", mid-UTF-8 character) and checks
// the lines against a model that splits the whole stream at once: the same
// lines, in order, each once, whatever the framing.
func FuzzLineSplitter(f *testing.F) {
	f.Add([]byte("{\"type\":\"system\"}\n{\"type\":\"result\"}\n"), []byte{3, 1, 7})
	f.Add([]byte("a\r\nb\n\n  \nc"), []byte{1})
	f.Add([]byte("h\xc3\xa9llo \xe2\x82\xac\nw\xf0\x9f\x98\x80rld\n"), []byte{2, 1, 1, 3})
	f.Add([]byte("\n\n\r\n"), []byte{0})
	f.Add([]byte("no newline at all"), []byte{5, 5})
	f.Fuzz(func(t *testing.T, stream, cuts []byte) {
		var ls lineSplitter
		var got [][]byte
		emit := func(line []byte) { got = append(got, line) }
		rest := stream
		for i := 0; len(rest) > 0; i++ {
			n := len(rest)
			if len(cuts) > 0 {
				n = min(len(rest), max(1, int(cuts[i%len(cuts)])))
			}
			frame := bytes.Clone(rest[:n])
			ls.feed(frame, emit)
			// The splitter must not keep the frame's buffer: scribble on it.
			for j := range frame {
				frame[j] = 'X'
			}
			rest = rest[n:]
		}
		last := ls.flush()

		want, wantLast := modelLines(stream)
		if len(got) != len(want) {
			t.Fatalf("%d lines, want %d\n got %q\nwant %q", len(got), len(want), got, want)
		}
		for i := range want {
			if !bytes.Equal(got[i], want[i]) {
				t.Fatalf("line %d = %q, want %q", i, got[i], want[i])
			}
		}
		if !bytes.Equal(last, wantLast) {
			t.Fatalf("flush = %q, want %q", last, wantLast)
		}
		if ls.dropped != 0 {
			t.Fatalf("dropped %d lines under the limit", ls.dropped)
		}
	})
}

// modelLines is what the splitter should produce for a whole stream: every
// newline-terminated line without its "\n" and one "\r" before it, blank
// lines skipped; and the unterminated tail, if not blank.
func modelLines(stream []byte) (lines [][]byte, last []byte) {
	parts := bytes.Split(stream, []byte("\n"))
	for _, p := range parts[:len(parts)-1] {
		p = bytes.TrimSuffix(p, []byte("\r"))
		if len(bytes.TrimSpace(p)) == 0 {
			continue
		}
		lines = append(lines, p)
	}
	if tail := parts[len(parts)-1]; len(bytes.TrimSpace(tail)) > 0 {
		last = tail
	}
	return lines, last
}
