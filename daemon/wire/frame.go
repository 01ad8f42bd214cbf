package wire

import (
	"bytes"
	"encoding/base64" // lengths only: the data goes through base64.go's vectorized codec
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"strconv"
	"unicode/utf8"
)

// Stream names which of a process's streams a frame belongs to.
type Stream uint8

// The streams of a process. Exit is the last frame of every process.
const (
	Stdout Stream = iota + 1
	Stderr
	Exit
)

func (s Stream) String() string {
	switch s {
	case Stdout:
		return "stdout"
	case Stderr:
		return "stderr"
	case Exit:
		return "exit"
	}
	return "stream(" + strconv.Itoa(int(s)) + ")"
}

// ParseStream maps a wire stream name to a Stream.
func ParseStream(name string) (Stream, bool) {
	switch name {
	case "stdout":
		return Stdout, true
	case "stderr":
		return Stderr, true
	case "exit":
		return Exit, true
	}
	return 0, false
}

// Frame is one stream notification, decoded: Data holds raw bytes, not base64.
// A Frame's Data is never modified once the frame is published, so frames are
// shared between the replay log and every subscriber without copying.
type Frame struct {
	Seq      int64
	Stream   Stream
	Data     []byte
	ExitCode int

	// The members below belong to extensions; they are zero for the frames
	// of an ordinary process, whose lines stay byte-identical to claustrum's.

	// Stage is 1 + the index of the pipeline stage that wrote a stderr frame
	// (wire member "stage", from 0), and 0 for every other frame
	// (process.spawn.pipeline).
	Stage int
	// StageCodes are the exit codes of a pipeline's stages, in order, on its
	// exit frame (wire member "stageExitCodes"; process.spawn.pipeline). A
	// stage that a signal ended reports 128+signal, as a shell does.
	StageCodes []int
	// TimedOut marks the exit frame of a process the daemon killed because
	// its timeoutMs passed (wire member "timedOut", sent only when true;
	// process.spawn.timeout).
	TimedOut bool
	// Signal is the signal that ended the process, on its exit frame (wire
	// member "signal", sent only when a signal ended it and the spawn asked
	// for it; process.spawn.exitsignal).
	Signal int

	// Mirrored marks output the daemon also wrote to the mirror its
	// spawner gave (proc.Spec.Mirror), as it read it: that spawner must not
	// write it out again. Only the spawner's subscription sees the mark
	// (the daemon clears it for every other); on the wire, such a frame
	// carries "mirrored":true instead of its data (process.spawn.mirror).
	Mirrored bool
}

// StageIndex is the pipeline stage (from 0) that wrote the frame, or -1.
func (f *Frame) StageIndex() int { return f.Stage - 1 }

// Size is the number of bytes the frame accounts for in memory budgets: the
// capacity of its data (a frame may keep a whole read buffer alive) plus a
// fixed cost for the frame itself.
func (f *Frame) Size() int { return cap(f.Data) + 8*cap(f.StageCodes) + 64 }

// QuoteID returns the JSON string literal of a process id, so the hot path can
// splice it into every frame without escaping it again.
func QuoteID(id string) []byte {
	return AppendJSONString(make([]byte, 0, len(id)+2), id)
}

// AppendFrame appends the NDJSON line of f (newline included) for the process
// whose quoted id is quotedID. It is the encoder of the hot path: no
// reflection, base64 straight into dst.
func AppendFrame(dst, quotedID []byte, f *Frame) []byte {
	return appendFrame(dst, quotedID, f, false)
}

// appendFrame is AppendFrame, or, with binary set and f an output frame
// that carries data, the header line of its binary form
// (AppendBinaryFrame): "dataBytes":N where the data would be.
func appendFrame(dst, quotedID []byte, f *Frame, binary bool) []byte {
	dst = append(dst, `{"type":"stream","processId":`...)
	dst = append(dst, quotedID...)
	dst = append(dst, `,"stream":"`...)
	dst = append(dst, f.Stream.String()...)
	dst = append(dst, `","seq":`...)
	dst = strconv.AppendInt(dst, f.Seq, 10)
	if f.Stream == Exit {
		dst = append(dst, `,"exitCode":`...)
		dst = strconv.AppendInt(dst, int64(f.ExitCode), 10)
		if len(f.StageCodes) > 0 {
			dst = append(dst, `,"stageExitCodes":[`...)
			for i, c := range f.StageCodes {
				if i > 0 {
					dst = append(dst, ',')
				}
				dst = strconv.AppendInt(dst, int64(c), 10)
			}
			dst = append(dst, ']')
		}
		if f.TimedOut {
			dst = append(dst, `,"timedOut":true`...)
		}
		if f.Signal > 0 {
			dst = append(dst, `,"signal":`...)
			dst = strconv.AppendInt(dst, int64(f.Signal), 10)
		}
	} else {
		switch {
		case f.Mirrored:
			// The spawner has the bytes already: only their seq travels.
			dst = append(dst, `,"mirrored":true`...)
		case binary:
			dst = append(dst, `,"dataBytes":`...)
			dst = strconv.AppendInt(dst, int64(len(f.Data)), 10)
		default:
			dst = append(dst, `,"data":"`...)
			dst = AppendBase64(dst, f.Data)
			dst = append(dst, '"')
		}
		if f.Stage > 0 {
			dst = append(dst, `,"stage":`...)
			dst = strconv.AppendInt(dst, int64(f.Stage-1), 10)
		}
	}
	return append(dst, "}\n"...)
}

func growBy(b []byte, n int) []byte {
	if cap(b)-len(b) >= n {
		return b
	}
	nb := make([]byte, len(b), 2*cap(b)+n)
	copy(nb, b)
	return nb
}

var streamPrefix = []byte(`"type":"stream"`)

// IsFrameLine reports whether line looks like a stream notification rather than
// a response. Responses never carry a "type" member.
func IsFrameLine(line []byte) bool {
	// Our daemon and claustrum put "type" first; accept any position.
	return bytes.Contains(line, streamPrefix)
}

// ErrNotFrame is returned by ParseFrame for a line that is not a stream frame.
var ErrNotFrame = errors.New("not a stream frame")

// ParseFrame decodes a stream notification line into f, reusing the storage
// of f.Data (and of f.StageCodes) for the decoded bytes, and returns the
// process id. The id is returned as a slice of line (or of scratch storage
// when it had escapes): callers that keep it must copy it. Members may come
// in any order; unknown members are skipped. The extension members "stage",
// "stageExitCodes", "timedOut", "signal" and "mirrored" are read into Stage,
// StageCodes, TimedOut, Signal and Mirrored.
func ParseFrame(line []byte, f *Frame) (id []byte, err error) {
	if id, ok := parseOwnLayout(line, f); ok {
		return id, nil
	}
	var dataBytes int
	id, err = parseFrame(line, f, &dataBytes)
	if err == nil && dataBytes >= 0 {
		// A binary frame's header (binframe.go), read as a whole frame:
		// its data is not in this line.
		return nil, errors.New(`frame: "dataBytes" outside a binary frame`)
	}
	return id, err
}

// parseFrame is ParseFrame for any layout. It sets *dataBytes to a binary
// frame header's "dataBytes" member (connection.binaryFrames), checked to
// be an integer within 0..MaxFrameData on an output frame with no "data"
// and not mirrored, or to -1 when the member is absent.
func parseFrame(line []byte, f *Frame, dataBytes *int) (id []byte, err error) {
	*dataBytes = -1
	p := parser{b: line}
	p.ws()
	if !p.eat('{') {
		return nil, ErrNotFrame
	}
	var sawType, sawID, sawStream, sawSeq bool
	var rawData []byte
	var dataEscaped bool
	f.Seq, f.ExitCode, f.Stream = 0, 0, 0
	f.Stage, f.StageCodes, f.TimedOut, f.Signal, f.Mirrored = 0, f.StageCodes[:0], false, 0, false
	for first := true; ; first = false {
		p.ws()
		if p.eat('}') {
			break
		}
		if !first && !p.eat(',') {
			return nil, p.errf("want , or }")
		}
		p.ws()
		key, kesc, err := p.str(true)
		if err != nil {
			return nil, err
		}
		if kesc {
			key = unescape(key)
		}
		p.ws()
		if !p.eat(':') {
			return nil, p.errf("want :")
		}
		p.ws()
		switch string(key) {
		case "type":
			v, _, err := p.str(true)
			if err != nil {
				return nil, err
			}
			if string(v) != "stream" {
				return nil, ErrNotFrame
			}
			sawType = true
		case "processId":
			v, esc, err := p.str(true)
			if err != nil {
				return nil, err
			}
			if esc {
				v = unescape(v)
			}
			id, sawID = v, true
		case "stream":
			v, _, err := p.str(true)
			if err != nil {
				return nil, err
			}
			s, ok := ParseStream(string(v))
			if !ok {
				return nil, fmt.Errorf("frame: unknown stream %q", v)
			}
			f.Stream, sawStream = s, true
		case "seq":
			n, err := p.int()
			if err != nil {
				return nil, err
			}
			f.Seq, sawSeq = n, true
		case "exitCode":
			n, err := p.int()
			if err != nil {
				return nil, err
			}
			f.ExitCode = int(n)
		case "stage":
			if p.peek() == 'n' { // null: no stage
				if err := p.skip(); err != nil {
					return nil, err
				}
				continue
			}
			n, err := p.int()
			if err != nil {
				return nil, err
			}
			if n < 0 || n >= maxStages {
				return nil, p.errf("stage out of range")
			}
			f.Stage = int(n) + 1
		case "stageExitCodes":
			if err := p.ints(&f.StageCodes); err != nil {
				return nil, err
			}
		case "timedOut":
			b, err := p.bool()
			if err != nil {
				return nil, err
			}
			f.TimedOut = b
		case "signal":
			n, err := p.int()
			if err != nil {
				return nil, err
			}
			if n < 0 || n > maxSignal {
				return nil, p.errf("signal out of range")
			}
			f.Signal = int(n)
		case "mirrored":
			b, err := p.bool()
			if err != nil {
				return nil, err
			}
			f.Mirrored = b
		case "dataBytes":
			if p.peek() < '0' || p.peek() > '9' {
				return nil, p.errf("dataBytes: want a count of bytes")
			}
			n, err := p.int()
			if err != nil {
				return nil, err
			}
			if n > MaxFrameData {
				return nil, p.errf(fmt.Sprintf("dataBytes %d over the %d a frame carries", n, MaxFrameData))
			}
			*dataBytes = int(n)
		case "data":
			if p.peek() == 'n' { // null
				if err := p.skip(); err != nil {
					return nil, err
				}
				continue
			}
			// The data's control characters are checked after decoding it,
			// far cheaper than scanning it twice (see checkDataLen).
			v, esc, err := p.str(false)
			if err != nil {
				return nil, err
			}
			rawData, dataEscaped = v, esc
		default:
			if err := p.skip(); err != nil {
				return nil, err
			}
		}
	}
	if !sawType {
		return nil, ErrNotFrame
	}
	if !sawID || !sawStream || !sawSeq {
		return nil, errors.New("frame: missing processId, stream or seq")
	}
	if *dataBytes >= 0 && (f.Stream == Exit || f.Mirrored || rawData != nil) {
		return nil, errors.New(`frame: "dataBytes" on a frame that carries no data of its own`)
	}
	f.Data = f.Data[:0]
	if f.Stream != Exit && len(rawData) > 0 {
		if dataEscaped {
			rawData = unescape(rawData) // e.g. "\/" from encoders that escape slashes
		}
		n := base64.StdEncoding.DecodedLen(len(rawData))
		if cap(f.Data) < n {
			f.Data = make([]byte, n)
		}
		m, err := DecodeBase64(f.Data[:n], rawData)
		if err != nil {
			return nil, fmt.Errorf("frame: data: %w", err)
		}
		if !dataEscaped && !checkDataLen(len(rawData), m) {
			return nil, errors.New("frame: data: control character in string")
		}
		f.Data = f.Data[:m]
	}
	return id, nil
}

type parser struct {
	b []byte
	i int
}

func (p *parser) errf(msg string) error {
	return fmt.Errorf("frame: at byte %d: %s", p.i, msg)
}

func (p *parser) ws() {
	for p.i < len(p.b) {
		switch p.b[p.i] {
		case ' ', '\t', '\r', '\n':
			p.i++
		default:
			return
		}
	}
}

func (p *parser) peek() byte {
	if p.i < len(p.b) {
		return p.b[p.i]
	}
	return 0
}

func (p *parser) eat(c byte) bool {
	if p.i < len(p.b) && p.b[p.i] == c {
		p.i++
		return true
	}
	return false
}

// checkDataLen reports whether n decoded bytes account for all rawLen
// base64 characters. The decoder rejects every control character except
// '\r' and '\n', which it skips; skipped characters leave the decoded length
// short of rawLen/4*3 less the padding, so this catches them without a scan
// of the data. (A padded payload has a length divisible by 4, so there are
// at least 4 skipped characters, costing at least 3 bytes.)
func checkDataLen(rawLen, n int) bool {
	return rawLen%4 == 0 && n >= rawLen/4*3-2
}

// str scans a string literal and returns its raw contents (escapes not
// decoded) and whether it contained any escape. It is on the hot path (the
// data member is most of every frame), so the common case, a string with no
// escape, is found with IndexByte and checked a word at a time. With
// control false, an escape-free string is not checked for control
// characters: the caller does it.
func (p *parser) str(control bool) ([]byte, bool, error) {
	if !p.eat('"') {
		return nil, false, p.errf("want string")
	}
	start := p.i
	end := bytes.IndexByte(p.b[start:], '"')
	if end < 0 {
		return nil, false, p.errf("unterminated string")
	}
	s := p.b[start : start+end]
	if bytes.IndexByte(s, '\\') >= 0 {
		return p.strEscaped(start)
	}
	if control && HasControl(s) {
		p.i = start
		return nil, false, p.errf("control character in string")
	}
	p.i = start + end + 1
	return s, false, nil
}

// strEscaped scans, byte by byte, a string that contains escapes, from just
// after its opening quote.
func (p *parser) strEscaped(start int) ([]byte, bool, error) {
	p.i = start
	for p.i < len(p.b) {
		switch c := p.b[p.i]; {
		case c == '"':
			s := p.b[start:p.i]
			p.i++
			return s, true, nil
		case c == '\\':
			p.i += 2
		case c < 0x20:
			return nil, false, p.errf("control character in string")
		default:
			p.i++
		}
	}
	return nil, false, p.errf("unterminated string")
}

// HasControl reports whether s holds a byte below 0x20, which JSON forbids
// unescaped in strings. Eight bytes at a time: a byte b < 0x20 is one where
// b-0x20 borrows, that is sets the high bit while b's own high bit is clear.
func HasControl(s []byte) bool {
	const lo, hi = 0x2020202020202020, 0x8080808080808080
	for len(s) >= 32 { // four words per test: this runs over every stdin payload
		w0 := binary.LittleEndian.Uint64(s)
		w1 := binary.LittleEndian.Uint64(s[8:])
		w2 := binary.LittleEndian.Uint64(s[16:])
		w3 := binary.LittleEndian.Uint64(s[24:])
		if ((w0-lo)&^w0|(w1-lo)&^w1|(w2-lo)&^w2|(w3-lo)&^w3)&hi != 0 {
			return true
		}
		s = s[32:]
	}
	for len(s) >= 8 {
		w := binary.LittleEndian.Uint64(s)
		if (w-lo)&^w&hi != 0 {
			return true
		}
		s = s[8:]
	}
	for _, c := range s {
		if c < 0x20 {
			return true
		}
	}
	return false
}

func (p *parser) int() (int64, error) {
	start := p.i
	p.eat('-')
	for p.i < len(p.b) && p.b[p.i] >= '0' && p.b[p.i] <= '9' {
		p.i++
	}
	n, err := strconv.ParseInt(string(p.b[start:p.i]), 10, 64)
	if err != nil {
		return 0, p.errf("want integer")
	}
	return n, nil
}

// maxStages bounds the stage index a frame may name.
const maxStages = 1 << 16

// maxSignal bounds the signal number an exit frame may name (Linux's are
// 1-64).
const maxSignal = 127

// ints scans an array of integers (or null) into *dst, reusing its storage.
func (p *parser) ints(dst *[]int) error {
	*dst = (*dst)[:0]
	if p.peek() == 'n' {
		return p.skip()
	}
	if !p.eat('[') {
		return p.errf("want array")
	}
	p.ws()
	if p.eat(']') {
		return nil
	}
	for {
		p.ws()
		n, err := p.int()
		if err != nil {
			return err
		}
		if len(*dst) >= maxStages {
			return p.errf("too many stages")
		}
		*dst = append(*dst, int(n))
		p.ws()
		if p.eat(']') {
			return nil
		}
		if !p.eat(',') {
			return p.errf("want , or ]")
		}
	}
}

// bool scans true, false or null (false).
func (p *parser) bool() (bool, error) {
	for _, lit := range [...]string{"true", "false", "null"} {
		if end := p.i + len(lit); end <= len(p.b) && string(p.b[p.i:end]) == lit {
			p.i = end
			return lit == "true", nil
		}
	}
	return false, p.errf("want boolean")
}

// skip passes over one JSON value of any kind.
func (p *parser) skip() error {
	depth := 0
	for {
		p.ws()
		switch c := p.peek(); {
		case c == '"':
			if _, _, err := p.str(true); err != nil {
				return err
			}
		case c == '{' || c == '[':
			depth++
			p.i++
			continue
		case c == '}' || c == ']':
			if depth == 0 {
				return p.errf("unexpected close")
			}
			depth--
			p.i++
		case c == ',' || c == ':':
			if depth == 0 {
				return p.errf("unexpected separator")
			}
			p.i++
			continue
		case c == 0:
			return p.errf("unexpected end")
		default: // number, true, false, null
			start := p.i
			for p.i < len(p.b) && !bytes.ContainsRune([]byte(" \t\r\n,}]:"), rune(p.b[p.i])) {
				p.i++
			}
			if p.i == start {
				return p.errf("bad value")
			}
		}
		if depth == 0 {
			return nil
		}
		p.ws()
		if c := p.peek(); c == ',' || c == ':' {
			p.i++
		}
	}
}

// unescape decodes the escapes of a raw JSON string body. Invalid escapes are
// kept as they are; a frame's id and data never carry them from a sane peer.
func unescape(s []byte) []byte {
	quoted := make([]byte, 0, len(s)+2)
	quoted = append(quoted, '"')
	quoted = append(quoted, s...)
	quoted = append(quoted, '"')
	var out string
	if err := json.Unmarshal(quoted, &out); err != nil || !utf8.ValidString(out) {
		return s
	}
	return []byte(out)
}
