package runtime

import (
	"encoding/json"
	"fmt"
	"math/big"
	"strconv"
	"time"
	"unicode/utf8"

	starlarktime "go.starlark.net/lib/time"
	"go.starlark.net/starlark"
	"go.starlark.net/starlarkstruct"
)

// How a journal keeps the values builtins return (durable.go): Starlark's
// own values, structs, times and durations, and the values of a plugin's
// types that implement Recordable, as JSON that reads back to an equal
// value. A value that is none of these cannot be kept, and its call is
// not replayed.

// Recordable is a value of a plugin's type that a journal can keep: Record
// gives its data, which the plugin's Decoders[kind] turns back into it.
// Data that is a json.RawMessage is kept as it is (it must be valid JSON);
// anything else is encoded with json.Marshal.
type Recordable interface {
	starlark.Value
	Record() (kind string, data any, err error)
}

// Decoder makes a Recordable value again from its Record data.
type Decoder func(env *Env, data json.RawMessage) (starlark.Value, error)

// keptValue is a value in a journal. T says what it is: none, true,
// false, int, float, str, bytes, list, tuple, dict, struct, time,
// duration, or "x:" and a Recordable's kind.
type keptValue struct {
	T string          `json:"t"`
	S string          `json:"s,omitempty"` // str (UTF-8), int, float, time, duration
	B []byte          `json:"b,omitempty"` // bytes; a str that is not UTF-8
	L []keptValue     `json:"l,omitempty"` // list and tuple items, dict keys, struct names
	V []keptValue     `json:"v,omitempty"` // dict and struct values
	D json.RawMessage `json:"d,omitempty"` // a Recordable's data
}

// keepValue turns v into what the journal keeps.
func keepValue(v starlark.Value) (keptValue, error) {
	switch v := v.(type) {
	case starlark.NoneType:
		return keptValue{T: "none"}, nil
	case starlark.Bool:
		if v {
			return keptValue{T: "true"}, nil
		}
		return keptValue{T: "false"}, nil
	case starlark.Int:
		return keptValue{T: "int", S: v.String()}, nil
	case starlark.Float:
		return keptValue{T: "float", S: strconv.FormatFloat(float64(v), 'g', -1, 64)}, nil
	case starlark.String:
		if utf8.ValidString(string(v)) {
			return keptValue{T: "str", S: string(v)}, nil
		}
		return keptValue{T: "str", B: []byte(v)}, nil
	case starlark.Bytes:
		return keptValue{T: "bytes", B: []byte(v)}, nil
	case *starlark.List:
		return keepItems("list", v.Len(), v.Index)
	case starlark.Tuple:
		return keepItems("tuple", v.Len(), v.Index)
	case *starlark.Dict:
		k := keptValue{T: "dict"}
		for _, item := range v.Items() {
			kk, err := keepValue(item[0])
			if err != nil {
				return k, err
			}
			kv, err := keepValue(item[1])
			if err != nil {
				return k, err
			}
			k.L, k.V = append(k.L, kk), append(k.V, kv)
		}
		return k, nil
	case *starlarkstruct.Struct:
		if v.Constructor() != starlarkstruct.Default {
			return keptValue{}, fmt.Errorf("a struct made by %s", v.Constructor())
		}
		k := keptValue{T: "struct"}
		for _, name := range v.AttrNames() {
			f, err := v.Attr(name)
			if err != nil {
				return k, err
			}
			kv, err := keepValue(f)
			if err != nil {
				return k, err
			}
			k.L, k.V = append(k.L, keptValue{T: "str", S: name}), append(k.V, kv)
		}
		return k, nil
	case starlarktime.Time:
		return keptValue{T: "time", S: time.Time(v).Format(time.RFC3339Nano)}, nil
	case starlarktime.Duration:
		return keptValue{T: "duration", S: strconv.FormatInt(int64(v), 10)}, nil
	case Recordable:
		kind, data, err := v.Record()
		if err != nil {
			return keptValue{}, err
		}
		raw, err := recordData(data) // journalvalue_json.go
		if err != nil {
			return keptValue{}, err
		}
		return keptValue{T: "x:" + kind, D: raw}, nil
	}
	return keptValue{}, fmt.Errorf("a %s", v.Type())
}

func keepItems(t string, n int, index func(int) starlark.Value) (keptValue, error) {
	k := keptValue{T: t, L: make([]keptValue, 0, n)}
	for i := range n {
		kv, err := keepValue(index(i))
		if err != nil {
			return k, err
		}
		k.L = append(k.L, kv)
	}
	return k, nil
}

// value makes the Starlark value k keeps, with env's decoders.
func (k keptValue) value(env *Env) (starlark.Value, error) {
	switch k.T {
	case "none":
		return starlark.None, nil
	case "true":
		return starlark.True, nil
	case "false":
		return starlark.False, nil
	case "int":
		n, ok := new(big.Int).SetString(k.S, 10)
		if !ok {
			return nil, fmt.Errorf("bad int %q", k.S)
		}
		return starlark.MakeBigInt(n), nil
	case "float":
		f, err := strconv.ParseFloat(k.S, 64)
		return starlark.Float(f), err
	case "str":
		if k.B != nil {
			return starlark.String(k.B), nil
		}
		return starlark.String(k.S), nil
	case "bytes":
		return starlark.Bytes(k.B), nil
	case "list", "tuple":
		items := make([]starlark.Value, len(k.L))
		for i, kv := range k.L {
			v, err := kv.value(env)
			if err != nil {
				return nil, err
			}
			items[i] = v
		}
		if k.T == "tuple" {
			return starlark.Tuple(items), nil
		}
		return starlark.NewList(items), nil
	case "dict", "struct":
		if len(k.L) != len(k.V) {
			return nil, fmt.Errorf("a %s with %d keys and %d values", k.T, len(k.L), len(k.V))
		}
		d := starlark.NewDict(len(k.L))
		fields := make(starlark.StringDict, len(k.L))
		for i := range k.L {
			key, err := k.L[i].value(env)
			if err != nil {
				return nil, err
			}
			v, err := k.V[i].value(env)
			if err != nil {
				return nil, err
			}
			if k.T == "struct" {
				name, ok := key.(starlark.String)
				if !ok {
					return nil, fmt.Errorf("a struct field named by a %s", key.Type())
				}
				fields[string(name)] = v
				continue
			}
			if err := d.SetKey(key, v); err != nil {
				return nil, err
			}
		}
		if k.T == "struct" {
			return starlarkstruct.FromStringDict(starlarkstruct.Default, fields), nil
		}
		return d, nil
	case "time":
		t, err := time.Parse(time.RFC3339Nano, k.S)
		return starlarktime.Time(t), err
	case "duration":
		n, err := strconv.ParseInt(k.S, 10, 64)
		return starlarktime.Duration(n), err
	}
	if len(k.T) > 2 && k.T[:2] == "x:" {
		dec, ok := env.Table.decoders[k.T[2:]]
		if !ok {
			return nil, fmt.Errorf("no decoder for %s values", k.T[2:])
		}
		return dec(env, k.D)
	}
	return nil, fmt.Errorf("unknown kept value %q", k.T)
}
