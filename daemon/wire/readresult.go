package wire

import (
	"encoding/json"
	"errors"
	"unicode/utf8"
	"unsafe"
)

// files.read answers carry a whole file as one JSON string. Through
// encoding/json, a 400 MB file took 9 s and 3.3 GB of memory from the file
// to the recipe's string on the embedded daemon: Marshal grows a buffer by
// doubling and copies it out, Unmarshal validates the answer, unquotes into
// a buffer and copies that into a string. Here the daemon reads the file
// into the answer's own buffer and escapes it there (ReadAnswer), and the
// client unescapes it where it lies (ReadResult.DecodeOwned), so that one
// buffer goes from the file to the recipe.

const (
	readHead      = `{"content":"`
	readTailTrue  = `","exists":true}`
	readTailFalse = `","exists":false}`
)

// ReadAnswer is files.read's answer being built around a file read
// straight into it: Content is where the file goes, at the end of a
// buffer with room before it for the escapes of a typical text (a
// sixteenth of its size), so that Encode can escape it in place.
type ReadAnswer struct {
	buf []byte
	at  int // where Content starts
}

// NewReadAnswer makes room for a content of size bytes.
func NewReadAnswer(size int) *ReadAnswer {
	room := len(readHead) + size/16 + 64
	buf := make([]byte, room+size+len(readTailTrue))
	return &ReadAnswer{buf: buf, at: room}
}

// Content is the buffer to read the file into.
func (a *ReadAnswer) Content() []byte { return a.buf[a.at : len(a.buf)-len(readTailTrue)] }

// Encode returns the answer for the first n bytes of Content, which exist:
// byte for byte what json.Marshal(ReadResult{...}) gives. The answer takes
// the buffer over when the escapes fit the room before Content, and is
// encoded into a new buffer otherwise.
func (a *ReadAnswer) Encode(n int) json.RawMessage {
	content := a.buf[a.at : a.at+n]
	q := quotedLen(content)
	if len(readHead)+q-n > a.at || len(readHead)+q+len(readTailTrue) > len(a.buf) {
		return AppendReadResult(nil, content, true)
	}
	// Writing from the start never overtakes reading: no byte encodes
	// shorter than itself, so after any prefix of the content the output
	// has grown by at most what the whole content grows, which the room
	// before Content holds.
	dst := append(a.buf[:0], readHead...)
	dst = appendQuoted(dst, content)
	return append(dst, readTailTrue...)
}

// AppendReadResult appends files.read's result for content, byte for byte
// what json.Marshal(ReadResult{string(content), exists}) gives, growing dst
// once to the exact size.
func AppendReadResult(dst, content []byte, exists bool) []byte {
	tail := readTailFalse
	if exists {
		tail = readTailTrue
	}
	dst = growExact(dst, len(readHead)+quotedLen(content)+len(tail))
	dst = append(dst, readHead...)
	dst = appendQuoted(dst, content)
	return append(dst, tail...)
}

func growExact(b []byte, n int) []byte {
	if cap(b)-len(b) >= n {
		return b
	}
	nb := make([]byte, len(b), len(b)+n)
	copy(nb, b)
	return nb
}

// escapeLen is, per ASCII byte, how many bytes encoding/json writes for it
// inside a string (with its HTML escaping): 1 for most, 2 for \n and its
// kind, 6 for \u00XX.
var escapeLen = func() (t [utf8.RuneSelf]uint8) {
	for b := range t {
		switch {
		case b == '\\' || b == '"' || b == '\b' || b == '\f' || b == '\n' || b == '\r' || b == '\t':
			t[b] = 2
		case b < 0x20 || b == '<' || b == '>' || b == '&':
			t[b] = 6
		default:
			t[b] = 1
		}
	}
	return t
}()

// quotedLen is the length of s once quoted by appendQuoted, without the
// quotes.
func quotedLen(s []byte) int {
	n := 0
	for i := 0; i < len(s); {
		if b := s[i]; b < utf8.RuneSelf {
			n += int(escapeLen[b])
			i++
			continue
		}
		r, size := utf8.DecodeRune(s[i:])
		switch {
		case r == utf8.RuneError && size == 1, r == '\u2028', r == '\u2029':
			n += 6
		default:
			n += size
		}
		i += size
	}
	return n
}

// appendQuoted appends s as the inside of a JSON string, escaped as
// encoding/json escapes it: invalid UTF-8 as \ufffd, U+2028 and U+2029,
// control characters, and <, > and & for HTML.
func appendQuoted(dst, s []byte) []byte {
	const hex = "0123456789abcdef"
	start := 0
	for i := 0; i < len(s); {
		b := s[i]
		if b < utf8.RuneSelf {
			if escapeLen[b] == 1 {
				i++
				continue
			}
			dst = append(dst, s[start:i]...)
			switch b {
			case '\\', '"':
				dst = append(dst, '\\', b)
			case '\b':
				dst = append(dst, '\\', 'b')
			case '\f':
				dst = append(dst, '\\', 'f')
			case '\n':
				dst = append(dst, '\\', 'n')
			case '\r':
				dst = append(dst, '\\', 'r')
			case '\t':
				dst = append(dst, '\\', 't')
			default:
				dst = append(dst, '\\', 'u', '0', '0', hex[b>>4], hex[b&0xF])
			}
			i++
			start = i
			continue
		}
		r, size := utf8.DecodeRune(s[i:])
		switch {
		case r == utf8.RuneError && size == 1:
			dst = append(dst, s[start:i]...)
			dst = append(dst, `\ufffd`...)
		case r == '\u2028' || r == '\u2029':
			dst = append(dst, s[start:i]...)
			dst = append(dst, '\\', 'u', '2', '0', '2', hex[r&0xF])
		default:
			i += size
			continue
		}
		i += size
		start = i
	}
	return append(dst, s[start:]...)
}

// readResultFields is ReadResult without its UnmarshalJSON: what an answer
// in any other layout decodes through.
type readResultFields ReadResult

// UnmarshalJSON decodes files.read's result. The layout every daemon sends,
// {"content":"...","exists":bool}, is read in one pass into a string of the
// exact size; anything else goes through encoding/json.
func (r *ReadResult) UnmarshalJSON(b []byte) error { return r.decode(b, false) }

// DecodeOwned is UnmarshalJSON for an answer the caller gives up: the
// content is unescaped where it lies in b, and the string is b's memory.
// The caller must not touch b again.
func (r *ReadResult) DecodeOwned(b []byte) error { return r.decode(b, true) }

func (r *ReadResult) decode(b []byte, inPlace bool) error {
	if len(b) < len(readHead) || string(b[:len(readHead)]) != readHead {
		return json.Unmarshal(b, (*readResultFields)(r))
	}
	body := b[len(readHead):]
	n, end, err := scanString(body)
	if err != nil {
		if errors.Is(err, errUnusual) {
			return json.Unmarshal(b, (*readResultFields)(r))
		}
		return err
	}
	switch string(body[end+1:]) {
	case readTailTrue[1:]:
		r.Exists = true
	case readTailFalse[1:]:
		r.Exists = false
	default:
		return json.Unmarshal(b, (*readResultFields)(r))
	}
	r.Content = unquote(body[:end], n, inPlace)
	return nil
}

// errUnusual is an escape unquote leaves to encoding/json (a surrogate
// pair, or one that is not valid): rare enough not to be worth its code.
var errUnusual = errors.New("unusual escape")

// errBadString is JSON that no encoder writes: a control character or an
// unknown escape inside a string, or one that does not end.
var errBadString = errors.New("files.read result: invalid JSON string")

// scanString finds the closing quote of the JSON string whose inside
// starts s, checking the string on the way, and returns how long it
// decodes to and where that quote is.
func scanString(s []byte) (n, end int, err error) {
	for i := 0; i < len(s); {
		b := s[i]
		switch {
		case b == '"':
			return n, i, nil
		case b < 0x20:
			return 0, 0, errBadString
		case b == '\\':
			if i+1 >= len(s) {
				return 0, 0, errBadString
			}
			switch s[i+1] {
			case '"', '\\', '/', 'b', 'f', 'n', 'r', 't':
				n++
				i += 2
			case 'u':
				r, ok := hexRune(s[i+2:])
				if !ok {
					return 0, 0, errBadString
				}
				if r >= 0xd800 && r < 0xe000 {
					return 0, 0, errUnusual
				}
				n += utf8.RuneLen(r)
				i += 6
			default:
				return 0, 0, errBadString
			}
		case b >= utf8.RuneSelf:
			// encoding/json replaces invalid UTF-8 with U+FFFD; a daemon
			// escapes it, so it is left to encoding/json.
			r, size := utf8.DecodeRune(s[i:])
			if r == utf8.RuneError && size == 1 {
				return 0, 0, errUnusual
			}
			n += size
			i += size
		default:
			n++
			i++
		}
	}
	return 0, 0, errBadString
}

// unquote decodes s, the inside of a JSON string that scanString checked
// and found to decode to n bytes. In place, it writes over s, which
// unescaping never overtakes (no escape is shorter than what it stands
// for); otherwise into a new buffer of n bytes. Either way nothing else
// refers to the bytes once this returns, so the string is made of them.
func unquote(s []byte, n int, inPlace bool) string {
	if n == 0 {
		return ""
	}
	out := s[:0]
	if !inPlace {
		out = make([]byte, 0, n)
	}
	start := 0
	for i := 0; i < len(s); {
		if s[i] != '\\' {
			i++
			continue
		}
		out = append(out, s[start:i]...)
		switch c := s[i+1]; c {
		case 'b':
			out = append(out, '\b')
		case 'f':
			out = append(out, '\f')
		case 'n':
			out = append(out, '\n')
		case 'r':
			out = append(out, '\r')
		case 't':
			out = append(out, '\t')
		case 'u':
			r, _ := hexRune(s[i+2:])
			out = utf8.AppendRune(out, r)
			i += 6
			start = i
			continue
		default: // '"', '\\', '/'
			out = append(out, c)
		}
		i += 2
		start = i
	}
	out = append(out, s[start:]...)
	return unsafe.String(unsafe.SliceData(out), len(out))
}

// hexRune reads the four hex digits of a \u escape.
func hexRune(s []byte) (rune, bool) {
	if len(s) < 4 {
		return 0, false
	}
	var r rune
	for _, c := range s[:4] {
		switch {
		case c >= '0' && c <= '9':
			c -= '0'
		case c >= 'a' && c <= 'f':
			c = c - 'a' + 10
		case c >= 'A' && c <= 'F':
			c = c - 'A' + 10
		default:
			return 0, false
		}
		r = r<<4 | rune(c)
	}
	return r, true
}
