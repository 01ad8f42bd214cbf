package agent

import "bytes"

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
