package bench

import (
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"syscall"
	"testing"
	"time"

	"github.com/creack/pty"
	"github.com/seed5ad92d46/sous/internal/testutil"
)

// liveLine is what the recipe of the live row echoes, over and over: a
// line of a build log, so that every chunk of output is lines the status
// area must be erased above and drawn under.
const liveLine = "ok  	github.com/seed5ad92d46/sous/runtime/view	0.035s	coverage: 81.2% of statements"

// liveRecipe echoes size bytes of liveLine lines through the embedded
// daemon to sous run's stdout, from a process the status area shows.
func liveRecipe(t testing.TB, dir string, size int64) string {
	t.Helper()
	p := filepath.Join(dir, "live.star")
	src := fmt.Sprintf("run([\"sh\", \"-c\", \"yes '%s' | head -c %d\"])\n", liveLine, size)
	if err := os.WriteFile(p, []byte(src), 0o644); err != nil {
		t.Fatal(err)
	}
	return p
}

// timePTY runs `sous run recipe` on a pseudo-terminal of 120 × 40 with
// TERM=term (stdin, stdout and stderr its slave side, as in a shell),
// reads everything it writes as a terminal would be fed, and returns how
// long it ran and the CPU time (user and system) sous and its children
// used: on a shared machine the wall time moves by a fifth from run to
// run, the CPU time much less.
func timePTY(t testing.TB, bin, recipe, term string) (wall, cpu time.Duration) {
	t.Helper()
	cmd := exec.Command(bin, "run", recipe)
	cmd.Env = []string{"PATH=" + os.Getenv("PATH"), "TERM=" + term, "LANG=C.UTF-8"}
	start := time.Now()
	tty, err := pty.StartWithSize(cmd, &pty.Winsize{Cols: 120, Rows: 40})
	if err != nil {
		t.Fatal(err)
	}
	defer tty.Close()
	_, err = io.Copy(io.Discard, tty)
	if err != nil && !errors.Is(err, syscall.EIO) { // EIO: the slave side closed
		t.Fatal(err)
	}
	if err := cmd.Wait(); err != nil {
		t.Fatalf("sous run on a pty: %v", err)
	}
	return time.Since(start), cmd.ProcessState.UserTime() + cmd.ProcessState.SystemTime()
}

// liveArea is the row of the status area: sous run echoing e.bytes of
// lines on a terminal with the area (TERM=xterm-256color) against the
// same with none (TERM=dumb, a terminal that cannot move its cursor),
// both on a pty, alternated, each repeat's ratios counted. It is judged by
// the CPU time: what the area costs sous and the kernel's terminal, which
// the wall time on a shared machine hides in its noise.
func (e *env) liveArea(t *testing.T) row {
	recipe := liveRecipe(t, e.dir, e.bytes)
	var wallRatios, cpuRatios []float64
	var on, wallOn, wallOff, cpuOn, cpuOff []time.Duration
	for i := range e.repeats {
		// Which side goes first alternates: a machine that slows the
		// second of two runs does not count against one side.
		var wOff, cOff, wOn, cOn time.Duration
		if i%2 == 0 {
			wOff, cOff = timePTY(t, e.bin, recipe, "dumb")
			wOn, cOn = timePTY(t, e.bin, recipe, "xterm-256color")
		} else {
			wOn, cOn = timePTY(t, e.bin, recipe, "xterm-256color")
			wOff, cOff = timePTY(t, e.bin, recipe, "dumb")
		}
		on = append(on, wOn)
		wallOn, wallOff, cpuOn, cpuOff = append(wallOn, wOn), append(wallOff, wOff), append(cpuOn, cOn), append(cpuOff, cOff)
		wallRatios = append(wallRatios, wOff.Seconds()/wOn.Seconds())
		cpuRatios = append(cpuRatios, cOff.Seconds()/cOn.Seconds())
	}
	cpu := medianFloat(cpuRatios)
	// The best of each side too: what is left when the other processes
	// of a shared machine happened not to get in the way.
	best := func(off, on []time.Duration) float64 { return slices.Min(off).Seconds() / slices.Min(on).Seconds() }
	return row{
		figure:   "`sous run` echoing " + human(e.bytes) + " of lines on a terminal, with the live status area",
		baseline: "the same without the area (TERM=dumb), on a pty too",
		target:   "the area costs at most 2%: >= 0.98",
		result: fmt.Sprintf("%.3fx in CPU time (sous, its children and the terminal's kernel side), %.3fx in wall time (%.0f MB/s with the area); best of each side: %.3fx CPU, %.3fx wall",
			cpu, medianFloat(wallRatios), float64(e.bytes)/median(on).Seconds()/1e6, best(cpuOff, cpuOn), best(wallOff, wallOn)),
		ok: cpu >= 0.98,
	}
}

// BenchmarkLiveArea is the live row as a Go benchmark, for CI to keep it
// working (SOUS_BENCH_BYTES sizes it; 1 GiB by default): it reports the
// CPU and wall times with the area over those without.
func BenchmarkLiveArea(b *testing.B) {
	dir := b.TempDir()
	bin := filepath.Join(dir, "sous")
	if out, err := exec.Command("go", "build", "-o", bin, "../cmd/sous").CombinedOutput(); err != nil {
		b.Fatalf("build sous: %v\n%s", err, out)
	}
	size := testutil.BenchBytes(b, 1<<30)
	recipe := liveRecipe(b, dir, size)
	var on, off, cpuOn, cpuOff time.Duration
	b.ResetTimer()
	for b.Loop() {
		w, c := timePTY(b, bin, recipe, "dumb")
		off, cpuOff = off+w, cpuOff+c
		w, c = timePTY(b, bin, recipe, "xterm-256color")
		on, cpuOn = on+w, cpuOn+c
	}
	b.ReportMetric(float64(cpuOn)/float64(cpuOff), "area/none-cpu")
	b.ReportMetric(float64(on)/float64(off), "area/none-wall")
	b.ReportMetric(float64(size)/(on.Seconds()/float64(b.N))/1e6, "MB/s")
	b.Log("SOUS_BENCH_BYTES=" + strconv.FormatInt(size, 10))
}
