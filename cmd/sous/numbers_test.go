package main

import (
	"strings"
	"testing"
)

// TestDocOfNumbers: fmt_float and math are in the reference.
func TestDocOfNumbers(t *testing.T) {
	t.Parallel()
	o := sous(t, "doc")
	o.expect(t, 0)
	for _, w := range []string{"\n  fmt_float(x, digits=2) -> string\n", "\n  math\n"} {
		if !strings.Contains(o.stdout, w) {
			t.Errorf("sous doc lacks %q:\n%s", w, o.stdout)
		}
	}
	o = sous(t, "doc", "math")
	o.expect(t, 0)
	if !strings.Contains(o.stdout, "math.round(x)") || !strings.Contains(o.stdout, "go.starlark.net/lib/math") {
		t.Errorf("sous doc math:\n%s", o.stdout)
	}
	o = sous(t, "doc", "fmt_float")
	o.expect(t, 0)
	if text := strings.Join(strings.Fields(o.stdout), " "); !strings.Contains(text, `fmt_float(0.00056, 4) == "0.0006"`) {
		t.Errorf("sous doc fmt_float:\n%s", o.stdout)
	}
}
