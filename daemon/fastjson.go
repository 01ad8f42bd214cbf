package daemon

import (
	"bytes"
	"encoding/base64"
	"encoding/json"
	"reflect"
	"strconv"
	"strings"
	"sync"
	"unicode/utf8"

	"github.com/seed5ad92d46/sous/daemon/wire"
)

// The request fast path. encoding/json scans a request line four or five
// times (validate, decode the envelope, skip the params, validate and decode
// them again), byte by byte: a 1 MiB process.stdin line cost the daemon
// ~15 ms, and stdin moved at 1% of a pipe's speed. These functions read the
// common shapes in one validating pass, strings found with IndexByte.
//
// They are exact by construction: each one either returns what
// encoding/json would have produced, or reports !ok and the caller uses
// encoding/json. Anything unusual (an escape in a key, a key that matches a
// field only case-insensitively, a value of an unexpected type, a syntax
// error) takes the slow path, which also produces the error replies. The
// differential fuzz test FuzzFastPath holds them to it.

// parseRequestFast is json.Unmarshal(line, &req) for a well-formed request
// object.
func parseRequestFast(line []byte) (req wire.Request, ok bool) {
	ok = forEachMember(line, func(key, val []byte, esc bool) bool {
		switch string(key) {
		case "id":
			req.ID = val
		case "params":
			req.Params = val
		case "jsonrpc":
			return fastString(val, esc, &req.JSONRPC, knownVersions)
		case "method":
			return fastString(val, esc, &req.Method, knownMethods())
		case "auth":
			return fastString(val, esc, &req.Auth, nil)
		default:
			return !foldsToAny(string(key), requestFields)
		}
		return true
	})
	return req, ok
}

var requestFields = []string{"jsonrpc", "id", "method", "params", "auth"}

// knownVersions and knownMethods are the strings a request's jsonrpc and
// method almost always hold, each mapped to itself, so that parsing one
// takes the existing string instead of allocating a copy per request.
var (
	knownVersions = map[string]string{"2.0": "2.0"}
	// Built with namespaces, on the first request.
	knownMethods = sync.OnceValue(func() map[string]string {
		m := map[string]string{}
		for ns, methods := range namespaces() {
			for name := range methods {
				m[ns+"."+name] = ns + "." + name
			}
		}
		m["server.shutdown"] = "server.shutdown" // answered by handle itself
		return m
	})
)

// stdinParams are the fields process.stdin reads.
type stdinParams struct {
	ID     string
	Data   []byte // base64-decoded
	Offset *int64
	Close  bool
}

// decodeStdinFast decodes process.stdin's params object: the id, data,
// offset and close members, with the data base64-decoded straight from the
// line into a buffer from alloc. dataErr reports invalid base64 (the params
// themselves were fine).
func decodeStdinFast(raw []byte, alloc func(n int) []byte) (p stdinParams, dataErr, ok bool) {
	var data []byte
	ok = forEachMember(raw, func(key, val []byte, esc bool) bool {
		switch string(key) {
		case "id":
			return fastString(val, esc, &p.ID, nil)
		case "data":
			if string(val) == "null" {
				return true
			}
			if val[0] != '"' || esc {
				return false
			}
			data = val[1 : len(val)-1] // the last one wins, as in encoding/json
		case "offset":
			if string(val) == "null" {
				p.Offset = nil
				return true
			}
			n, err := strconv.ParseInt(string(val), 10, 64)
			if err != nil {
				return false // a fraction, an exponent, out of range, or not a number
			}
			p.Offset = &n
		case "close":
			return fastBool(val, &p.Close) // fastspawn.go
		default:
			// Every other field of the namespace's struct is type-checked by
			// the slow path; keys of no field are ignored.
			return !foldsToAny(string(key), processFields())
		}
		return true
	})
	if !ok {
		return p, false, false
	}
	buf := alloc(base64.StdEncoding.DecodedLen(len(data)))
	n, err := wire.DecodeBase64(buf, data)
	if err != nil {
		return p, true, true
	}
	p.Data = buf[:n]
	return p, false, true
}

// processFields are the JSON names of wire.ProcessParams' fields, read from
// the struct so that an added field cannot be missed here; on first use
// rather than at init, which every start of sous (a recipe's too) paid.
var processFields = sync.OnceValue(func() []string { return jsonNames(reflect.TypeFor[wire.ProcessParams]()) })

func jsonNames(t reflect.Type) []string {
	var names []string
	for f := range t.Fields() {
		if name, _, _ := strings.Cut(f.Tag.Get("json"), ","); name != "" && name != "-" {
			names = append(names, name)
		}
	}
	return names
}

// forEachMember validates the JSON document doc and calls f with each member
// of its top-level object in order; esc tells whether a string value holds
// an escape. It reports false when doc is not valid JSON or not an object,
// when a key has an escape or a non-ASCII byte (encoding/json's key matching
// is then subtle enough to leave to it), or when f returns false.
func forEachMember(doc []byte, f func(key, val []byte, esc bool) bool) bool {
	s := scanner{b: doc}
	s.ws()
	if !s.eat('{') {
		return false
	}
	s.ws()
	if s.eat('}') {
		return s.end()
	}
	for {
		s.ws()
		start := s.i
		s.esc = false
		if s.i >= len(doc) || doc[s.i] != '"' || !s.string() || s.esc {
			return false
		}
		key := doc[start+1 : s.i-1]
		for _, c := range key {
			if c >= 0x80 {
				return false
			}
		}
		s.ws()
		if !s.eat(':') {
			return false
		}
		s.ws()
		vstart := s.i
		s.esc = false
		if !s.value(1) || !f(key, doc[vstart:s.i], s.esc) {
			return false
		}
		s.ws()
		if s.eat('}') {
			return s.end()
		}
		if !s.eat(',') {
			return false
		}
	}
}

// fastString stores a JSON string without escapes in *dst, taken from
// known when it is one of its keys; null leaves *dst as it is
// (encoding/json does the same). Other values, and strings with invalid
// UTF-8 (which encoding/json rewrites), are not for the fast path.
func fastString(val []byte, esc bool, dst *string, known map[string]string) bool {
	if string(val) == "null" {
		return true
	}
	if val[0] != '"' || esc || !utf8.Valid(val) {
		return false
	}
	text := val[1 : len(val)-1]
	if s, ok := known[string(text)]; ok {
		*dst = s
		return true
	}
	*dst = string(text)
	return true
}

// foldsToAny reports whether key matches one of fields case-insensitively,
// which is how encoding/json matches keys to fields.
func foldsToAny(key string, fields []string) bool {
	for _, f := range fields {
		if strings.EqualFold(key, f) {
			return true
		}
	}
	return false
}

// validJSON is json.Valid for the documents the fast path takes: it never
// reports true for what json.Valid rejects (it may report false for valid
// documents it does not care to handle, such as very deep ones).
func validJSON(doc []byte) bool {
	s := scanner{b: doc}
	s.ws()
	return s.value(0) && s.end()
}

// maxFastDepth bounds the nesting the fast path follows; deeper documents
// take the slow path (encoding/json has its own limit).
const maxFastDepth = 64

// scanner validates JSON (RFC 8259, as encoding/json's scanner does).
type scanner struct {
	b   []byte
	i   int
	esc bool // a string scanned since it was last cleared held an escape
}

// end reports whether only whitespace is left.
func (s *scanner) end() bool {
	s.ws()
	return s.i == len(s.b)
}

func (s *scanner) ws() {
	for s.i < len(s.b) {
		switch s.b[s.i] {
		case ' ', '\t', '\n', '\r':
			s.i++
		default:
			return
		}
	}
}

func (s *scanner) eat(c byte) bool {
	if s.i < len(s.b) && s.b[s.i] == c {
		s.i++
		return true
	}
	return false
}

// value scans one value.
func (s *scanner) value(depth int) bool {
	if s.i >= len(s.b) || depth > maxFastDepth {
		return false
	}
	switch c := s.b[s.i]; {
	case c == '"':
		return s.string()
	case c == '{':
		return s.object(depth + 1)
	case c == '[':
		return s.array(depth + 1)
	case c == 't':
		return s.literal("true")
	case c == 'f':
		return s.literal("false")
	case c == 'n':
		return s.literal("null")
	case c == '-' || c >= '0' && c <= '9':
		return s.number()
	}
	return false
}

func (s *scanner) object(depth int) bool {
	s.i++ // {
	s.ws()
	if s.eat('}') {
		return true
	}
	for {
		s.ws()
		if s.i >= len(s.b) || s.b[s.i] != '"' || !s.string() {
			return false
		}
		s.ws()
		if !s.eat(':') {
			return false
		}
		s.ws()
		if !s.value(depth) {
			return false
		}
		s.ws()
		if s.eat('}') {
			return true
		}
		if !s.eat(',') {
			return false
		}
	}
}

func (s *scanner) array(depth int) bool {
	return s.elements(func() bool { return s.value(depth) })
}

// elements scans the array at s.i, with element scanning each of its
// elements (from its first byte, white space skipped); it reports false
// when the array is malformed or element does.
func (s *scanner) elements(element func() bool) bool {
	if !s.eat('[') {
		return false
	}
	s.ws()
	if s.eat(']') {
		return true
	}
	for {
		s.ws()
		if !element() {
			return false
		}
		s.ws()
		if s.eat(']') {
			return true
		}
		if !s.eat(',') {
			return false
		}
	}
}

func (s *scanner) literal(lit string) bool {
	if !bytes.HasPrefix(s.b[s.i:], []byte(lit)) {
		return false
	}
	s.i += len(lit)
	return true
}

// string scans a string literal. The run up to the next quote or backslash
// is found with IndexByte and checked for control characters a word at a
// time; escapes are checked one by one. Invalid UTF-8 is accepted, as
// encoding/json accepts it.
func (s *scanner) string() bool {
	s.i++ // "
	for {
		rest := s.b[s.i:]
		q := bytes.IndexByte(rest, '"')
		if q < 0 {
			return false
		}
		run := rest[:q]
		if bs := bytes.IndexByte(run, '\\'); bs >= 0 {
			run = run[:bs]
			if wire.HasControl(run) {
				return false
			}
			s.i += bs
			if !s.escape() {
				return false
			}
			s.esc = true
			continue
		}
		if wire.HasControl(run) {
			return false
		}
		s.i += q + 1
		return true
	}
}

// escape checks one escape sequence at s.i (the backslash).
func (s *scanner) escape() bool {
	if s.i+1 >= len(s.b) {
		return false
	}
	switch s.b[s.i+1] {
	case '"', '\\', '/', 'b', 'f', 'n', 'r', 't':
		s.i += 2
		return true
	case 'u':
		if s.i+6 > len(s.b) {
			return false
		}
		for _, c := range s.b[s.i+2 : s.i+6] {
			if !(c >= '0' && c <= '9' || c >= 'a' && c <= 'f' || c >= 'A' && c <= 'F') {
				return false
			}
		}
		s.i += 6
		return true
	}
	return false
}

func (s *scanner) number() bool {
	s.eat('-')
	switch {
	case s.eat('0'):
	case s.i < len(s.b) && s.b[s.i] >= '1' && s.b[s.i] <= '9':
		s.digits()
	default:
		return false
	}
	if s.eat('.') && !s.digits() {
		return false
	}
	if s.eat('e') || s.eat('E') {
		if !s.eat('+') {
			s.eat('-')
		}
		if !s.digits() {
			return false
		}
	}
	return true
}

// digits scans one or more digits.
func (s *scanner) digits() bool {
	start := s.i
	for s.i < len(s.b) && s.b[s.i] >= '0' && s.b[s.i] <= '9' {
		s.i++
	}
	return s.i > start
}

// decodeRequest parses a request line: the fast path, else encoding/json.
func decodeRequest(line []byte) (wire.Request, error) {
	if req, ok := parseRequestFast(line); ok {
		return req, nil
	}
	var req wire.Request
	err := json.Unmarshal(line, &req)
	return req, err
}
