package envlist

import (
	"slices"
	"testing"
)

func TestMerge(t *testing.T) {
	s := func(v string) *string { return &v }
	got := Merge([]string{"A=1", "B=2", "C=3", "PATH=/bin"}, map[string]*string{"B": nil, "C": s("x=y"), "D": s("")})
	want := []string{"A=1", "PATH=/bin", "C=x=y", "D="}
	if !slices.Equal(got, want) {
		t.Fatalf("got %q", got)
	}
	base := []string{"A=1"}
	if got := Merge(base, nil); !slices.Equal(got, base) {
		t.Fatalf("no overrides: %q", got)
	}
}

func TestLookupAndSet(t *testing.T) {
	env := []string{"PATH=/a", "X=1", "PATH=/b", "EMPTY=", "NOEQUALS"}
	for key, want := range map[string]string{"PATH": "/b", "X": "1", "EMPTY": ""} {
		if v, ok := Lookup(env, key); !ok || v != want {
			t.Errorf("Lookup %s = %q, %v; want %q", key, v, ok, want)
		}
	}
	if _, ok := Lookup(env, "NOEQUALS"); ok {
		t.Error("an entry without = defines nothing")
	}
	got := Set(env, "PATH", "/c")
	if want := []string{"X=1", "EMPTY=", "NOEQUALS", "PATH=/c"}; !slices.Equal(got, want) {
		t.Errorf("Set: %q, want %q", got, want)
	}
}

func TestWithout(t *testing.T) {
	env := []string{"A=1", "TOKEN=x", "B=2", "TOKEN=y", "NOEQUALS", "TOKENX=keep"}
	got := Without(env, "TOKEN", "NOEQUALS")
	if want := []string{"A=1", "B=2", "TOKENX=keep"}; !slices.Equal(got, want) {
		t.Fatalf("got %q, want %q", got, want)
	}
	if env[1] != "TOKEN=x" {
		t.Fatalf("Without changed its argument: %q", env)
	}
}
