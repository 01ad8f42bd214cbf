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
	if r := c.reader("test"); r != nil {
		t.Error("a reader started after output was dropped must refuse, not skip lines")
	}
}

func TestLineReaderSeesEverythingFromTheFirstByte(t *testing.T) {
	t.Parallel()
	c := capture{limit: 1 << 20}
	c.add([]byte("one\ntw"))
	r := c.reader("test")
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
	r := c.reader("test")
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
