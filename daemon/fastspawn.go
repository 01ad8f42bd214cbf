package daemon

import (
	"encoding/json"

	"github.com/seed5ad92d46/sous/daemon/wire"
)

// decodeSpawnParams decodes process.spawn's params: the shape clients send
// (id, command, args, cwd, env, wantPid, notifyGone, spawnKey, exitSignal,
// stdinClosed) in one pass
// by decodeSpawnFast, anything else by encoding/json. Through encoding/json
// alone the params cost about 5% of a socket daemon's CPU in a loop of
// spawns (a CPU profile, docs/PERFORMANCE.md "Spawn to exit").
func decodeSpawnParams(raw json.RawMessage) (wire.ProcessParams, error) {
	if p, ok := decodeSpawnFast(raw); ok {
		return p, nil
	}
	return decodeParams[wire.ProcessParams](raw)
}

// decodeSpawnFast is decodeParams[wire.ProcessParams] for the members a
// spawn usually has, exact as the other fast paths are (fastjson.go): any
// other member of the struct, a value of another type, an escape, invalid
// UTF-8 or a key matched only case-insensitively reports !ok. FuzzFastPath
// holds it to encoding/json.
func decodeSpawnFast(raw []byte) (p wire.ProcessParams, ok bool) {
	ok = forEachMember(raw, func(key, val []byte, esc bool) bool {
		switch string(key) {
		case "id":
			return fastString(val, esc, &p.ID, nil)
		case "command":
			return fastString(val, esc, &p.Command, nil)
		case "cwd":
			return fastString(val, esc, &p.Cwd, nil)
		case "spawnKey":
			return fastString(val, esc, &p.SpawnKey, nil)
		case "wantPid":
			return fastBool(val, &p.WantPid)
		case "notifyGone":
			return fastBool(val, &p.NotifyGone)
		case "exitSignal":
			return fastBool(val, &p.ExitSignal)
		case "stdinClosed":
			return fastBool(val, &p.StdinClosed)
		case "args":
			return fastStrings(val, &p.Args)
		case "env":
			return fastEnv(val, &p.Env)
		default:
			return !foldsToAny(string(key), processFields())
		}
	})
	return p, ok
}

// fastBool stores true or false; null leaves *dst as it is, as
// encoding/json does.
func fastBool(val []byte, dst *bool) bool {
	switch string(val) {
	case "true":
		*dst = true
	case "false":
		*dst = false
	case "null":
	default:
		return false
	}
	return true
}

// fastStrings stores an array of strings without escapes; null sets *dst
// to nil, as encoding/json does for a slice. An element that is not such a
// string (null included) is not for the fast path.
func fastStrings(val []byte, dst *[]string) bool {
	if string(val) == "null" {
		*dst = nil
		return true
	}
	s := scanner{b: val}
	out := []string{}
	if !s.elements(func() bool {
		str, ok := s.plainString()
		out = append(out, str)
		return ok
	}) {
		return false
	}
	*dst = out
	return true
}

// fastEnv stores an object of strings without escapes or nulls into *dst,
// keeping what it held (encoding/json reuses a map); null sets it to nil.
func fastEnv(val []byte, dst *map[string]*string) bool {
	if string(val) == "null" {
		*dst = nil
		return true
	}
	s := scanner{b: val}
	if !s.eat('{') {
		return false
	}
	env := *dst
	if env == nil {
		env = map[string]*string{}
	}
	s.ws()
	if s.eat('}') {
		*dst = env
		return true
	}
	for {
		s.ws()
		name, ok := s.plainString()
		if !ok {
			return false
		}
		s.ws()
		if !s.eat(':') {
			return false
		}
		s.ws()
		if s.literal("null") {
			env[name] = nil
		} else if v, ok := s.plainString(); ok {
			env[name] = &v
		} else {
			return false
		}
		s.ws()
		if s.eat('}') {
			*dst = env
			return true
		}
		if !s.eat(',') {
			return false
		}
	}
}

// plainString scans a string at s.i that has no escape and is valid UTF-8
// (what encoding/json would keep byte for byte) and returns its text.
func (s *scanner) plainString() (string, bool) {
	start := s.i
	s.esc = false
	if s.i >= len(s.b) || s.b[s.i] != '"' || !s.string() || s.esc {
		return "", false
	}
	var str string
	if !fastString(s.b[start:s.i], false, &str, nil) {
		return "", false
	}
	return str, true
}
