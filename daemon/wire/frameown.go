package wire

import (
	"bytes"
	"encoding/base64"
)

// The daemon's own output frames (AppendFrame) have one layout:
//
//	{"type":"stream","processId":ID,"stream":"stdout","seq":N,"data":"B64"[,"stage":K]}
//
// parseOwnLayout reads exactly that, and nothing else, without scanning the
// data for its closing quote and for escapes: the line's end says where the
// data ends, and the base64 decoder, which rejects '"' and '\\', proves that
// no quote ended the string earlier and that nothing in it was escaped.
// Every other byte of a frame line was already scanned twice before the
// decoder saw it (the reader's search for the line end, then these two
// searches): on a protocol client reading a child's output they were a fifth
// of its CPU. Anything else, a line whose data fails to decode included,
// is left to the general parser (ok false), which gives the error.
func parseOwnLayout(line []byte, f *Frame) (id []byte, ok bool) {
	line = bytes.TrimSuffix(line, []byte("\n")) // as AppendFrame ends it
	rest, found := bytes.CutPrefix(line, []byte(`{"type":"stream","processId":"`))
	if !found {
		return nil, false
	}
	end := bytes.IndexByte(rest, '"')
	if end < 0 {
		return nil, false
	}
	id = rest[:end]
	if bytes.IndexByte(id, '\\') >= 0 || HasControl(id) {
		return nil, false // escapes and errors: the general parser's
	}
	rest, found = bytes.CutPrefix(rest[end:], []byte(`","stream":"`))
	if !found {
		return nil, false
	}
	var stream Stream
	switch {
	case bytes.HasPrefix(rest, []byte(`stdout","seq":`)):
		stream, rest = Stdout, rest[len(`stdout","seq":`):]
	case bytes.HasPrefix(rest, []byte(`stderr","seq":`)):
		stream, rest = Stderr, rest[len(`stderr","seq":`):]
	default:
		return nil, false // exit frames and the like: small, and the general parser's
	}
	p := parser{b: rest}
	seq, err := p.int()
	if err != nil {
		return nil, false
	}
	data, found := bytes.CutPrefix(rest[p.i:], []byte(`,"data":"`))
	if !found {
		return nil, false
	}
	stage := 0
	switch {
	case bytes.HasSuffix(data, []byte(`"}`)):
		data = data[:len(data)-2]
	default:
		// `","stage":K}`, within the last few bytes.
		tail := data[max(0, len(data)-32):]
		i := bytes.LastIndex(tail, []byte(`","stage":`))
		if i < 0 || tail[len(tail)-1] != '}' {
			return nil, false
		}
		sp := parser{b: tail[:len(tail)-1], i: i + len(`","stage":`)}
		k, err := sp.int()
		if err != nil || sp.i != len(sp.b) || k < 0 || k >= maxStages {
			return nil, false
		}
		stage = int(k) + 1
		data = data[:len(data)-len(tail)+i]
	}
	out := f.Data[:0]
	if len(data) > 0 {
		n := base64.StdEncoding.DecodedLen(len(data))
		if cap(out) < n {
			out = make([]byte, n)
		}
		m, err := fastStd().Decode(out[:n], data)
		if err != nil || !checkDataLen(len(data), m) {
			return nil, false
		}
		out = out[:m]
	}
	f.Seq, f.Stream, f.Data, f.Stage = seq, stream, out, stage
	f.ExitCode, f.StageCodes, f.TimedOut, f.Signal, f.Mirrored = 0, f.StageCodes[:0], false, 0, false
	return id, true
}
