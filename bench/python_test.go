package bench

import (
	"os/exec"
	"slices"
	"strings"
	"testing"
	"time"
)

// fastestPython is the python3 the rows measure against: of the
// interpreters on this machine (Debian's /usr/bin/python3 and the one
// PATH's python3 runs, past any pyenv shim), the one that starts quickest,
// so that no row is flattered by a slow baseline. pyenv's own builds here
// took 50-90 ms for `-c pass` where Debian's took 10-40 ms. "" when there
// is none.
func fastestPython(t *testing.T) string {
	t.Helper()
	var candidates []string
	if p, err := exec.LookPath("/usr/bin/python3"); err == nil {
		candidates = append(candidates, p)
	}
	if p, err := exec.LookPath("python3"); err == nil {
		// A pyenv shim is a shell script in front of python: ask python.
		if out, err := exec.Command(p, "-c", "import sys; print(sys.executable)").Output(); err == nil {
			p = strings.TrimSpace(string(out))
		}
		if !slices.Contains(candidates, p) {
			candidates = append(candidates, p)
		}
	}
	best, bestTime := "", time.Duration(0)
	for _, p := range candidates {
		var times []time.Duration
		for range 5 {
			start := time.Now()
			if err := exec.Command(p, "-c", "pass").Run(); err != nil {
				break
			}
			times = append(times, time.Since(start))
		}
		if len(times) == 5 && (best == "" || median(times) < bestTime) {
			best, bestTime = p, median(times)
		}
	}
	if best != "" {
		t.Logf("python3 baseline: %s (-c pass in %v)", best, bestTime.Round(time.Millisecond))
	}
	return best
}
