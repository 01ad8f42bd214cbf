package runtime

import (
	"fmt"
	"strings"
	"testing"

	"go.starlark.net/starlark"
)

func TestNewTableRejectsMistakes(t *testing.T) {
	t.Parallel()
	fn := func(*Call) (starlark.Value, error) { return starlark.None, nil }
	tests := []struct {
		name    string
		entries []Entry
		want    string
	}{
		{"duplicate", []Entry{{Name: "a", Sig: "a()", Doc: "d", Fn: fn}, {Name: "a", Sig: "a()", Doc: "d", Fn: fn}}, "a is defined twice"},
		{"orphan member", []Entry{{Name: "m.x", Sig: "m.x()", Doc: "d", Fn: fn}}, "m has members but no entry of its own"},
		{"no doc", []Entry{{Name: "a", Sig: "a()", Fn: fn}}, "a has no signature or no doc"},
		{"two kinds", []Entry{{Name: "a", Sig: "a", Doc: "d", Fn: fn, Value: func(*Env) starlark.Value { return starlark.None }}}, "more than one of"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := NewTable(Plugin{Name: "p", Entries: tt.entries})
			if err == nil || !strings.Contains(err.Error(), tt.want) {
				t.Errorf("got %v, want an error containing %q", err, tt.want)
			}
		})
	}
}

// TestSignaturesAreReadOnFirstUse: NewTable checks the shape of every Sig
// (its name, parenthesis and result) but leaves the parameters to
// Starlark's parser on first use, which the start of every `sous run`
// would otherwise pay for every builtin. A parameter list that does not
// parse is still caught, at the first Signature call.
func TestSignaturesAreReadOnFirstUse(t *testing.T) {
	t.Parallel()
	fn := func(*Call) (starlark.Value, error) { return starlark.None, nil }
	if _, err := NewTable(Plugin{Name: "p", Entries: []Entry{{Name: "a", Sig: "b(x)", Doc: "d", Fn: fn}}}); err == nil ||
		!strings.Contains(err.Error(), `builtins: a: signature "b(x)": want a(...)`) {
		t.Errorf("a Sig naming another function: %v", err)
	}
	tab, err := NewTable(Plugin{Name: "p", Entries: []Entry{
		{Name: "good", Sig: "good(x, *, y=1) -> Process", Doc: "d", Fn: fn},
		{Name: "bad", Sig: "bad(x=) -> int", Doc: "d", Fn: fn},
	}})
	if err != nil {
		t.Fatalf("NewTable: %v", err)
	}
	if sig, ok := tab.Signature("good"); !ok || !sig.Takes("y") || sig.Takes("z") || sig.Result != "Process" {
		t.Errorf("good: %+v %v", sig, ok)
	}
	defer func() {
		if r := recover(); r == nil || !strings.Contains(fmt.Sprint(r), `builtins: bad: signature "bad(x=) -> int"`) {
			t.Errorf("bad: recovered %v, want a panic naming the signature", r)
		}
	}()
	tab.Signature("bad")
}

// TestTableMembersByOwner: Members lists an owner's members sorted by
// name, and only its own, when owners share a prefix ("a", "ab") and the
// plugins list members out of order and apart from their owner.
func TestTableMembersByOwner(t *testing.T) {
	t.Parallel()
	fn := func(*Call) (starlark.Value, error) { return starlark.None, nil }
	e := func(name string) Entry { return Entry{Name: name, Sig: name + "()", Doc: "d", Fn: fn} }
	head := func(name string) Entry { return Entry{Name: name, Sig: name, Doc: "d"} }
	tab, err := NewTable(
		Plugin{Name: "one", Entries: []Entry{e("a.z"), head("ab"), e("P.wait"), e("ab.c"), head("a")}},
		Plugin{Name: "two", Entries: []Entry{e("a.b"), head("P"), e("a_b"), e("P.id"), e("a.m")}},
	)
	if err != nil {
		t.Fatal(err)
	}
	for owner, want := range map[string]string{"a": "a.b a.m a.z", "ab": "ab.c", "P": "P.id P.wait", "a_b": ""} {
		var got []string
		for _, m := range tab.Members(owner) {
			got = append(got, m.Name)
		}
		if strings.Join(got, " ") != want {
			t.Errorf("Members(%q) = %q, want %q", owner, got, want)
		}
	}
	if names := tab.AttrNames("P"); strings.Join(names, " ") != "id wait" {
		t.Errorf("AttrNames(P) = %q", names)
	}
}
