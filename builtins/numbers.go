package builtins

import (
	"math"
	"strconv"
	"strings"

	starlarkmath "go.starlark.net/lib/math"
	"go.starlark.net/starlark"

	"github.com/seed5ad92d46/sous/runtime"
)

// Starlark's % operator has no width or precision ("%.2f" % x fails), and
// the language has no round(): these two names fill the gap.
func numberEntries() []runtime.Entry {
	return []runtime.Entry{
		{Name: "math", Sig: "math",
			Doc: "math.round(x) (half away from zero, a float), math.floor(x) and math.ceil(x) (ints), math.fabs, " +
				"math.sqrt, math.pow, math.exp, math.log(x, base=e), math.mod, math.remainder, math.copysign, " +
				"math.hypot, the trigonometric and hyperbolic functions, math.degrees, math.radians, math.gamma " +
				"and the constants math.pi and math.e (go.starlark.net/lib/math). Each takes ints or floats.",
			Value: func(*runtime.Env) starlark.Value { return starlarkmath.Module }},
		{Name: "fmt_float", Journal: runtime.JournalPure, Sig: "fmt_float(x, digits=2) -> string",
			Doc: "x (an int or a float) in fixed-point notation with exactly digits (0 to 20) digits after the " +
				"point, rounded to the nearest: fmt_float(0.00056, 4) == \"0.0006\", fmt_float(3) == \"3.00\". " +
				"A float is rounded from its exact binary value, as Python's \"%.2f\" does (2.675 is just below, " +
				"so \"2.67\"); an int is exact however large. NaN and the infinities read as str() shows them.",
			Fn: fmtFloat},
	}
}

// maxDigits bounds fmt_float's digits: past 20 a float64 has nothing left
// to show.
const maxDigits = 20

func fmtFloat(c *runtime.Call) (starlark.Value, error) {
	var x, digits starlark.Value = nil, starlark.MakeInt(2)
	if err := bind(c, 2, req("x", value(&x)), opt("digits", value(&digits))); err != nil {
		return nil, err
	}
	n, ok := digitCount(digits)
	if !ok {
		got := digits.Type()
		if _, isInt := digits.(starlark.Int); isInt {
			got = digits.String()
		}
		return nil, c.Errorf("digits: want int in 0..%d, got %s", maxDigits, got)
	}
	switch x := x.(type) {
	case starlark.Int:
		// Exact: a conversion to float64 would lose the low digits of a
		// large int.
		s := x.String()
		if n > 0 {
			s += "." + strings.Repeat("0", n)
		}
		return starlark.String(s), nil
	case starlark.Float:
		f := float64(x)
		if math.IsNaN(f) || math.IsInf(f, 0) {
			return starlark.String(x.String()), nil // nan, +inf, -inf
		}
		return starlark.String(strconv.FormatFloat(f, 'f', n, 64)), nil
	}
	return nil, c.Errorf("x: want int or float, got %s", x.Type())
}

// digitCount reads fmt_float's digits: an int in 0..maxDigits.
func digitCount(v starlark.Value) (int, bool) {
	i, ok := v.(starlark.Int)
	if !ok {
		return 0, false
	}
	n, ok := i.Int64()
	if !ok || n < 0 || n > maxDigits {
		return 0, false
	}
	return int(n), true
}
