package builtins

import (
	"bytes"
	"fmt"
	"io"
	"os"
	"slices"
	"sync"
)

// DefaultOutputCap is how many bytes of each stream a process keeps for
// Result.stdout/.stderr and Process.output(): run's output_cap default, and
// the fixed cap of spawn.
const DefaultOutputCap = 16 << 20

// LinesBound is how many bytes of unread output one Process.lines()
// iteration holds in memory. Past it, the rest goes to a file, up to
// LinesSpillCap. The process is never held back for a slow loop (see
// Process.onFrame).
const LinesBound = 4 << 20

// LinesSpillCap is how many bytes of unread output one lines() iteration
// keeps on disk beyond LinesBound; a recipe further behind than that fails
// its iteration rather than fill the disk.
const LinesSpillCap = 1 << 30

// LinesLimits bound what one Process.lines() iteration holds (Config.Lines);
// a zero field takes LinesBound or LinesSpillCap.
type LinesLimits struct {
	Bound    int   // unread bytes in memory
	SpillCap int64 // unread bytes in the spill file
	// Stats, when set, records the most any finished iteration held (for
	// tests and diagnostics).
	Stats *LinesStats
}

func (l LinesLimits) bound() int {
	if l.Bound > 0 {
		return l.Bound
	}
	return LinesBound
}

func (l LinesLimits) spillCap() int64 {
	if l.SpillCap > 0 {
		return l.SpillCap
	}
	return LinesSpillCap
}

// LinesStats are the high-water marks of finished lines() iterations.
type LinesStats struct {
	mu      sync.Mutex
	peak    int
	spilled int64
}

// Take returns and resets the most unread bytes a finished iteration held
// in memory, and the most it put in its spill file.
func (s *LinesStats) Take() (peak int, spilled int64) {
	s.mu.Lock()
	defer s.mu.Unlock()
	peak, spilled = s.peak, s.spilled
	s.peak, s.spilled = 0, 0
	return peak, spilled
}

func (s *LinesStats) record(peak int, spilled int64) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.peak = max(s.peak, peak)
	s.spilled = max(s.spilled, spilled)
}

// maxLine is the longest line lines() yields: a line is one string in
// memory, so it is bounded as output() is.
const maxLine = DefaultOutputCap

// capture keeps the first limit bytes of one output stream and feeds the
// live readers of Process.lines(). It is guarded by its Process's mutex.
type capture struct {
	limit   int
	buf     []byte
	total   int64 // bytes received, kept or not
	readers []*lineReader
	ended   bool
}

// add records a chunk. data is only valid during the call: everything kept
// is copied.
func (c *capture) add(data []byte) {
	c.total += int64(len(data))
	if room := c.limit - len(c.buf); room > 0 {
		c.buf = append(c.buf, data[:min(room, len(data))]...)
	}
	for i := 0; i < len(c.readers); {
		r := c.readers[i]
		r.push(data)
		if r.err != nil {
			c.readers = append(c.readers[:i], c.readers[i+1:]...) // fed no more: what it holds comes first
			continue
		}
		i++
	}
}

// truncated reports whether bytes beyond the limit were dropped.
func (c *capture) truncated() bool { return c.total > int64(len(c.buf)) }

// end marks the stream complete and wakes its readers: what they hold is
// all they yield.
func (c *capture) end() {
	c.ended = true
	for _, r := range c.readers {
		r.ended = true
		r.signal()
	}
	c.readers = nil
}

// reader starts a line reader holding everything captured so far, so that
// lines() called after spawn misses nothing. It returns nil when output was
// already dropped (the capture is truncated): then lines() cannot start
// from the beginning, and says so. name says whose stream it reads, for
// errors.
func (c *capture) reader(name string, lim LinesLimits) *lineReader {
	if c.truncated() {
		return nil
	}
	r := &lineReader{name: name, bound: lim.bound(), spillCap: lim.spillCap(), maxLine: maxLine,
		stats: lim.Stats, wake: make(chan struct{}, 1)}
	r.push(c.buf)
	r.ended = c.ended
	if !c.ended {
		c.readers = append(c.readers, r)
	}
	return r
}

// detach stops feeding r (the recipe stopped iterating).
func (c *capture) detach(r *lineReader) {
	for i, x := range c.readers {
		if x == r {
			c.readers = append(c.readers[:i], c.readers[i+1:]...)
			return
		}
	}
}

// lineReader is the queue of one lines() iteration: up to bound unread
// bytes in memory, then the rest in order in a spill file. Its fields are
// guarded by the Process's mutex, except wake.
type lineReader struct {
	name     string // "process ID's stdout", for errors
	bound    int    // LinesLimits.Bound
	spillCap int64  // LinesLimits.SpillCap
	maxLine  int    // maxLine, smaller in tests

	buf     []byte // the unread bytes in memory are buf[off:]
	off     int
	scanned int // buf[off:off+scanned] holds no newline: the next search starts after it
	spill   *spill
	peak    int   // the most unread bytes buf held
	spilled int64 // bytes written to the spill file
	stats   *LinesStats

	ended bool
	err   error         // why feeding stopped early: yielded once what came before is read
	wake  chan struct{} // a pending signal means "look again"
}

func (r *lineReader) signal() {
	select {
	case r.wake <- struct{}{}:
	default:
	}
}

// push appends data: to memory while it fits the bound and nothing waits
// on disk before it, else to the spill file. data is only valid during the
// call.
func (r *lineReader) push(data []byte) {
	if r.ended || r.err != nil || len(data) == 0 {
		return
	}
	defer r.signal()
	unread := len(r.buf) - r.off
	if (r.spill == nil || r.spill.unread() == 0) && (unread == 0 || unread+len(data) <= r.bound) {
		r.appendMem(data)
		return
	}
	if r.spill == nil {
		s, err := newSpill()
		if err != nil {
			r.fail(fmt.Errorf("%s: the recipe fell more than %s behind and the rest cannot be kept: %v", r.name, formatBytes(int64(r.bound)), err))
			return
		}
		r.spill = s
	}
	if r.spill.unread()+int64(len(data)) > r.spillCap {
		r.fail(fmt.Errorf("the recipe fell more than %s behind %s (lines() holds %s in memory and %s on disk); the lines after the last one read are lost",
			formatBytes(int64(r.bound)+r.spillCap), r.name, formatBytes(int64(r.bound)), formatBytes(r.spillCap)))
		return
	}
	r.spilled += int64(len(data))
	if err := r.spill.write(data); err != nil {
		r.fail(fmt.Errorf("%s: keeping output the recipe has not read yet: %v", r.name, err))
	}
}

// appendMem appends data to buf, moving the unread bytes to its start
// rather than growing it when that makes room.
func (r *lineReader) appendMem(data []byte) {
	if r.off > 0 && len(r.buf)+len(data) > cap(r.buf) && len(r.buf)-r.off+len(data) <= cap(r.buf) {
		n := copy(r.buf, r.buf[r.off:])
		r.buf, r.off = r.buf[:n], 0
	}
	r.buf = append(r.buf, data...)
	r.peak = max(r.peak, len(r.buf)-r.off)
}

// fail stops feeding r: what it holds is still read, then the iteration
// fails with err.
func (r *lineReader) fail(err error) {
	r.err = err
}

// done records the reader's high-water marks once the iteration is over.
func (r *lineReader) done() {
	if r.stats != nil {
		r.stats.record(r.peak, r.spilled)
	}
}

// close lets go of the spill file.
func (r *lineReader) close() {
	if r.spill != nil {
		r.spill.f.Close()
		r.spill = nil
	}
}

// next pops the next line without its newline (and a "\r" before it). At
// the end of the stream a last unterminated line is returned too. ok is
// false when no line is ready yet, or, with done set, when none will come:
// then r.err, when set, says why the stream stopped short.
func (r *lineReader) next() (line string, ok, done bool) {
	for {
		unread := r.buf[r.off:]
		if i := bytes.IndexByte(unread[r.scanned:], '\n'); i >= 0 {
			i += r.scanned
			r.off += i + 1
			r.scanned = 0
			if r.off == len(r.buf) {
				r.buf, r.off = r.buf[:0], 0
			}
			return string(bytes.TrimSuffix(unread[:i], []byte{'\r'})), true, false
		}
		r.scanned = len(unread)
		if len(unread) > r.maxLine && r.err == nil {
			r.fail(fmt.Errorf("a line of %s is longer than the %s lines() yields", r.name, formatBytes(int64(r.maxLine))))
			r.close()
		}
		if r.spill != nil && r.spill.unread() > 0 {
			if err := r.refill(); err != nil {
				r.fail(fmt.Errorf("%s: reading back output the recipe had not read yet: %v", r.name, err))
				r.close()
			}
			continue
		}
		switch {
		case r.err != nil:
			r.buf, r.off, r.scanned = nil, 0, 0 // a partial line before the gap is no line
			return "", false, true
		case !r.ended:
			return "", false, false
		case len(unread) > 0:
			line := string(unread)
			r.buf, r.off, r.scanned = nil, 0, 0
			return line, true, false
		}
		r.close()
		return "", false, true
	}
}

// refill moves up to half the bound from the spill file to memory.
func (r *lineReader) refill() error {
	n := copy(r.buf, r.buf[r.off:])
	r.buf, r.off = r.buf[:n], 0
	want := int(min(r.spill.unread(), int64(max(r.bound/2, 1))))
	r.buf = slices.Grow(r.buf, want)[:n+want] // grows only for a long line
	if err := r.spill.read(r.buf[n:]); err != nil {
		return err
	}
	r.peak = max(r.peak, len(r.buf))
	return nil
}

// spill is a lines() iteration's unread output on disk: an unlinked
// temporary file, read from the front as it is appended to.
type spill struct {
	f    *os.File
	r, w int64 // read and write offsets
}

func newSpill() (*spill, error) {
	f, err := os.CreateTemp("", "sous-lines-*")
	if err != nil {
		return nil, err
	}
	os.Remove(f.Name()) // the file lives as long as it is open
	return &spill{f: f}, nil
}

func (s *spill) unread() int64 { return s.w - s.r }

func (s *spill) write(data []byte) error {
	n, err := s.f.WriteAt(data, s.w)
	s.w += int64(n)
	return err
}

// read fills dst from the front; once everything is read, the file is
// emptied, so that a recipe that caught up holds no disk either.
func (s *spill) read(dst []byte) error {
	n, err := s.f.ReadAt(dst, s.r)
	s.r += int64(n)
	if err != nil && !(err == io.EOF && n == len(dst)) {
		return err
	}
	if s.r == s.w {
		s.r, s.w = 0, 0
		return s.f.Truncate(0)
	}
	return nil
}

// formatBytes renders a byte count in MiB or GiB as the docs state bounds.
func formatBytes(n int64) string {
	if n >= 1<<30 && n%(1<<30) == 0 {
		return fmt.Sprintf("%d GiB", n>>30)
	}
	if n >= 1<<20 && n%(1<<20) == 0 {
		return fmt.Sprintf("%d MiB", n>>20)
	}
	return fmt.Sprintf("%d bytes", n)
}
