package bench

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"testing"
	"time"
)

// fanout is the row of parallel(): 1,000 `true` commands, 8 at a time,
// through `sous run` against `xargs -P8 -n1 true` over the same items.
// Both sides include their own start (sous: the recipe and the embedded
// daemon; xargs: one process), as a user would see them.
func (e *env) fanout(t *testing.T) row {
	const n, limit = 1000, 8
	recipe := filepath.Join(e.dir, "fanout.star")
	src := fmt.Sprintf(`
res = parallel(list(range(%d)), lambda i: spawn(["true"], echo=False), limit=%d)
if len([r for r in res if r.ok]) != %d:
    fail("not every command succeeded")
`, n, limit, n)
	if err := os.WriteFile(recipe, []byte(src), 0o644); err != nil {
		t.Fatal(err)
	}
	items := filepath.Join(e.dir, "fanout-items")
	f, err := os.Create(items)
	if err != nil {
		t.Fatal(err)
	}
	for i := range n {
		fmt.Fprintln(f, i)
	}
	f.Close()
	xargs := func() time.Duration {
		return timeShell(t, fmt.Sprintf("xargs -P%d -n1 true < %s", limit, items))
	}
	sous := func() time.Duration {
		start := time.Now()
		if out, err := exec.Command(e.bin, "run", recipe).CombinedOutput(); err != nil {
			t.Fatalf("sous run %s: %v\n%s", recipe, err, out)
		}
		return time.Since(start)
	}
	tb, ts := e.interleave(t, xargs, sous)
	ratio := ts.Seconds() / tb.Seconds()
	return row{figure: "1,000 `true` through `parallel(limit=8)`", baseline: "`xargs -P8 -n1 true`", target: "at most 1.5x",
		result: fmt.Sprintf("%.2fx (%.0f vs %.0f ms)", ratio, ts.Seconds()*1000, tb.Seconds()*1000), ok: ratio <= 1.5}
}
