package builtins

import (
	"testing"

	"go.starlark.net/starlark"
)

// TestToolBadInput: what tool() and sdk.session(tools=...) refuse, they
// refuse with an error naming the argument, before any CLI starts (the
// fake daemon would fail the run on a spawn).
func TestToolBadInput(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct{ src, err string }{
		{`tool("bad name", "d", {}, lambda a: 1)`, `tool: name: want letters, digits, _ and - only, got "bad name"`},
		{`tool("", "d", {}, lambda a: 1)`, `tool: name: want letters, digits, _ and - only, got ""`},
		{`tool("mcp.x", "d", {}, lambda a: 1)`, `tool: name: want letters, digits, _ and - only, got "mcp.x"`},
		{`tool("t", "d", [], lambda a: 1)`, `tool: schema: want dict (a JSON Schema), got list`},
		{`tool("t", "d", None, lambda a: 1)`, `tool: schema: want dict (a JSON Schema), got NoneType`},
		{`tool("t", "d", {"type": "string"}, lambda a: 1)`, `tool: schema: a tool's input is an object: want "type": "object", got "string"`},
		{`tool("t", "d", {"properties": {"x": print}}, lambda a: 1)`, `tool: schema["properties"]["x"]: want a JSON value`},
		{`tool("t", "d", {}, "not a function")`, `tool: fn: want function, got string`},
		{`tool("t", 3, {}, lambda a: 1)`, `tool: description: want string, got int`},
		{`t = tool("t", "d", {}, lambda a: 1)
sdk.session(tools = [t, tool("u", "", {}, print), t])`, `sdk.session: tools: two tools named "t"`},
		{`sdk.session(tools = [tool("t", "d", {}, print), 3])`, `sdk.session: tools[1]: want Tool, got int`},
		{`sdk.session(tools = tool("t", "d", {}, print))`, `sdk.session: tools: want list of Tool, got Tool`},
		{`sdk.send("hi", tools = [tool("t", "", {}, print)] * 2)`, `sdk.send: tools: two tools named "t"`},
		{`host("embedded").sdk.session(tools = [tool("t", "", {}, print)] * 2)`, `sdk.session: tools: two tools named "t"`},
	} {
		f := newFixture(t)
		r := f.run(tc.src)
		r.expect(t, 1, tc.err)
		if len(f.daemon.sent()) != 0 {
			t.Errorf("%s: the daemon was called: %v", tc.src, f.daemon.sent())
		}
	}
}

// TestToolValue: a Tool shows what it was made of, its schema gains the
// object type it lacked and is frozen.
func TestToolValue(t *testing.T) {
	t.Parallel()
	r := newFixture(t).run(`
def add(args):
    return args["a"] + args["b"]
t = tool("add", "Adds a and b.", {"properties": {"a": {"type": "integer"}}}, add)
print(t, t.name, t.description, t.schema, type(t))
print(dir(t))
t.schema["x"] = 1
`)
	r.expect(t, 1,
		`<Tool add> add Adds a and b. {"properties": {"a": {"type": "integer"}}, "type": "object"} Tool`,
		`["description", "name", "schema"]`,
		"cannot insert into frozen hash table")
}

func TestToolText(t *testing.T) {
	t.Parallel()
	d := starlark.NewDict(2)
	d.SetKey(starlark.String("b"), starlark.MakeInt(2))
	d.SetKey(starlark.String("a"), starlark.String("<&>"))
	for _, tc := range []struct {
		v    starlark.Value
		text string
		err  string
	}{
		{starlark.String("42"), "42", ""},
		{starlark.String(""), "", ""},
		{starlark.None, "", ""},
		{starlark.MakeInt(42), "42", ""},
		{starlark.Float(1.5), "1.5", ""},
		{starlark.True, "true", ""},
		{d, `{"a":"<&>","b":2}`, ""},
		{starlark.NewList([]starlark.Value{starlark.MakeInt(1), starlark.None}), "[1,null]", ""},
		{starlark.Float(nanValue()), "", "fn returned float that is not JSON: json: unsupported value: NaN"},
		{starlark.NewSet(1), "", "fn returned set: want a string, None or a JSON value (dict, list, number, bool)"},
	} {
		text, err := toolText(tc.v)
		if text != tc.text || (err == nil) != (tc.err == "") || (err != nil && err.Error() != tc.err) {
			t.Errorf("toolText(%s) = %q, %v; want %q, %q", tc.v, text, err, tc.text, tc.err)
		}
	}
}

func nanValue() float64 {
	zero := 0.0
	return zero / zero
}
