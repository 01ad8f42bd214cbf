package runtime

import (
	"slices"
	"strings"
	"testing"
)

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
