package testutil

import (
	"os/exec"
	"slices"
	"strings"
	"testing"
	"time"
)

// FastestPython is the python3 that start-up figures measure against: of
// the interpreters on this machine (Debian's /usr/bin/python3 and the one
// PATH's python3 runs, past any pyenv shim), the one that starts quickest
// (the median of 5 runs of `-c pass`), so that no figure is flattered by a
// slow baseline. pyenv's own builds here took 50-90 ms for `-c pass` where
// Debian's took 10-40 ms. "" when there is none.
func FastestPython(tb testing.TB) string {
	tb.Helper()
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
		if len(times) < 5 {
			continue
		}
		slices.Sort(times)
		if m := times[len(times)/2]; best == "" || m < bestTime {
			best, bestTime = p, m
		}
	}
	if best != "" {
		tb.Logf("python3 baseline: %s (-c pass in %v)", best, bestTime.Round(time.Millisecond))
	}
	return best
}
