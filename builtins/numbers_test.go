package builtins

import (
	"strings"
	"testing"
)

// TestFmtFloatAndMath: Starlark's % has no precision ("%.2f" fails), so
// numbers are shown with fmt_float and rounded with the math module.
func TestFmtFloatAndMath(t *testing.T) {
	t.Parallel()
	o := newFixture(t).run(`
print(fmt_float(0.00056, 4))
print(fmt_float(0.0005600000000000001))
print(fmt_float(2.675, 2), fmt_float(1.005, 2), fmt_float(-0.001, 2))
print(fmt_float(3), fmt_float(3, 0), fmt_float(12345678901234567890, 1), fmt_float(2.5, digits = 0))
print(fmt_float(float("nan")), fmt_float(float("inf"), 3), fmt_float(-float("inf")))
print(fmt_float(1/3, 20))
print(math.round(2.5), math.floor(-1.5), math.ceil(1.2), math.sqrt(16), math.pi > 3.14)
`)
	o.expect(t, 0)
	want := strings.Join([]string{
		"0.0006",
		"0.00",
		"2.67 1.00 -0.00", // the binary values are just below 2.675 and 1.005
		"3.00 3 12345678901234567890.0 2",
		"nan +inf -inf",
		"0.33333333333333331483",
		"3.0 -2 2 4.0 True",
	}, "\n") + "\n"
	if o.stderr != want {
		t.Errorf("got:\n%s\nwant:\n%s", o.stderr, want)
	}
}

func TestFmtFloatErrors(t *testing.T) {
	t.Parallel()
	tests := []struct{ src, want string }{
		{`fmt_float("1.5")`, "fmt_float: x: want int or float, got string"},
		{`fmt_float(None)`, "fmt_float: x: want int or float, got NoneType"},
		{`fmt_float(1.5, 21)`, "fmt_float: digits: want int in 0..20, got 21"},
		{`fmt_float(1.5, -1)`, "fmt_float: digits: want int in 0..20, got -1"},
		{`fmt_float(1.5, 2.0)`, "fmt_float: digits: want int in 0..20, got float"},
		{`fmt_float(1.5, digits = "2")`, "fmt_float: digits: want int in 0..20, got string"},
		{`fmt_float(1.5, digits = 1 << 70)`, "fmt_float: digits: want int in 0..20, got 1180591620717411303424"},
		{`fmt_float()`, "fmt_float: missing argument for x"},
		{`fmt_float(1.5, 2, 3)`, "fmt_float: got 3 positional arguments, want at most 2"},
		{`fmt_float(1.5, precision = 2)`, "fmt_float: unexpected keyword argument"},
	}
	for _, tt := range tests {
		t.Run(tt.src, func(t *testing.T) {
			t.Parallel()
			o := newFixture(t).run(tt.src + "\n")
			o.expect(t, 1, "Error in fmt_float: "+tt.want)
		})
	}
}
