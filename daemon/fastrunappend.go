package daemon

import (
	"encoding/json"
	"reflect"
	"strconv"
	"sync"

	"github.com/seed5ad92d46/sous/daemon/wire"
)

// decodeRunParams decodes a run.* method's params: run.append's, which a
// durable run sends with about every effect it makes, in one pass
// (decodeRunAppendFast), the others and anything unusual with
// encoding/json. Through encoding/json, run.append's params were about
// three quarters of the daemon's CPU for a journal, on the path of the
// effect whose request came with them (a CPU profile of 9,000
// run("true") on a socket daemon: 0.16 s of the handler's 0.22 s).
func decodeRunParams[P any](raw json.RawMessage) (P, error) {
	var p P
	if ap, ok := any(&p).(*wire.RunAppendParams); ok {
		if fast, ok := decodeRunAppendFast(raw); ok {
			*ap = fast
			return p, nil
		}
	}
	return decodeParams[P](raw)
}

// runAppendFields are the JSON names of wire.RunAppendParams' fields.
var runAppendFields = sync.OnceValue(func() []string { return jsonNames(reflect.TypeFor[wire.RunAppendParams]()) })

// decodeRunAppendFast is decodeParams[wire.RunAppendParams], exact as the
// other fast paths are (fastjson.go): the records are the array's
// elements as they are written (encoding/json copies a json.RawMessage
// without looking into it, once the document is valid). Anything it does
// not read exactly reports !ok; FuzzFastPath holds it to encoding/json.
func decodeRunAppendFast(raw []byte) (p wire.RunAppendParams, ok bool) {
	ok = forEachMember(raw, func(key, val []byte, esc bool) bool {
		switch string(key) {
		case "run":
			return fastString(val, esc, &p.Run, nil)
		case "lease":
			return fastString(val, esc, &p.Lease, nil)
		case "at":
			if string(val) == "null" {
				return true
			}
			n, err := strconv.ParseInt(string(val), 10, 0) // a valid JSON number: no sign but a minus
			if err != nil {
				return false // a fraction, an exponent, out of range, or not a number
			}
			p.At = int(n)
			return true
		case "records":
			return fastRawArray(val, &p.Records)
		case "sync":
			return fastBool(val, &p.Sync)
		default:
			return !foldsToAny(string(key), runAppendFields())
		}
	})
	return p, ok
}

// fastRawArray stores the elements of val, a valid JSON array, as
// json.RawMessages (copied: the request's line may be a pooled buffer);
// null sets *dst to nil, as encoding/json does for a slice.
func fastRawArray(val []byte, dst *[]json.RawMessage) bool {
	if string(val) == "null" {
		*dst = nil
		return true
	}
	own := append([]byte(nil), val...)
	s := scanner{b: own}
	out := []json.RawMessage{}
	if !s.elements(func() bool {
		start := s.i
		ok := s.value(1)
		out = append(out, own[start:s.i:s.i])
		return ok
	}) {
		return false
	}
	*dst = out
	return true
}
