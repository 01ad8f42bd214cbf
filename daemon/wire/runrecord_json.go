package wire

import (
	"encoding/json"
	"strconv"
	"time"
	"unicode/utf8"
)

// AppendJSON appends r as json.Marshal encodes it, byte for byte, given a
// Value as json.Marshal makes it: compact, with <, > and & escaped
// (json.Marshal would compact and escape any other; a reader decodes
// both alike, but Value must hold no newline, since a record travels in
// one protocol line). A durable run encodes a record or two for every
// call it makes, and encoding/json's reflection, with the check and
// compaction of Value that it does again, was most of what the journal
// cost the runner's CPU.
func (r *RunRecord) AppendJSON(dst []byte) ([]byte, error) {
	if len(r.Args) > 0 || (!r.At.IsZero() && !rfc3339Year(r.At)) {
		// The run's first record alone has Args, once a run; a time
		// json.Marshal refuses is its error to give. A copy, so that r
		// itself does not escape: every record's would, for this branch.
		c := *r
		p, err := json.Marshal(&c)
		return append(dst, p...), err
	}
	dst = append(dst, `{"k":`...)
	dst = AppendJSONString(dst, r.Kind)
	dst = appendStringField(dst, `,"run":`, r.Run)
	dst = appendStringField(dst, `,"recipe":`, r.Recipe)
	dst = appendStringField(dst, `,"dir":`, r.Dir)
	if !r.At.IsZero() {
		dst = append(dst, `,"at":"`...)
		dst = r.At.AppendFormat(dst, time.RFC3339Nano)
		dst = append(dst, '"')
	}
	dst = appendIntField(dst, `,"seq":`, int64(r.Seq))
	dst = appendStringField(dst, `,"fn":`, r.Fn)
	dst = appendStringField(dst, `,"file":`, r.File)
	dst = appendIntField(dst, `,"line":`, int64(r.Line))
	dst = appendStringField(dst, `,"hash":`, r.Hash)
	dst = appendStringField(dst, `,"show":`, r.Show)
	dst = appendStringField(dst, `,"call":`, r.Call)
	dst = appendStringField(dst, `,"host":`, r.Host)
	dst = appendIntField(dst, `,"within":`, int64(r.Within))
	if len(r.Value) > 0 {
		dst = append(dst, `,"value":`...)
		dst = append(dst, r.Value...)
	}
	if r.Failed {
		dst = append(dst, `,"failed":true`...)
	}
	dst = appendStringField(dst, `,"error":`, r.Error)
	dst = appendStringField(dst, `,"unkept":`, r.Unkept)
	dst = appendIntField(dst, `,"mark":`, r.Mark)
	dst = appendStringField(dst, `,"status":`, r.Status)
	dst = appendIntField(dst, `,"code":`, int64(r.Code))
	return append(dst, '}'), nil
}

// rfc3339Year says whether t's year is one time.Time's MarshalJSON
// accepts (it refuses the years RFC 3339 cannot write).
func rfc3339Year(t time.Time) bool {
	y := t.Year()
	if y < 0 || y > 9999 {
		return false
	}
	_, off := t.Zone()
	// MarshalJSON refuses an offset of 24 hours or more, which RFC 3339
	// cannot write either.
	return off > -24*3600 && off < 24*3600
}

// appendStringField appends key and s, unless s is empty (omitempty).
func appendStringField(dst []byte, key, s string) []byte {
	if s == "" {
		return dst
	}
	dst = append(dst, key...)
	return AppendJSONString(dst, s)
}

// appendIntField appends key and n, unless n is 0 (omitempty).
func appendIntField(dst []byte, key string, n int64) []byte {
	if n == 0 {
		return dst
	}
	dst = append(dst, key...)
	return strconv.AppendInt(dst, n, 10)
}

// AppendJSONString appends s as a JSON string, escaped as encoding/json
// escapes it (HTML characters included), so that a hand-written encoder
// makes the bytes json.Marshal makes.
func AppendJSONString(dst []byte, s string) []byte {
	dst = append(dst, '"')
	dst = appendQuotedString(dst, s)
	return append(dst, '"')
}

// appendQuotedString is appendQuoted of a string, without copying it into
// a []byte first when nothing in it needs escaping.
func appendQuotedString(dst []byte, s string) []byte {
	for i := 0; i < len(s); i++ {
		if !plainByte[s[i]] {
			return appendQuoted(dst, []byte(s))
		}
	}
	return append(dst, s...)
}

// plainByte says which bytes encoding/json writes as they are inside a
// string: ASCII but for controls, quote, backslash and <, >, &.
var plainByte = func() (t [256]bool) {
	for b := range utf8.RuneSelf {
		t[b] = escapeLen[b] == 1
	}
	return t
}()

// jsonInt reads b when it is a JSON integer that fits an int: an optional
// minus and digits, without leading zeros.
func jsonInt(b []byte) (int, bool) {
	digits := b
	if len(digits) > 0 && digits[0] == '-' {
		digits = digits[1:]
	}
	if len(digits) == 0 || len(digits) > 18 || (digits[0] == '0' && len(digits) > 1) {
		return 0, false
	}
	n := 0
	for _, c := range digits {
		if c < '0' || c > '9' {
			return 0, false
		}
		n = n*10 + int(c-'0')
	}
	if len(digits) < len(b) {
		n = -n
	}
	return n, true
}
