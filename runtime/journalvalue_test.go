package runtime

import (
	"encoding/json"
	"math"
	"testing"
	"time"

	starlarktime "go.starlark.net/lib/time"
	"go.starlark.net/starlark"
	"go.starlark.net/starlarkstruct"

	"github.com/seed5ad92d46/sous/internal/testutil"
)

// TestKeptValueRoundTrip: every kind of value a journal keeps reads back
// equal, through JSON, with its type.
func TestKeptValueRoundTrip(t *testing.T) {
	big := starlark.MakeInt(1).Lsh(100)
	dict := starlark.NewDict(2)
	dict.SetKey(starlark.String("b"), starlark.MakeInt(2))
	dict.SetKey(starlark.MakeInt(1), starlark.None)
	values := []starlark.Value{
		starlark.None, starlark.True, starlark.False, starlark.MakeInt(-7), big,
		starlark.Float(1.5), starlark.Float(math.Inf(-1)),
		starlark.String("héllo"), starlark.String("\xff\x00not utf-8"), starlark.Bytes("\x00\x01"),
		starlark.NewList([]starlark.Value{starlark.MakeInt(1), starlark.String("x")}),
		starlark.Tuple{starlark.String("t"), starlark.Tuple{}},
		dict,
		starlarkstruct.FromStringDict(starlarkstruct.Default, starlark.StringDict{"clean": starlark.True, "changes": starlark.NewList(nil)}),
		starlarktime.Time(time.Date(2026, 11, 26, 1, 2, 3, 456789, time.UTC)),
		starlarktime.Duration(1500 * time.Millisecond),
	}
	env := &Env{Table: MustTable()}
	for _, v := range values {
		k, err := keepValue(v)
		if err != nil {
			t.Fatalf("%s: %v", v, err)
		}
		raw := k.appendJSON(nil)
		checkKeptValueJSON(t, k)
		var back keptValue
		if err := json.Unmarshal(raw, &back); err != nil {
			t.Fatal(err)
		}
		got, err := back.value(env)
		if err != nil {
			t.Fatalf("%s: %v", raw, err)
		}
		if got.Type() != v.Type() {
			t.Errorf("%s read back as a %s", v, got.Type())
		}
		if eq, err := starlark.Equal(got, v); err != nil || !eq {
			t.Errorf("%s read back as %s (%v)", v, got, err)
		}
	}
	if _, err := keepValue(starlark.NewBuiltin("f", nil)); err == nil {
		t.Error("a builtin function was kept")
	}
}

// checkKeptValueJSON fails t unless appendJSON makes json.Marshal's bytes.
func checkKeptValueJSON(t *testing.T, k keptValue) {
	t.Helper()
	testutil.EncodesAsMarshal(t, k, k.appendJSON)
}

// A Recordable's data given as JSON is kept as it is, and refused when it
// is not JSON: it goes into the journal's file.
func TestRecordDataRawJSON(t *testing.T) {
	raw, err := recordData(json.RawMessage(`{"a":[1,"\u003c"]}`))
	if err != nil || string(raw) != `{"a":[1,"\u003c"]}` {
		t.Fatalf("valid JSON: %s, %v", raw, err)
	}
	if _, err := recordData(json.RawMessage(`{"a":`)); err == nil {
		t.Fatal("data that is not JSON was kept")
	}
	// White space goes: a record is part of one protocol line.
	if raw, err := recordData(json.RawMessage("{\n  \"a\": [1, \"x y\"]\n}")); err != nil || string(raw) != `{"a":[1,"x y"]}` {
		t.Fatalf("indented JSON: %s, %v", raw, err)
	}
	if _, err := recordData(json.RawMessage("{\n\"a\":")); err == nil {
		t.Fatal("indented data that is not JSON was kept")
	}
	if raw, err := recordData(map[string]int{"b": 1}); err != nil || string(raw) != `{"b":1}` {
		t.Fatalf("a map: %s, %v", raw, err)
	}
}
