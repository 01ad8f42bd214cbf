package daemon

import (
	"bytes"
	"errors"
	"io"
	"math/rand/v2"
	"runtime/debug"
	"strings"
	"sync"
	"testing"
	"testing/iotest"

	"github.com/seed5ad92d46/sous/daemon/wire"
	"github.com/seed5ad92d46/sous/internal/testutil"
)

func TestLineReader(t *testing.T) {
	const limit = 200_000
	var lines []string
	rng := rand.New(rand.NewPCG(1, 2))
	for i := 0; i < 200; i++ {
		n := rng.IntN(300)
		switch i % 10 {
		case 0:
			n = rng.IntN(limit + 1) // long lines, up to exactly the limit
		case 1:
			n = limit
		case 2:
			n = 0
		}
		lines = append(lines, strings.Repeat(string(rune('a'+i%26)), n))
	}
	input := strings.Join(lines, "\n") // the last line has no newline
	readers := map[string]func() io.Reader{
		"whole":   func() io.Reader { return strings.NewReader(input) },
		"onebyte": func() io.Reader { return iotest.OneByteReader(strings.NewReader(input)) },
		"half":    func() io.Reader { return iotest.HalfReader(strings.NewReader(input)) },
	}
	for name, mk := range readers {
		for _, pooled := range []bool{false, true} {
			var pool *sync.Pool
			if pooled {
				pool = new(sync.Pool)
			}
			lr := newLineReader(mk(), pool)
			for i, want := range lines {
				if name == "onebyte" && i > 30 {
					break // slow; the first lines cover it
				}
				got, err := lr.next(limit)
				if err != nil || string(got) != want {
					t.Fatalf("%s (pooled %v): line %d: %d bytes, %v; want %d bytes", name, pooled, i, len(got), err, len(want))
				}
				// The line is done with: whatever buffer it goes back to
				// must not be one the reader still reads from.
				scribble(got)
				lr.recycle(got)
			}
			if name != "onebyte" {
				if _, err := lr.next(limit); !errors.Is(err, io.EOF) {
					t.Fatalf("%s (pooled %v): after the last line: %v", name, pooled, err)
				}
			}
		}
	}
}

// scribble overwrites the whole of b's backing array from b on.
func scribble(b []byte) {
	b = b[:cap(b)]
	for i := range b {
		b[i] = '#'
	}
}

// With a pool, a long line grows into a pooled buffer in one step and the
// buffer comes back to the pool once recycled: later long lines reuse the
// buffers (two at most: the part of the next line read with one is carried
// into another, as it would be while a handler holds the first), and a
// short line leaves the reader on its own buffer unless what follows it
// needs a big one.
func TestLineReaderPool(t *testing.T) {
	// A collection empties a sync.Pool: one between a recycle and the next
	// line (other tests' goroutines allocate too) made a third buffer.
	defer debug.SetGCPercent(debug.SetGCPercent(-1))
	long := bytes.Repeat([]byte("l"), 700<<10)
	var input []byte
	for range 4 {
		input = append(append(append(input, long...), '\n'), "short\n"...)
	}
	pool := new(sync.Pool)
	lr := newLineReader(iotest.HalfReader(bytes.NewReader(input)), pool)
	buffers := map[*byte]bool{}
	for i := range 8 {
		line, err := lr.next(wire.MaxLine)
		if err != nil {
			t.Fatal(err)
		}
		if i%2 == 1 {
			if string(line) != "short" {
				t.Fatalf("line %d: %q", i, line)
			}
			if lr.pooled() && lr.end-lr.start <= len(lr.small) {
				t.Errorf("line %d: the reader kept a pooled buffer for %d pending bytes", i, lr.end-lr.start)
			}
			continue
		}
		if !bytes.Equal(line, long) || cap(line) != len(bigLine{}) {
			t.Fatalf("line %d: %d bytes in a buffer of %d", i, len(line), cap(line))
		}
		buffers[&line[0]] = true
		scribble(line)
		lr.recycle(line)
	}
	// (The race detector makes sync.Pool drop some of what it is given.)
	if len(buffers) > 2 && !testutil.RaceEnabled {
		t.Errorf("4 long lines in %d buffers, want 2 at most", len(buffers))
	}
}

func TestLineReaderLimit(t *testing.T) {
	for _, tc := range []struct {
		input   string
		lines   int
		tooLong bool
	}{
		{strings.Repeat("x", 100) + "\nok\n", 2, false},
		{strings.Repeat("x", 101) + "\nok\n", 0, true},
		{"ok\n" + strings.Repeat("x", 101), 1, true},
		{"ok\n" + strings.Repeat("x", 100), 2, false},
		{"ok\n" + strings.Repeat("x", 5000) + "\n", 1, true},
	} {
		lr := newLineReader(iotest.HalfReader(strings.NewReader(tc.input)), nil)
		n := 0
		var err error
		for {
			var line []byte
			if line, err = lr.next(100); err != nil {
				break
			}
			if len(line) > 100 {
				t.Fatalf("returned a line of %d bytes", len(line))
			}
			n++
		}
		if n != tc.lines || tc.tooLong != errors.Is(err, errLineTooLong) || !tc.tooLong && !errors.Is(err, io.EOF) {
			t.Errorf("%.20q...: %d lines, %v", tc.input, n, err)
		}
	}
}

// Lines handed out are the caller's: reading on does not change them.
func TestLineReaderOwnership(t *testing.T) {
	big := bytes.Repeat([]byte("b"), 3*lineReaderSize)
	input := append(append(append([]byte("small\n"), big...), '\n'), "next\nlast\n"...)
	lr := newLineReader(bytes.NewReader(input), new(sync.Pool))
	var got [][]byte
	for {
		line, err := lr.next(1 << 20)
		if err != nil {
			break
		}
		got = append(got, line)
	}
	if len(got) != 4 || string(got[0]) != "small" || !bytes.Equal(got[1], big) || string(got[2]) != "next" || string(got[3]) != "last" {
		t.Fatalf("lines %d", len(got))
	}
}

// A last line without its newline that fills the connection's own buffer
// exactly comes back whole, and the reader does not read into it again.
func TestLineReaderLastLineFillsTheBuffer(t *testing.T) {
	for _, pool := range []*sync.Pool{nil, new(sync.Pool)} {
		want := bytes.Repeat([]byte("z"), lineReaderSize)
		lr := newLineReader(bytes.NewReader(want), pool)
		line, err := lr.next(wire.MaxLine)
		if err != nil || !bytes.Equal(line, want) {
			t.Fatalf("pool %v: %d bytes, %v", pool != nil, len(line), err)
		}
		if _, err := lr.next(wire.MaxLine); !errors.Is(err, io.EOF) {
			t.Fatalf("pool %v: after the last line: %v", pool != nil, err)
		}
		if &lr.buf[0] == &line[0] {
			t.Errorf("pool %v: the reader kept the buffer it handed over", pool != nil)
		}
	}
}

// A line longer than the connection's own buffer but short of handOverLine
// (a spawn with a large environment) grows into a pooled buffer to be read,
// comes back as a copy, and the buffer goes back to the pool at once rather
// than with the line's handler.
func TestLineReaderMidSizeLine(t *testing.T) {
	mid := bytes.Repeat([]byte("m"), 10<<10)
	input := append(append(append([]byte(nil), mid...), '\n'), "x\n"...)
	pool := new(sync.Pool)
	lr := newLineReader(iotest.HalfReader(bytes.NewReader(input)), pool)
	line, err := lr.next(wire.MaxLine)
	if err != nil || !bytes.Equal(line, mid) {
		t.Fatalf("%d bytes, %v", len(line), err)
	}
	if cap(line) == len(bigLine{}) || lr.pooled() {
		t.Errorf("a %d-byte line holds a pooled buffer (line's capacity %d, the reader's pooled: %v)", len(line), cap(line), lr.pooled())
	}
	if line, err := lr.next(wire.MaxLine); err != nil || string(line) != "x" {
		t.Fatalf("%q, %v", line, err)
	}
}
