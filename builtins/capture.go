package builtins

import "bytes"

// DefaultOutputCap is how many bytes of each stream a process keeps for
// Result.stdout/.stderr and Process.output(): run's output_cap default, and
// the fixed cap of spawn.
const DefaultOutputCap = 16 << 20

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
	for _, r := range c.readers {
		r.pending = append(r.pending, data...)
		r.signal()
	}
}

// truncated reports whether bytes beyond the limit were dropped.
func (c *capture) truncated() bool { return c.total > int64(len(c.buf)) }

// end marks the stream complete and wakes its readers.
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
// from the beginning, and says so.
func (c *capture) reader() *lineReader {
	if c.truncated() {
		return nil
	}
	r := &lineReader{pending: append([]byte(nil), c.buf...), wake: make(chan struct{}, 1), ended: c.ended}
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

// lineReader is the queue of one lines() iteration. Its fields are guarded
// by the Process's mutex, except wake.
type lineReader struct {
	pending []byte
	ended   bool
	wake    chan struct{} // a pending signal means "look again"
}

func (r *lineReader) signal() {
	select {
	case r.wake <- struct{}{}:
	default:
	}
}

// next pops the next line without its newline (and a "\r" before it). At
// the end of the stream a last unterminated line is returned too. ok is
// false when no line is ready yet, or, with done set, when none will come.
func (r *lineReader) next() (line string, ok, done bool) {
	if i := bytes.IndexByte(r.pending, '\n'); i >= 0 {
		line := r.pending[:i]
		r.pending = r.pending[i+1:]
		return string(bytes.TrimSuffix(line, []byte{'\r'})), true, false
	}
	if !r.ended {
		return "", false, false
	}
	if len(r.pending) > 0 {
		line := string(r.pending)
		r.pending = nil
		return line, true, false
	}
	return "", false, true
}
