package wire

import (
	"bytes"
	"encoding/json"
	"strconv"
)

// The answers a client takes for every command it runs (process.spawn's,
// process.stdin's, run.append's) are small objects of numbers and
// booleans. encoding/json reads them by reflection, which cost a runner
// more CPU than the rest of their handling; they are read here in one
// pass when they have the layout a daemon writes, and through
// encoding/json otherwise (FuzzFlatResults holds the two to the same
// result and the same refusals).

// UnmarshalJSON reads process.spawn's answer.
func (r *SpawnResult) UnmarshalJSON(b []byte) error {
	v := *r // members absent from b keep what they held, as with encoding/json
	if readFlat(b, func(key, val []byte) bool {
		switch string(key) {
		case "success":
			return flatBool(val, &v.Success)
		case "pid":
			return flatInt(val, &v.Pid)
		case "startTime":
			return flatFloat(val, &v.StartTime)
		}
		return false
	}) {
		*r = v
		return nil
	}
	type fields SpawnResult // without this method
	return json.Unmarshal(b, (*fields)(r))
}

// UnmarshalJSON reads process.stdin's answer.
func (r *StdinResult) UnmarshalJSON(b []byte) error {
	v := *r
	if readFlat(b, func(key, val []byte) bool {
		switch string(key) {
		case "success":
			return flatBool(val, &v.Success)
		case "applied":
			var n int
			ok := flatInt(val, &n)
			v.Applied = int64(n)
			return ok
		case "duplicate":
			return flatBool(val, &v.Duplicate)
		}
		return false
	}) {
		*r = v
		return nil
	}
	type fields StdinResult
	return json.Unmarshal(b, (*fields)(r))
}

// UnmarshalJSON reads run.append's answer.
func (r *RunAppendResult) UnmarshalJSON(b []byte) error {
	v := *r
	if readFlat(b, func(key, val []byte) bool {
		return string(key) == "count" && flatInt(val, &v.Count)
	}) {
		*r = v
		return nil
	}
	type fields RunAppendResult
	return json.Unmarshal(b, (*fields)(r))
}

// readFlat calls member for each member of b, an object as a daemon
// writes it: no white space, keys of plain ASCII letters, values that are
// numbers or true or false, each key once. It reports false when b is not
// such an object or member refuses a value (a key it does not know
// exactly, a value it cannot take): encoding/json decides then. The
// result is built apart and stored only when readFlat says true, so a
// refusal half way leaves nothing behind.
func readFlat(b []byte, member func(key, val []byte) bool) bool {
	if len(b) < 2 || b[0] != '{' || b[len(b)-1] != '}' {
		return false
	}
	var seen [4][]byte // the members' keys so far: a repeated key is encoding/json's to settle
	n := 0
	for i := 1; i < len(b)-1; {
		if b[i] != '"' {
			return false
		}
		j := i + 1
		for j < len(b) && (b[j] >= 'a' && b[j] <= 'z' || b[j] >= 'A' && b[j] <= 'Z') {
			j++
		}
		if j+1 >= len(b) || b[j] != '"' || b[j+1] != ':' || j == i+1 {
			return false
		}
		key := b[i+1 : j]
		k := j + 2
		for k < len(b)-1 && b[k] != ',' {
			k++
		}
		if n == len(seen) {
			return false
		}
		for _, s := range seen[:n] {
			if bytes.Equal(s, key) {
				return false
			}
		}
		seen[n] = key
		n++
		if !member(key, b[j+2:k]) {
			return false
		}
		if k == len(b)-1 {
			return true
		}
		i = k + 1
		if i == len(b)-1 { // a trailing comma
			return false
		}
	}
	return n == 0
}

func flatBool(val []byte, dst *bool) bool {
	switch string(val) {
	case "true":
		*dst = true
	case "false":
		*dst = false
	default:
		return false
	}
	return true
}

// flatInt reads a JSON integer (an optional minus and digits, no leading
// zero) that fits an int.
func flatInt(val []byte, dst *int) bool {
	n, ok := jsonInt(val)
	if ok {
		*dst = n
	}
	return ok
}

// flatFloat reads a JSON number as encoding/json reads it into a float64.
func flatFloat(val []byte, dst *float64) bool {
	if !jsonNumber(val) {
		return false
	}
	f, err := strconv.ParseFloat(string(val), 64)
	if err != nil {
		return false
	}
	*dst = f
	return true
}

// jsonNumber says whether b is a number in JSON's grammar: -?int frac? exp?
// (strconv.ParseFloat also takes what JSON does not: inf, hex, "+1").
func jsonNumber(b []byte) bool {
	i := 0
	if i < len(b) && b[i] == '-' {
		i++
	}
	digits := func() int {
		start := i
		for i < len(b) && b[i] >= '0' && b[i] <= '9' {
			i++
		}
		return i - start
	}
	switch {
	case i < len(b) && b[i] == '0':
		i++
	case digits() == 0:
		return false
	}
	if i < len(b) && b[i] == '.' {
		i++
		if digits() == 0 {
			return false
		}
	}
	if i < len(b) && (b[i] == 'e' || b[i] == 'E') {
		i++
		if i < len(b) && (b[i] == '+' || b[i] == '-') {
			i++
		}
		if digits() == 0 {
			return false
		}
	}
	return i == len(b)
}
