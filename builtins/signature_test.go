package builtins

import (
	"fmt"
	"slices"
	"strings"
	"testing"

	"go.starlark.net/starlark"
)

// TestSignaturesNameWhatTheFunctionsTake: `sous check` refuses a keyword
// argument that a function's Sig does not name, so each Sig must name
// exactly the parameters its Func binds, in the same order. Each Func is
// called in a mode where bind lists its parameters and does nothing else.
func TestSignaturesNameWhatTheFunctionsTake(t *testing.T) {
	t.Parallel()
	tab := DefaultTable()
	receivers := map[string]starlark.Value{"Process": &Process{}, "Session": &Session{}, "Pending": &Pending{}}
	checked := 0
	for _, e := range tab.Entries() {
		sig, ok := tab.Signature(e.Name)
		if !ok {
			if e.Fn != nil {
				t.Errorf("%s: a function without a signature", e.Name)
			}
			continue
		}
		if sig.AnyKeyword {
			continue // **kwargs: nothing for check to refuse
		}
		owner, _ := e.Owner()
		got, err := listParams(e, receivers[owner])
		if err != nil {
			t.Errorf("%s: %v", e.Name, err)
			continue
		}
		if !slices.Equal(got, sig.Params) {
			t.Errorf("%s binds %v; its signature %q names %v", e.Name, got, e.Sig, sig.Params)
		}
		checked++
	}
	if checked < 40 {
		t.Errorf("only %d functions checked", checked)
	}
}

// listParams calls e's Func so that its bind lists the parameters.
func listParams(e *Entry, recv starlark.Value) (params []string, err error) {
	defer func() {
		if r := recover(); r != nil {
			err = fmt.Errorf("panicked before binding its arguments: %v", r)
		}
	}()
	params = []string{}
	_, err = e.Fn(&Call{Name: e.Name, Recv: recv, listParams: &params})
	if err != errParamsListed {
		return nil, fmt.Errorf("returned %v before binding its arguments", err)
	}
	return params, nil
}

func TestParseSignature(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name, sig string
		want      Signature
		err       string
	}{
		{"spawn", `spawn(cmd, args=[], *, id=None, size=(1, 2), tag=")") -> Process`,
			Signature{Params: []string{"cmd", "args", "id", "size", "tag"}, Result: "Process"}, ""},
		{"git.info", `git.info(path=".") -> struct(is_repo, repo)`, Signature{Params: []string{"path"}, Result: "struct"}, ""},
		{"Process.close_stdin", "Process.close_stdin()", Signature{}, ""},
		{"defer", "defer(fn, *args, **kwargs)", Signature{Params: []string{"fn"}, AnyKeyword: true}, ""},
		{"f", "g(x)", Signature{}, "want f(...)"},
		{"f", "f(x", Signature{}, "no closing parenthesis"},
		{"f", "f(x) returns int", Signature{}, `want nothing or -> RESULT after the parameters, got "returns int"`},
		{"f", "f(x=) -> int", Signature{}, "got ')'"},
	}
	for _, tt := range tests {
		got, err := parseSignature(tt.name, tt.sig)
		if tt.err != "" {
			if err == nil || !strings.Contains(err.Error(), tt.err) {
				t.Errorf("%s: error %v, want %q", tt.sig, err, tt.err)
			}
			continue
		}
		if err != nil || !slices.Equal(got.Params, tt.want.Params) || got.AnyKeyword != tt.want.AnyKeyword || got.Result != tt.want.Result {
			t.Errorf("%s: %+v %v, want %+v", tt.sig, got, err, tt.want)
		}
	}
}
