package main

import (
	"os"
	"os/exec"
	"path/filepath"
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
		pkg, ok := strings.CutPrefix(line, "init ")
		if !ok {
			continue
		}
		inits++
		pkg, _, _ = strings.Cut(pkg, " ")
		for _, banned := range []string{"github.com/mattn/go-runewidth", "github.com/charmbracelet/", "github.com/lucasb-eyer/go-colorful", "github.com/xo/terminfo",
			"github.com/segmentio/asm", "golang.org/x/sys/cpu"} {
			if strings.HasPrefix(pkg, banned) {
				t.Errorf("a one-line run initialised %s", pkg)
			}
		}
	}
	if inits == 0 {
		t.Fatalf("no init lines under GODEBUG=inittrace=1:\n%s", out)
	}
}
