package view

import (
	"bytes"
	"io"
	"strconv"
	"time"

	"github.com/seed5ad92d46/sous/daemon/wire"
	"github.com/seed5ad92d46/sous/runtime/event"
)

// TerminalOptions say where the status area lives.
type TerminalOptions struct {
	// Stderr is the terminal: the area is drawn there, under the lines.
	Stderr io.Writer
	// Stdout is where the processes' stdout goes. StdoutOnScreen says it
	// is the same terminal: the area is erased before its lines too and
	// drawn again after them. Otherwise (stdout redirected) its lines never
	// touch the area.
	Stdout         io.Writer
	StdoutOnScreen bool
	// Size reports the terminal's columns and rows (nil: 80 × 24).
	Size func() (cols, rows int)
	// Resized, when set, says the size changed (SIGWINCH): the area is
	// laid out again at once.
	Resized <-chan struct{}
	// Color allows colours in the area.
	Color bool
	// Interval is how often the area may be laid out again (default
	// 100ms: at most ten times a second).
	Interval time.Duration
}

// Terminal is the Screen of a run on a terminal: the lines scroll as
// they always did, and under them a status area shows what runs now
// (processes, sessions in a turn, requests waiting for a decision). Lines
// gather for a few milliseconds, then the batch is written as "erase the
// area, the lines, the area" in one write, so a line is never cut by the
// area and the area always sits under the last line. The area's content is laid out again at most every
// Interval; a line that is not finished (a piece of a long line, a prompt)
// keeps the area away until it is. Nothing in the terminal's modes is
// changed: no cursor hiding, no alternate screen, no raw mode; so a run
// that dies leaves at worst an area's last picture, and one that ends
// (finished, failed, interrupted) erases it.
//
// It is also an event.Sink: subscribe it before the sink that writes the
// lines, so that it knows of a prompt before the prompt's text is written.
type Terminal struct {
	bus      *event.Bus
	opt      TerminalOptions
	w        [2]vecWriter // stdout, stderr
	onScreen [2]bool

	drawn     int    // lines of the area on screen now (0: none)
	area      []byte // the area as last laid out
	areaLines int
	laidOut   time.Time
	prev      []byte // the layout before, kept to tell whether a redraw changes anything
	width     int    // the width the area was laid out for
	version   uint64 // the State.Version it was laid out at
	midLine   bool   // the cursor is in the middle of a line
	hidden    bool   // a prompt is open
	closed    bool

	erase    []byte // the erase sequence for an area of eraseFor lines
	eraseFor int
	iov      [3][]byte
	stop     chan struct{}

	// Lines for the screen wait in pend (all of one stream, pendSlot) for
	// at most flushDelay or until batchBytes gather, then go out with one
	// erase and one area: a stream of small chunks pays for the area once
	// per batch, not once per chunk.
	pend     []byte
	pendSlot int
	flusher  *time.Timer
	armed    bool
}

// Batching of lines on the screen: a person sees no 15 ms delay, and a
// terminal that takes 30-40 MB/s spends a tenth of a millisecond on a
// redraw of the area, which 64 KiB of lines make small.
const (
	flushDelay = 15 * time.Millisecond
	batchBytes = 64 << 10
)

// NewTerminal returns the terminal screen of the run on bus and starts
// its redraws; they stop at the End event.
func NewTerminal(bus *event.Bus, opt TerminalOptions) *Terminal {
	if opt.Interval <= 0 {
		opt.Interval = 100 * time.Millisecond
	}
	if opt.Size == nil {
		opt.Size = func() (int, int) { return 80, 24 }
	}
	t := &Terminal{bus: bus, opt: opt, stop: make(chan struct{})}
	t.w[0], t.w[1] = newVecWriter(opt.Stdout), newVecWriter(opt.Stderr)
	t.onScreen = [2]bool{opt.StdoutOnScreen, true}
	t.flusher = time.AfterFunc(time.Hour, t.timedFlush)
	t.flusher.Stop()
	go t.redraws()
	return t
}

func slot(s wire.Stream) int {
	if s == wire.Stderr {
		return 1
	}
	return 0
}

// Write implements Screen: p goes above the area, with the lines written
// before it in the last few milliseconds. Called under the bus's lock.
func (t *Terminal) Write(stream wire.Stream, p []byte) {
	i := slot(stream)
	if len(p) == 0 {
		return
	}
	if t.closed || !t.onScreen[i] {
		t.w[i].write(t.vec(p))
		return
	}
	if t.hidden {
		// A prompt is open: its text, and whatever else comes meanwhile,
		// goes out at once; the area is off the screen already.
		t.flush()
		t.midLine = p[len(p)-1] != '\n'
		t.w[i].write(t.vec(p))
		return
	}
	if len(t.pend) > 0 && t.pendSlot != i {
		t.flush() // stdout and stderr keep their order
	}
	t.pend = append(t.pend, p...)
	t.pendSlot = i
	if len(t.pend) >= batchBytes {
		t.flush()
		return
	}
	if !t.armed {
		t.armed = true
		t.flusher.Reset(flushDelay)
	}
}

// flush writes the lines waiting, as "erase the area, the lines, the
// area" in one write (lock held). The area stays away after a line that
// is not finished.
func (t *Terminal) flush() {
	if len(t.pend) == 0 {
		return
	}
	erase := t.eraseArea()
	t.midLine = t.pend[len(t.pend)-1] != '\n'
	var area []byte
	if !t.midLine && !t.hidden {
		area = t.layout(false)
		t.drawn = t.areaLines
	}
	t.w[t.pendSlot].write(t.vec(erase, t.pend, area))
	t.pend = t.pend[:0]
}

// timedFlush is the flusher's: the lines waited long enough.
func (t *Terminal) timedFlush() {
	t.bus.Lock()
	defer t.bus.Unlock()
	t.armed = false
	if !t.closed {
		t.flush()
	}
}

// vec fills the scratch list of buffers: no allocation per write.
func (t *Terminal) vec(bufs ...[]byte) [][]byte {
	n := copy(t.iov[:], bufs)
	return t.iov[:n]
}

// eraseArea returns what takes the area off the screen (nothing when it
// is not there) and counts it gone: back to the first column, up to the
// area's first line, erase to the end of the screen.
func (t *Terminal) eraseArea() []byte {
	if t.drawn == 0 {
		return nil
	}
	if t.eraseFor != t.drawn { // made once per area height: no allocation per write
		t.erase = append(append(append(t.erase[:0], '\r'), cursorUp(t.drawn)...), eraseScreenBelow...)
		t.eraseFor = t.drawn
	}
	t.drawn = 0
	return t.erase
}

// layout returns the area, laid out again when the last layout is older
// than the interval, when the state changed more than a last line since
// (a process started or ended, a request came), or when forced. A flood
// of lines costs one layout per interval.
func (t *Terminal) layout(force bool) []byte {
	now := t.bus.Now()
	version := t.bus.State().Version
	if !force && t.area != nil && version == t.version && now.Sub(t.laidOut) < t.opt.Interval {
		return t.area
	}
	t.version = version
	cols, rows := t.opt.Size()
	t.prev, t.area = t.area, t.prev
	t.area, t.areaLines = renderArea(t.area[:0], t.bus.State(), now, cols, rows, t.opt.Color)
	t.laidOut, t.width = now, cols
	if t.area == nil {
		t.area = []byte{} // laid out, and empty
	}
	return t.area
}

// Handle implements event.Sink.
func (t *Terminal) Handle(_ time.Time, e event.Event) {
	switch e.(type) {
	case *event.Prompt:
		// Off the screen before the question is written.
		if !t.hidden {
			t.flush()
			if erase := t.eraseArea(); erase != nil {
				t.w[1].write(t.vec(erase))
			}
			t.hidden = true
		}
	case *event.PromptDone:
		// The answer's newline was typed on the terminal.
		t.hidden, t.midLine = false, false
		t.redraw(true)
	case *event.End:
		t.close()
	}
}

// redraws lays the area out again every interval and when the terminal
// is resized, until the End event.
func (t *Terminal) redraws() {
	tick := time.NewTicker(t.opt.Interval)
	defer tick.Stop()
	for {
		select {
		case <-tick.C:
		case <-t.opt.Resized:
		case <-t.stop:
			return
		}
		t.bus.Lock()
		if !t.closed {
			t.redraw(false)
		}
		t.bus.Unlock()
	}
}

// redraw writes the area again when it changed (lock held).
func (t *Terminal) redraw(force bool) {
	if t.closed || t.hidden {
		return
	}
	if len(t.pend) > 0 {
		t.flush() // lays the area out too
		return
	}
	if t.midLine {
		return
	}
	width := t.width
	area := t.layout(true)
	if !force && t.width == width && t.drawn == t.areaLines && bytes.Equal(area, t.prev) {
		return
	}
	erase := t.eraseArea()
	t.drawn = t.areaLines
	t.w[1].write(t.vec(erase, area))
}

// close takes the area off the screen for good and stops the redraws.
func (t *Terminal) close() {
	if t.closed {
		return
	}
	t.flush()
	if erase := t.eraseArea(); erase != nil {
		t.w[1].write(t.vec(erase))
	}
	t.closed = true
	t.flusher.Stop()
	close(t.stop)
}

// eraseScreenBelow (ED) erases from the cursor to the end of the screen.
const eraseScreenBelow = "\x1b[J"

// cursorUp (CUU) moves the cursor n lines up: "\x1b[A" for one, as
// x/ansi writes it.
func cursorUp(n int) string {
	if n > 1 {
		return "\x1b[" + strconv.Itoa(n) + "A"
	}
	return "\x1b[A"
}
