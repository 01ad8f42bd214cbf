package agent

import (
	"bytes"
	"sync"
)

// maxLine bounds one NDJSON message from the CLI. Tool results that embed
// whole files make multi-megabyte lines legitimate; a runaway line beyond
// this is dropped (and reported) rather than growing memory without limit.
const maxLine = 64 << 20

// lineSplitter reassembles stream frames into lines. A frame may end in the
// middle of a line or even of a UTF-8 character; bytes are only interpreted
// once a whole line is present, so a split character is rejoined for free.
type lineSplitter struct {
	partial  []byte
	dropping bool // skipping the rest of an oversized line
	dropped  int  // oversized lines skipped
}

// feed splits data into complete lines (without the newline) and calls emit
// with a copy of each; the remainder is kept for the next call.
func (ls *lineSplitter) feed(data []byte, emit func(line []byte)) {
	for len(data) > 0 {
		i := bytes.IndexByte(data, '\n')
		if i < 0 {
			if !ls.dropping {
				ls.partial = append(ls.partial, data...)
				if len(ls.partial) > maxLine {
					ls.partial, ls.dropping = nil, true
					ls.dropped++
				}
			}
			return
		}
		chunk := data[:i]
		data = data[i+1:]
		if ls.dropping {
			ls.dropping = false
			continue
		}
		var line []byte
		if len(ls.partial) > 0 {
			line = append(ls.partial, chunk...)
			ls.partial = nil
		} else {
			line = append([]byte(nil), chunk...)
		}
		line = bytes.TrimSuffix(line, []byte{'\r'})
		if len(bytes.TrimSpace(line)) == 0 {
			continue
		}
		if len(line) > maxLine {
			ls.dropped++
			continue
		}
		emit(line)
	}
}

// flush returns a final unterminated line, if any.
func (ls *lineSplitter) flush() []byte {
	p := ls.partial
	ls.partial = nil
	if ls.dropping || len(bytes.TrimSpace(p)) == 0 {
		return nil
	}
	return p
}

// tail keeps the last max bytes written to it: the CLI's stderr, for error
// messages, without letting a chatty CLI grow memory.
type tail struct {
	mu  sync.Mutex
	max int
	buf []byte
	cut bool // bytes were discarded from the front
}

func newTail(max int) *tail { return &tail{max: max} }

func (t *tail) Write(p []byte) {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.buf = append(t.buf, p...)
	if over := len(t.buf) - t.max; over > 0 {
		// Keep the buffer from creeping: copy down only when it has doubled.
		if len(t.buf) > 2*t.max {
			t.buf = append(t.buf[:0], t.buf[over:]...)
		} else {
			t.buf = t.buf[over:]
		}
		t.cut = true
	}
}

// String is the kept text, trimmed, marked when the front was cut.
func (t *tail) String() string {
	t.mu.Lock()
	defer t.mu.Unlock()
	s := string(bytes.TrimSpace(t.buf))
	if t.cut && s != "" {
		s = "..." + s
	}
	return s
}
