package view

import (
	"bytes"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/charmbracelet/x/ansi"
	"github.com/charmbracelet/x/vt"

	"github.com/seed5ad92d46/sous/daemon/wire"
	"github.com/seed5ad92d46/sous/runtime/event"
)

// screenTTY is a terminal for the tests: what the Terminal writes goes
// through a line discipline's output processing (LF becomes CR LF, as a
// pty's onlcr does) into a terminal emulator.
type screenTTY struct {
	mu         sync.Mutex
	emu        *vt.SafeEmulator
	cols, rows int
	writes     int
}

func newScreenTTY(cols, rows int) *screenTTY {
	s := &screenTTY{emu: vt.NewSafeEmulator(cols, rows), cols: cols, rows: rows}
	go func() {
		b := make([]byte, 64)
		for {
			if _, err := s.emu.Read(b); err != nil {
				return
			}
		}
	}()
	return s
}

func (s *screenTTY) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.writes++
	s.emu.Write(bytes.ReplaceAll(p, []byte("\n"), []byte("\r\n")))
	return len(p), nil
}

func (s *screenTTY) size() (int, int) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.cols, s.rows
}

func (s *screenTTY) resize(cols, rows int) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.cols, s.rows = cols, rows
	s.emu.Resize(cols, rows)
}

// lines is the screen once what the Terminal holds back went out.
func (f *fixture) lines() []string {
	f.bus.Lock()
	f.term.flush()
	f.bus.Unlock()
	return f.tty.lines()
}

func (s *screenTTY) lines() []string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return strings.Split(strings.TrimRight(s.emu.String(), "\n"), "\n")
}

// fixture is a bus with a stopped clock, and a Terminal on a screenTTY.
type fixture struct {
	bus     *event.Bus
	tty     *screenTTY
	term    *Terminal
	now     time.Time
	resized chan struct{}
}

func newFixture(t *testing.T, cols, rows int) *fixture {
	f := &fixture{tty: newScreenTTY(cols, rows), now: time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC), resized: make(chan struct{})}
	f.bus = event.New(func() time.Time { return f.now })
	f.term = NewTerminal(f.bus, TerminalOptions{Stderr: f.tty, Stdout: f.tty, StdoutOnScreen: true,
		Size: f.tty.size, Resized: f.resized, Interval: time.Hour})
	f.bus.Subscribe(f.term)
	f.bus.Subscribe(event.SinkFunc(func(_ time.Time, e event.Event) {
		if o, ok := e.(*event.Output); ok {
			f.term.Write(o.Stream, o.Data)
		}
	}))
	f.bus.Publish(&event.Start{Recipe: "/src/fan.star"})
	t.Cleanup(func() { f.bus.Publish(&event.End{Status: "ok"}) })
	return f
}

func (f *fixture) spawn(id string, argv ...string) {
	f.bus.Publish(&event.Spawn{ID: id, Command: argv, Host: "embedded"})
}

func (f *fixture) out(id, text string) {
	f.bus.Publish(&event.Output{ID: id, Stream: wire.Stdout, Data: []byte(text)})
}

// later moves the clock past the interval, so the next write lays the
// area out anew.
func (f *fixture) later(d time.Duration) {
	f.bus.Lock()
	f.now = f.now.Add(d)
	f.bus.Unlock()
}

func want(t *testing.T, got []string, want ...string) {
	t.Helper()
	if strings.Join(got, "\n") != strings.Join(want, "\n") {
		t.Errorf("screen:\n%s\nwant:\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
	}
}

// TestTerminalAreaStaysUnderTheLines: lines scroll above the area, which
// follows them down; a long line in the area is cut to the width, never
// wrapped; the area goes when the run ends.
func TestTerminalAreaStaysUnderTheLines(t *testing.T) {
	f := newFixture(t, 40, 12)
	f.spawn("build", "make", "-j4")
	f.spawn("test", "go", "test", "./...")
	f.out("build", "compiling a\n")
	want(t, f.lines(),
		"compiling a",
		"─ fan.star · 0s · 2 running",
		"[build]    0s  compiling a",
		"[test]     0s  $ go test ./...",
	)
	f.later(time.Hour)
	f.out("test", "ok  pkg/a 0.1s\nok  pkg/b 0.2s\nFAIL pkg/c with a line far too long for forty columns\n")
	want(t, f.lines(),
		"compiling a",
		"ok  pkg/a 0.1s",
		"ok  pkg/b 0.2s",
		"FAIL pkg/c with a line far too long for",
		"forty columns",
		"─ fan.star · 1h00m · 2 running",
		"[build] 1h00m  compiling a",
		"[test]  1h00m  FAIL pkg/c with a line …",
	)
	f.bus.Publish(&event.Exit{ID: "build"})
	f.bus.Publish(&event.End{Status: "ok"})
	got := f.lines()
	want(t, got, "compiling a", "ok  pkg/a 0.1s", "ok  pkg/b 0.2s", "FAIL pkg/c with a line far too long for", "forty columns")
	if pos := f.tty.emu.CursorPosition(); pos.X != 0 || pos.Y != len(got) {
		t.Errorf("cursor at %v after the end, want the start of line %d", pos, len(got))
	}
}

// TestTerminalWaitsForTheEndOfALine: a piece of a line (no newline yet)
// keeps the area away until the line ends, so the area never splits a
// line; a prompt hides it until it is answered.
func TestTerminalWaitsForTheEndOfALine(t *testing.T) {
	f := newFixture(t, 40, 12)
	f.spawn("a", "sh")
	f.out("a", "one\n")
	f.out("a", "progress: 10%")
	want(t, f.lines(), "one", "progress: 10%")
	f.later(time.Hour) // past the interval: the next line lays the area out again
	f.out("a", " 100%\n")
	want(t, f.lines(), "one", "progress: 10% 100%", "─ fan.star · 1h00m · 1 running", "[a] 1h00m  100%")

	// What the human sink does for a prompt: the event, then its text.
	f.bus.Lock()
	f.bus.PublishLocked(&event.Prompt{Text: "\nsous: allow? "})
	f.term.Write(wire.Stderr, []byte("\nsous: allow? "))
	f.bus.Unlock()
	want(t, f.lines(), "one", "progress: 10% 100%", "", "sous: allow?")
	f.tty.Write([]byte("y\n")) // the person's answer, as the terminal echoes it
	f.bus.Publish(&event.PromptDone{})
	want(t, f.lines(), "one", "progress: 10% 100%", "", "sous: allow? y", "─ fan.star · 1h00m · 1 running", "[a] 1h00m  100%")
}

// TestTerminalResize: on SIGWINCH the area is laid out at the new width
// at once, cut to it, and no piece of the wider area is left behind.
func TestTerminalResize(t *testing.T) {
	f := newFixture(t, 60, 12)
	f.spawn("compile", "cc")
	f.out("compile", "building the long name of a file that is here.c\n")
	want(t, f.lines(),
		"building the long name of a file that is here.c",
		"─ fan.star · 0s · 1 running",
		"[compile]    0s  building the long name of a file that is …",
	)
	f.tty.resize(30, 12)
	f.resized <- struct{}{}
	deadline := time.Now().Add(5 * time.Second)
	for !strings.Contains(strings.Join(f.tty.lines(), "\n"), "[compile]    0s  building th…") {
		if time.Now().After(deadline) {
			t.Fatalf("the area was not laid out again at 30 columns:\n%s", strings.Join(f.tty.lines(), "\n"))
		}
		time.Sleep(10 * time.Millisecond)
	}
	got := f.lines()
	want(t, got,
		"building the long name of a fi", // the terminal cut the old line
		"─ fan.star · 0s · 1 running",
		"[compile]    0s  building th…",
	)
	for _, l := range got[1:] {
		if w := ansi.StringWidth(l); w >= 30 {
			t.Errorf("an area line of %d columns on a 30-column terminal: %q", w, l)
		}
	}
}

// TestTerminalStdoutElsewhere: when stdout is not the terminal (sous run
// > file), its lines go there untouched and the area stays as it was.
func TestTerminalStdoutElsewhere(t *testing.T) {
	tty := newScreenTTY(40, 10)
	var file bytes.Buffer
	now := time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)
	bus := event.New(func() time.Time { return now })
	term := NewTerminal(bus, TerminalOptions{Stderr: tty, Stdout: &file, Size: tty.size, Interval: time.Hour})
	bus.Subscribe(term)
	bus.Publish(&event.Start{Recipe: "r.star"})
	bus.Publish(&event.Spawn{ID: "a", Command: []string{"x"}})
	bus.Lock()
	term.Write(wire.Stderr, []byte("on the terminal\n"))
	writes := tty.writes
	term.Write(wire.Stdout, []byte("to the file\n"))
	bus.Unlock()
	if file.String() != "to the file\n" {
		t.Errorf("the file got %q", file.String())
	}
	if tty.writes != writes {
		t.Error("a line to the file touched the terminal")
	}
	bus.Lock()
	term.flush()
	bus.Unlock()
	want(t, tty.lines(), "on the terminal", "─ r.star · 0s · 1 running", "[a]    0s  $ x")
	bus.Publish(&event.End{Status: "ok"})
	want(t, tty.lines(), "on the terminal")
}

// TestTerminalBatchesLines: chunks that come close together reach the
// terminal as one write with one area, a few milliseconds later, without
// any other event to push them; a batch that fills goes out at once.
func TestTerminalBatchesLines(t *testing.T) {
	f := newFixture(t, 40, 12)
	f.spawn("a", "yes")
	f.bus.Lock()
	before := f.tty.writes
	f.bus.Unlock()
	f.bus.Lock() // all 100 before the batch's time is up, however slow the machine
	for i := range 100 {
		f.bus.PublishLocked(&event.Output{ID: "a", Stream: wire.Stdout, Data: fmt.Appendf(nil, "line %d\n", i)})
	}
	f.bus.Unlock()
	deadline := time.Now().Add(5 * time.Second)
	for {
		f.bus.Lock()
		writes := f.tty.writes - before
		f.bus.Unlock()
		if writes > 0 {
			if writes != 1 {
				t.Errorf("100 chunks took %d writes, want 1", writes)
			}
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("the lines never went out")
		}
		time.Sleep(time.Millisecond)
	}
	got := f.tty.lines()
	if n := len(got); n < 3 || got[n-3] != "line 99" || got[n-1] != "[a]    0s  line 99" {
		t.Errorf("screen after the batch:\n%s", strings.Join(got, "\n"))
	}

	f.bus.Lock()
	before = f.tty.writes
	f.bus.Unlock()
	f.out("a", strings.Repeat("x", batchBytes)+"\n")
	f.bus.Lock()
	if f.tty.writes == before {
		t.Error("a full batch waited")
	}
	f.bus.Unlock()
}
