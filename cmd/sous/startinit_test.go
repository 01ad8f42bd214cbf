package main

import (
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
)

// A run that draws nothing and encodes nothing pays no package init of the
// terminal's text libraries nor of a CPU feature probe: every package
// linked into sous runs its init at every start, and go-runewidth's, x/ansi's
// parser's and golang.org/x/sys/cpu's (through segmentio/asm) were 4-5% of
// a one-line run (docs/PERFORMANCE.md, "The start of `sous run`").
// runtime/view/ansitext holds the three functions the status area used,
// its table built on first use; colorTerminal answers what colorprofile
// did; daemon/wire/internal/vbase64 is segmentio's base64, made on first
// use.
func TestRunStartsWithoutDeferrablePackages(t *testing.T) {
	bin := sousBinary(t)
	star := filepath.Join(t.TempDir(), "one.star")
	if err := os.WriteFile(star, []byte("x = 1\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(bin, "run", "-q", star)
	cmd.Env = append(os.Environ(), "GODEBUG=inittrace=1")
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("sous run: %v\n%s", err, out)
	}
	inits := 0
	for line := range strings.Lines(string(out)) {
		rest, ok := strings.CutPrefix(line, "init ")
		if !ok {
			continue
		}
		inits++
		pkg, _, _ := strings.Cut(rest, " ")
		// "init PKG @T ms, C ms clock, B bytes, N allocs"
		if f := strings.Fields(rest); pkg == "github.com/seed5ad92d46/sous/daemon" && len(f) >= 8 {
			// The method table and its index of names, built on the
			// first request since: 141 allocations at init before.
			if n, err := strconv.Atoi(f[len(f)-2]); err != nil || n > 64 {
				t.Errorf("the daemon package's init made %s allocations: %s", f[len(f)-2], line)
			}
		}
		for _, banned := range []string{"github.com/mattn/go-runewidth", "github.com/charmbracelet/", "github.com/lucasb-eyer/go-colorful", "github.com/xo/terminfo",
			"github.com/segmentio/asm", "golang.org/x/sys/cpu", "runtime/metrics"} {
			if strings.HasPrefix(pkg, banned) {
				t.Errorf("a one-line run initialised %s", pkg)
			}
		}
	}
	if inits == 0 {
		t.Fatalf("no init lines under GODEBUG=inittrace=1:\n%s", out)
	}
}
