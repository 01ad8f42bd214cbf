package daemon

import (
	"bytes"
	"errors"
	"io"
	"math/rand/v2"
	"strings"
	"testing"
	"testing/iotest"
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
		lr := newLineReader(mk())
		for i, want := range lines {
			if name == "onebyte" && i > 30 {
				break // slow; the first lines cover it
			}
			got, err := lr.next(limit)
			if err != nil || string(got) != want {
				t.Fatalf("%s: line %d: %d bytes, %v; want %d bytes", name, i, len(got), err, len(want))
			}
		}
		if name != "onebyte" {
			if _, err := lr.next(limit); !errors.Is(err, io.EOF) {
				t.Fatalf("%s: after the last line: %v", name, err)
			}
		}
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
		lr := newLineReader(iotest.HalfReader(strings.NewReader(tc.input)))
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
	lr := newLineReader(bytes.NewReader(input))
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
