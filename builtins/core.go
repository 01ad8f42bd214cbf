package builtins

import (
	"sort"

	starlarkjson "go.starlark.net/lib/json"
	starlarktime "go.starlark.net/lib/time"
	"go.starlark.net/starlark"
	"go.starlark.net/starlarkstruct"

	"github.com/seed5ad92d46/sous/runtime"
)

func coreEntries() []runtime.Entry {
	return []runtime.Entry{
		{Name: "args", Sig: "args -> dict",
			Doc:   "The frozen dict of string to string from `sous run R.star -a key=value` (repeatable).",
			Value: argsValue},
		{Name: "getenv", Sig: "getenv(name, default=None, *, secret=False) -> string",
			Doc: "The runner's environment variable name, or default when it is not set. With secret=True what it " +
				"returns (the value, or a string default) is redacted (see redact).",
			Fn: getenv},
		{Name: "print", Sig: "print(*values, sep=\" \")",
			Doc: "Starlark's own: writes a line to the recipe log (stderr; a log event in --json mode)."},
		{Name: "fail", Sig: "fail(*values, sep=\" \")",
			Doc: "Starlark's own: stops the recipe with the message; sous exits with code 1."},
		{Name: "load", Sig: `load("path.star", "name", alias="name")`,
			Doc: "Starlark's own statement: loads another recipe file, relative to the loading file. Loaded files run " +
				"once, are cached and frozen; a load cycle is an error found before anything runs."},
		{Name: "struct", Sig: "struct(**kw) -> struct",
			Doc:   "An immutable record: struct(a=1).a == 1 (go.starlark.net/starlarkstruct).",
			Value: func(*runtime.Env) starlark.Value { return starlark.NewBuiltin("struct", starlarkstruct.Make) }},
		{Name: "json", Sig: "json",
			Doc:   "json.encode(x), json.decode(s, default=...), json.indent(s, prefix=\"\", indent=\"\\t\") (go.starlark.net/lib/json).",
			Value: func(*runtime.Env) starlark.Value { return starlarkjson.Module }},
		{Name: "time", Sig: "time",
			Doc: "time.now(), time.parse_duration(d), time.time(...), time.from_timestamp(sec), time.parse_time(s) " +
				"and the Time and Duration types (go.starlark.net/lib/time).",
			Value: func(*runtime.Env) starlark.Value { return starlarktime.Module }},
	}
}

func argsValue(env *runtime.Env) starlark.Value {
	keys := make([]string, 0, len(env.Args))
	for k := range env.Args {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	d := starlark.NewDict(len(keys))
	for _, k := range keys {
		d.SetKey(starlark.String(k), starlark.String(env.Args[k]))
	}
	d.Freeze()
	return d
}

func getenv(c *runtime.Call) (starlark.Value, error) {
	var name string
	var def starlark.Value = starlark.None
	var secret bool
	if err := bind(c, 2, req("name", str(&name)), opt("default", value(&def)), opt("secret", boolean(&secret))); err != nil {
		return nil, err
	}
	if v, ok := c.Env.Getenv(name); ok {
		if secret {
			c.Env.Output.Redact(v) // a short value stays: see event.MinSecret
		}
		return starlark.String(v), nil
	}
	if s, ok := def.(starlark.String); ok && secret {
		c.Env.Output.Redact(string(s)) // the contract: what it returns
	}
	return def, nil
}
