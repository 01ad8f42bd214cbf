package builtins

import (
	"os/exec"
	"reflect"
	"strings"
	"testing"
)

func TestCaptureKeepsExactlyTheFirstBytes(t *testing.T) {
	t.Parallel()
	c := capture{limit: 5}
	for _, chunk := range []string{"ab", "cdef", "gh"} {
		c.add([]byte(chunk))
	}
	if string(c.buf) != "abcde" || !c.truncated() || c.total != 8 {
		t.Errorf("buf=%q truncated=%v total=%d", c.buf, c.truncated(), c.total)
	}
	if r := c.reader("test", LinesLimits{}); r != nil {
		t.Error("a reader started after output was dropped must refuse, not skip lines")
	}
}

func TestLineReaderSeesEverythingFromTheFirstByte(t *testing.T) {
	t.Parallel()
	c := capture{limit: 1 << 20}
	c.add([]byte("one\ntw"))
	r := c.reader("test", LinesLimits{})
	c.add([]byte("o\r\nthr"))
	c.add([]byte("ee"))
	c.end()
	var got []string
	for {
		line, ok, done := r.next()
		if done {
			break
		}
		if !ok {
			t.Fatal("no line ready after the end")
		}
		got = append(got, line)
	}
	if want := []string{"one", "two", "three"}; !reflect.DeepEqual(got, want) {
		t.Errorf("lines = %q, want %q", got, want)
	}
}

func TestLineReaderWaitsForNewline(t *testing.T) {
	t.Parallel()
	c := capture{limit: 1 << 20}
	r := c.reader("test", LinesLimits{})
	c.add([]byte("partial"))
	if _, ok, done := r.next(); ok || done {
		t.Errorf("a line without its newline came out before the end: ok=%v done=%v", ok, done)
	}
	select {
	case <-r.wake:
	default:
		t.Error("adding output did not wake the reader")
	}
}

// TestPipelineScriptQuotes runs the generated script with the system sh:
// arguments full of shell syntax must arrive verbatim and run nothing.
func TestPipelineScriptQuotes(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	hostile := []string{"$(touch " + dir + "/pwned)", "a;b", "it's", "`id`", "x\ny", "*"}
	script := pipelineScript(dir, [][]string{append([]string{"printf", "%s|"}, hostile...), {"cat"}})
	out, err := exec.Command("sh", "-c", script).Output()
	if err != nil {
		t.Fatalf("script failed: %v\n%s", err, script)
	}
	if want := strings.Join(hostile, "|") + "|"; string(out) != want {
		t.Errorf("stdout = %q, want %q", out, want)
	}
	if _, err := exec.Command("test", "-e", dir+"/pwned").Output(); err == nil {
		t.Error("a stage argument was run as a command")
	}
}

// popAll pops every ready line.
func popAll(r *lineReader) (lines []string, done bool) {
	for {
		line, ok, done := r.next()
		if !ok {
			return lines, done
		}
		lines = append(lines, line)
	}
}

// Past its bound a reader keeps the rest in its spill file and yields it
// all in order, holding no more than the bound (and a frame) in memory.
func TestLineReaderSpillsPastItsBound(t *testing.T) {
	t.Parallel()
	c := capture{limit: 4}
	r := c.reader("test", LinesLimits{})
	r.bound, r.spillCap = 8, 1<<20
	var want []string
	for i := range 200 {
		line := strings.Repeat("x", i%13)
		want = append(want, line)
		c.add([]byte(line + "\n"))
	}
	c.end()
	got, done := popAll(r)
	if !done || r.err != nil || !reflect.DeepEqual(got, want) {
		t.Fatalf("done=%v err=%v, %d lines, want %d", done, r.err, len(got), len(want))
	}
	if r.peak > r.bound+13 || r.spilled == 0 {
		t.Errorf("peak %d with bound %d, spilled %d", r.peak, r.bound, r.spilled)
	}
}

// Past the spill cap, the lines before the gap come out, then the end,
// with an error that says how far behind the recipe fell.
func TestLineReaderFailsPastItsSpillCap(t *testing.T) {
	t.Parallel()
	c := capture{limit: 4}
	r := c.reader("process p's stdout", LinesLimits{})
	r.bound, r.spillCap = 8, 16
	for i := range 10 {
		c.add([]byte(strings.Repeat(string(rune('a'+i)), 3) + "\n"))
	}
	got, done := popAll(r)
	if !done || r.err == nil || !strings.Contains(r.err.Error(), "fell more than 24 bytes behind process p's stdout (lines() holds 8 bytes in memory and 16 bytes on disk)") {
		t.Fatalf("done=%v err=%v", done, r.err)
	}
	if want := []string{"aaa", "bbb", "ccc", "ddd", "eee", "fff"}; !reflect.DeepEqual(got, want) {
		t.Errorf("lines = %q, want %q", got, want)
	}
}

// A line longer than maxLine fails the iteration rather than grow without
// limit, whether it sits in memory or on disk.
func TestLineReaderRefusesAnEndlessLine(t *testing.T) {
	t.Parallel()
	c := capture{limit: 4}
	r := c.reader("test", LinesLimits{})
	r.bound, r.maxLine = 8, 20
	c.add([]byte("ok\n"))
	for range 10 {
		c.add([]byte("0123456789"))
	}
	got, done := popAll(r)
	if !done || r.err == nil || !strings.Contains(r.err.Error(), "longer than the 20 bytes lines() yields") || !reflect.DeepEqual(got, []string{"ok"}) {
		t.Errorf("lines %q, done=%v err=%v", got, done, r.err)
	}
}
