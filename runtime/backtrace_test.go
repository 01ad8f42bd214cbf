package runtime

import (
	"path/filepath"
	"strings"
	"testing"

	"github.com/seed5ad92d46/sous/internal/testutil"
)

// Runaway recursion is reported in a few lines, as Python reports it, not
// one line per frame (2.8 MB for a stack overflow); a short traceback is
// unchanged, and mutual recursion keeps its two ends.
func TestBacktraceFoldsRecursion(t *testing.T) {
	t.Parallel()
	dir := testutil.WriteTree(t, map[string]string{
		"self.star":   "def f(n):\n    return f(n + 1)\nf(0)\n",
		"mutual.star": "def f(n):\n    return g(n + 1)\ndef g(n):\n    return f(n + 1)\nf(0)\n",
		"short.star":  "def h():\n    fail(\"boom\")\n\ndef k():\n    h()\nk()\n",
	})
	run := func(name string) string {
		err, log := runWithoutDaemon(dir, name)
		if err == nil {
			t.Fatalf("%s succeeded", name)
		}
		return log
	}
	got := run("self.star")
	want := "Traceback (most recent call last):\n" +
		"  " + filepath.Join(dir, "self.star") + ":3:2: in <toplevel>\n" +
		strings.Repeat("  "+filepath.Join(dir, "self.star")+":2:13: in f\n", 3) +
		"  [the line above repeated "
	if !strings.HasPrefix(got, want) || !strings.Contains(got, "Error: Starlark stack overflow") || len(got) > 2000 {
		t.Errorf("self recursion, %d bytes:\n%.3000s", len(got), got)
	}
	got = run("mutual.star")
	if lines := strings.Count(got, "\n"); lines > 2*framesShown+5 || !strings.Contains(got, "more lines]") ||
		!strings.Contains(got, "mutual.star:5:2: in <toplevel>") || !strings.Contains(got, "Error: Starlark stack overflow") {
		t.Errorf("mutual recursion, %d lines:\n%.6000s", lines, got)
	}
	got = run("short.star")
	want = "Traceback (most recent call last):\n" +
		"  " + filepath.Join(dir, "short.star") + ":6:2: in <toplevel>\n" +
		"  " + filepath.Join(dir, "short.star") + ":5:6: in k\n" +
		"  " + filepath.Join(dir, "short.star") + ":2:9: in h\n" +
		"Error in fail: fail: boom\n"
	if !strings.HasSuffix(got, want) {
		t.Errorf("short traceback:\n%s\nwant:\n%s", got, want)
	}
}
