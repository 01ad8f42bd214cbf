package event

import (
	"bytes"
	"encoding/json"
	"strings"
)

// Marker is what a secret is replaced with in every event, so in
// everything the run writes (RECIPES.md: `redact(value)`).
const Marker = "***"

// MinSecret is the length of the shortest value redacted. Shorter values
// ("1", "yes", "dev") would match all over the output and wreck it while
// hiding nothing a guess would not find; a token is never that short.
const MinSecret = 4

// secrets is the set of values the bus replaces with Marker.
//
// The search is one bytes.Index per pattern, not an automaton
// (Aho-Corasick): a recipe registers a handful of secrets (a token or
// two, a .env file's values), and bytes.Index finds a pattern's first
// byte with the vectorised IndexByte and compares from there, several GB/s
// per pass, so a few passes over a chunk cost less than an automaton's
// byte-at-a-time walk. Each pattern's next match is remembered between
// replacements (see redact), so a chunk with many matches is still read
// once per pattern.
type secrets struct {
	pats [][]byte
	// first marks the first bytes of pats: only there can a chunk's tail
	// be the start of a secret that the next chunk finishes.
	first   [256]bool
	longest int
	next    []int // scratch for redact: each pattern's next match
}

// add registers s and the forms it takes inside JSON text (an agent's
// messages, a hook's output): its escaped string, with and without Go's
// HTML escapes. It reports whether s is long enough to be redacted.
func (ss *secrets) add(s string, forms ...string) bool {
	if len(s) < MinSecret {
		return false
	}
	ss.addPattern(s)
	for _, f := range append(forms, jsonForms(s)...) {
		ss.addPattern(f)
	}
	return true
}

func (ss *secrets) addPattern(p string) {
	if len(p) < MinSecret {
		return
	}
	for _, q := range ss.pats {
		if string(q) == p {
			return
		}
	}
	ss.pats = append(ss.pats, []byte(p))
	ss.first[p[0]] = true
	ss.longest = max(ss.longest, len(p))
	ss.next = make([]int, len(ss.pats))
}

// jsonForms are s as it appears inside a JSON string, where that differs
// from s.
func jsonForms(s string) []string {
	var forms []string
	if b, err := json.Marshal(s); err == nil {
		forms = append(forms, string(b[1:len(b)-1]))
	}
	var buf bytes.Buffer
	enc := json.NewEncoder(&buf)
	enc.SetEscapeHTML(false)
	if enc.Encode(s) == nil {
		b := bytes.TrimSuffix(buf.Bytes(), []byte("\n"))
		forms = append(forms, string(b[1:len(b)-1]))
	}
	return forms
}

func (ss *secrets) empty() bool { return len(ss.pats) == 0 }

// redact appends buf to dst with every secret replaced by Marker,
// leftmost match first and the longest of those starting at one place.
// With hold, it stops before the tail of buf that could be the start of a
// secret the next chunk completes, and returns where that tail starts
// (len(buf) without hold): the caller keeps buf[kept:] and puts it before
// the next chunk. The tail is a proper prefix of a secret, so shorter than
// the longest.
//
// Redacting a stream chunk by chunk this way gives what redacting all of
// it at once gives: a match is replaced only when it starts before the
// tail, and then no match starting earlier or at the same place could
// reach past the chunk (it would make the tail start earlier).
func (ss *secrets) redact(dst, buf []byte, hold bool) (out []byte, kept int) {
	for k := range ss.next {
		ss.next[k] = -2 // not searched yet
	}
	h := len(buf)
	if hold {
		h = ss.holdFrom(buf, 0)
	}
	p := 0
	for {
		s, e := ss.leftmost(buf, p)
		if s < 0 || s >= h {
			return append(dst, buf[p:h]...), h
		}
		dst = append(dst, buf[p:s]...)
		dst = append(dst, Marker...)
		p = e
		if p > h {
			h = ss.holdFrom(buf, p)
		}
	}
}

// leftmost returns the first match in buf at or after p (the longest of
// those starting there), or -1.
func (ss *secrets) leftmost(buf []byte, p int) (start, end int) {
	start, end = -1, -1
	for k, pat := range ss.pats {
		n := ss.next[k]
		if n != -1 && n < p { // not searched yet, or a match already passed
			n = -1
			if i := bytes.Index(buf[p:], pat); i >= 0 {
				n = p + i
			}
			ss.next[k] = n
		}
		if n < 0 {
			continue
		}
		if start < 0 || n < start || n == start && n+len(pat) > end {
			start, end = n, n+len(pat)
		}
	}
	return start, end
}

// holdFrom returns the first i >= p such that buf[i:] is a proper prefix
// of a secret, or len(buf).
func (ss *secrets) holdFrom(buf []byte, p int) int {
	for i := max(p, len(buf)-ss.longest+1); i < len(buf); i++ {
		if !ss.first[buf[i]] {
			continue
		}
		for _, pat := range ss.pats {
			if len(pat) > len(buf)-i && bytes.HasPrefix(pat, buf[i:]) {
				return i
			}
		}
	}
	return len(buf)
}

// String returns s redacted (s itself when it holds no secret).
func (ss *secrets) String(s string) string {
	if ss.empty() || !ss.contains(s) {
		return s
	}
	out, _ := ss.redact(nil, []byte(s), false)
	return string(out)
}

func (ss *secrets) contains(s string) bool {
	for _, p := range ss.pats {
		if strings.Contains(s, string(p)) {
			return true
		}
	}
	return false
}

// JSON returns the JSON text m redacted. A secret outside a JSON string
// (a number, a key's name) would leave it invalid: then the whole of it
// is the JSON string Marker.
func (ss *secrets) JSON(m json.RawMessage) json.RawMessage {
	if ss.empty() || !ss.contains(string(m)) {
		return m
	}
	out, _ := ss.redact(nil, m, false)
	if !json.Valid(out) {
		return json.RawMessage(`"` + Marker + `"`)
	}
	return out
}
