package main

import (
	"bytes"
	"errors"
	"flag"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/charmbracelet/x/vt"
	"github.com/creack/pty"
)

// updateGolden rewrites the golden screens under testdata/ from what the
// tests see: go test ./cmd/sous -run TestLive -update
var updateGolden = flag.Bool("update", false, "rewrite the golden screens under testdata/")

// ptyRun is the sous binary running on a pseudo-terminal (stdin, stdout
// and stderr are its slave side, as in a person's shell), with everything
// it writes rendered by a terminal emulator (charmbracelet/x/vt), so that
// a test reads the screen a person would see.
type ptyRun struct {
	t    *testing.T
	cmd  *exec.Cmd
	tty  *os.File // the master side
	emu  *vt.SafeEmulator
	mu   sync.Mutex
	raw  bytes.Buffer // every byte sous wrote, escapes and all
	read chan struct{}
	exit chan error
}

// startPTY runs `sous args...` on a cols × rows terminal with env as its
// whole environment.
func startPTY(t *testing.T, cols, rows int, env []string, args ...string) *ptyRun {
	t.Helper()
	cmd := exec.Command(sousBinary(t), args...)
	cmd.Env = env
	tty, err := pty.StartWithSize(cmd, &pty.Winsize{Cols: uint16(cols), Rows: uint16(rows)})
	if err != nil {
		t.Fatal(err)
	}
	p := &ptyRun{t: t, cmd: cmd, tty: tty, emu: vt.NewSafeEmulator(cols, rows), read: make(chan struct{}), exit: make(chan error, 1)}
	// The emulator answers queries (none expected) through a pipe that
	// must be read, or its writes would block.
	go func() {
		b := make([]byte, 256)
		for {
			if _, err := p.emu.Read(b); err != nil {
				return
			}
		}
	}()
	go func() {
		defer close(p.read)
		b := make([]byte, 32<<10)
		for {
			n, err := tty.Read(b)
			if n > 0 {
				p.mu.Lock()
				p.raw.Write(b[:n])
				p.emu.Write(b[:n])
				p.mu.Unlock()
			}
			if err != nil {
				return // EIO once the slave side is closed
			}
		}
	}()
	go func() { p.exit <- cmd.Wait() }()
	t.Cleanup(func() {
		if cmd.ProcessState == nil {
			cmd.Process.Kill()
			<-p.exit
		}
		tty.Close()
	})
	return p
}

// screen is what the terminal shows now, lines without trailing blanks.
func (p *ptyRun) screen() string {
	p.mu.Lock()
	defer p.mu.Unlock()
	return strings.TrimRight(p.emu.String(), "\n")
}

// waitScreen waits until cond holds for the screen and it stayed the same
// for a redraw or two (the area redraws every 100 ms), and returns it.
func (p *ptyRun) waitScreen(what string, cond func(string) bool) string {
	p.t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	var last string
	stable := 0
	for time.Now().Before(deadline) {
		s := p.screen()
		if cond(s) && s == last {
			stable++
			if stable >= 3 {
				return s
			}
		} else {
			stable = 0
		}
		last = s
		time.Sleep(50 * time.Millisecond)
	}
	p.t.Fatalf("the screen never showed %s:\n%s", what, last)
	return ""
}

// send types text on the terminal.
func (p *ptyRun) send(text string) {
	p.t.Helper()
	if _, err := p.tty.Write([]byte(text)); err != nil {
		p.t.Fatal(err)
	}
}

// wait waits for sous to exit and for its last bytes to be read, and
// returns its exit code.
func (p *ptyRun) wait() int {
	p.t.Helper()
	var err error
	select {
	case err = <-p.exit:
	case <-time.After(60 * time.Second):
		p.t.Fatalf("sous did not exit; the screen:\n%s", p.screen())
	}
	select {
	case <-p.read:
	case <-time.After(5 * time.Second):
	}
	var ee *exec.ExitError
	if errors.As(err, &ee) {
		return ee.ExitCode()
	}
	if err != nil {
		p.t.Fatal(err)
	}
	return 0
}

// rawOutput is every byte sous wrote so far.
func (p *ptyRun) rawOutput() string {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.raw.String()
}

// The parts of a screen that change from run to run.
var (
	durationToken = regexp.MustCompile(` *\b(\d+(\.\d+)?(ms|s)|\d+m\d\ds|\d+h\d\dm)\b`)
	uuidToken     = regexp.MustCompile(`[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}`)
	sessionToken  = regexp.MustCompile(`session [0-9a-f]{8}\b`)
	costToken     = regexp.MustCompile(`\$\d+\.\d{4}`)
)

// normalize replaces durations (with the spaces that align them), ids
// of sessions and costs by placeholders, so a golden screen holds what is always
// the same.
// runIDToken is the run's id on its first line.
var runIDToken = regexp.MustCompile(`sous: run [0-9a-f]{16}`)

func normalize(s string) string {
	s = durationToken.ReplaceAllString(s, " <t>")
	s = uuidToken.ReplaceAllString(s, "<uuid>")
	s = sessionToken.ReplaceAllString(s, "session <id>")
	s = runIDToken.ReplaceAllString(s, "sous: run <id>")
	return costToken.ReplaceAllString(s, "$<cost>")
}

// golden compares got with testdata/NAME.golden (or writes it with
// -update).
func golden(t *testing.T, name, got string) {
	t.Helper()
	path := filepath.Join("testdata", name+".golden")
	got = strings.TrimRight(got, "\n") + "\n"
	if *updateGolden {
		if err := os.MkdirAll("testdata", 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(path, []byte(got), 0o644); err != nil {
			t.Fatal(err)
		}
		return
	}
	want, err := os.ReadFile(path)
	if err != nil {
		t.Fatalf("%v (run with -update to write it)", err)
	}
	if got != string(want) {
		t.Errorf("the screen differs from %s:\n--- got\n%s--- want\n%s", path, got, want)
	}
}

// resize changes the terminal's size: the emulator's first, then the
// pty's, which sends sous SIGWINCH.
func (p *ptyRun) resize(cols, rows int) {
	p.t.Helper()
	p.mu.Lock()
	p.emu.Resize(cols, rows)
	p.mu.Unlock()
	if err := pty.Setsize(p.tty, &pty.Winsize{Cols: uint16(cols), Rows: uint16(rows)}); err != nil {
		p.t.Fatal(err)
	}
}
