package runtime

import (
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
