package client

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"reflect"
	"strings"

	"github.com/seed5ad92d46/sous/daemon/wire"
)

// ExplainInvalidParams says which member of params made the daemon answer
// method with -32602 "Invalid params", which on the wire names nothing
// (docs/PROTOCOL.md §2.1: the message is exactly that). The daemon decodes a
// namespace's params into one struct (files.* wire.PathParams, git.*
// wire.GitParams, process.* wire.ProcessParams); decoding them the same
// way here finds the member, e.g. `path: want string, got number`. It
// returns "" when it cannot tell (another method, or params that decode).
func ExplainInvalidParams(method string, params json.RawMessage) string {
	var v any
	switch ns, _, _ := strings.Cut(method, "."); ns {
	case "files":
		v = new(wire.PathParams)
	case "git":
		v = new(wire.GitParams)
	case "process":
		v = new(wire.ProcessParams)
	default:
		return "" // server.* ignores its params; others are unknown
	}
	params = bytes.TrimSpace(params)
	if len(params) == 0 {
		return "params: want an object, got none"
	}
	if params[0] != '{' {
		return "params: want an object, got " + jsonKind(params[0])
	}
	err := json.Unmarshal(params, v)
	var te *json.UnmarshalTypeError
	if !errors.As(err, &te) {
		return ""
	}
	got := te.Value
	if got == "bool" {
		got = "boolean"
	}
	if te.Field == "" {
		return fmt.Sprintf("want %s, got %s", typeName(te.Type), got)
	}
	return fmt.Sprintf("%s: want %s, got %s", te.Field, typeName(te.Type), got)
}

// jsonKind names the JSON value that starts with c.
func jsonKind(c byte) string {
	switch {
	case c == '"':
		return "a string"
	case c == '[':
		return "an array"
	case c == 't' || c == 'f':
		return "a boolean"
	case c == 'n':
		return "null"
	}
	return "a number"
}

// typeName names a Go type as the JSON it decodes from.
func typeName(t reflect.Type) string {
	for t.Kind() == reflect.Pointer {
		t = t.Elem()
	}
	switch t.Kind() {
	case reflect.String:
		return "string"
	case reflect.Bool:
		return "boolean"
	case reflect.Int, reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64,
		reflect.Uint, reflect.Uint8, reflect.Uint16, reflect.Uint32, reflect.Uint64:
		return "integer"
	case reflect.Float32, reflect.Float64:
		return "number"
	case reflect.Slice, reflect.Array:
		return "array of " + plural(typeName(t.Elem()))
	case reflect.Map:
		return "object of " + plural(typeName(t.Elem()))
	}
	return "object"
}

// plural is a typeName in the plural: "strings", "arrays of strings".
func plural(name string) string {
	first, rest, _ := strings.Cut(name, " ")
	if rest != "" {
		rest = " " + rest
	}
	return first + "s" + rest
}
