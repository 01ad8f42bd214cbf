package client

import (
	"encoding/json"
	"slices"
	"strconv"

	"github.com/seed5ad92d46/sous/daemon/wire"
)

// spawnParams encodes process.spawn's params as json.Marshal(params) does,
// byte for byte (keys sorted, strings escaped alike), but writes the
// members every spawn has (strings, booleans, numbers, args and env) by
// hand: through encoding/json a map[string]any and its values went by
// reflection on every spawn, the client's largest CPU cost of one. Values
// of any other type (a sandbox, a pipeline, a size, ...) still go through
// json.Marshal.
func spawnParams(params map[string]any) ([]byte, error) {
	keys := make([]string, 0, 16)
	for k := range params {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	b := make([]byte, 0, 128)
	b = append(b, '{')
	for i, k := range keys {
		if i > 0 {
			b = append(b, ',')
		}
		b = wire.AppendJSONString(b, k)
		b = append(b, ':')
		var err error
		if b, err = appendSpawnValue(b, params[k]); err != nil {
			return nil, err
		}
	}
	return append(b, '}'), nil
}

// appendSpawnValue appends one member's value as json.Marshal writes it.
func appendSpawnValue(b []byte, v any) ([]byte, error) {
	switch v := v.(type) {
	case string:
		return wire.AppendJSONString(b, v), nil
	case bool:
		return strconv.AppendBool(b, v), nil
	case int64:
		return strconv.AppendInt(b, v, 10), nil
	case []string:
		if v == nil {
			return append(b, "null"...), nil
		}
		b = append(b, '[')
		for i, s := range v {
			if i > 0 {
				b = append(b, ',')
			}
			b = wire.AppendJSONString(b, s)
		}
		return append(b, ']'), nil
	case map[string]*string:
		if v == nil {
			return append(b, "null"...), nil
		}
		names := make([]string, 0, len(v))
		for k := range v {
			names = append(names, k)
		}
		slices.Sort(names)
		b = append(b, '{')
		for i, k := range names {
			if i > 0 {
				b = append(b, ',')
			}
			b = wire.AppendJSONString(b, k)
			b = append(b, ':')
			if s := v[k]; s == nil {
				b = append(b, "null"...)
			} else {
				b = wire.AppendJSONString(b, *s)
			}
		}
		return append(b, '}'), nil
	}
	raw, err := json.Marshal(v)
	if err != nil {
		return nil, err
	}
	return append(b, raw...), nil
}
