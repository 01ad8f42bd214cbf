package builtins

import (
	"errors"
	"fmt"
	"math"
	"strings"
	"time"

	"go.starlark.net/starlark"

	"github.com/seed5ad92d46/sous/runtime"
)

// param converts one argument value into a Go variable.
type param interface {
	// set converts v. Its error says what was wanted ("want string, got
	// int"); bind adds the builtin's and the argument's names.
	set(v starlark.Value) error
}

// binding is one parameter of a builtin's signature.
type binding struct {
	name     string
	optional bool
	p        param
}

func req(name string, p param) binding { return binding{name: name, p: p} }
func opt(name string, p param) binding { return binding{name: name, optional: true, p: p} }

// bind unpacks a call's arguments. starlark.UnpackArgs does the arity,
// unknown and repeated keywords; bind converts each value itself so that
// errors read "spawn: cwd: want string, got int", the form RECIPES.md
// promises. Only the first positional parameters may be passed by position:
// the rest of the signature is keyword-only (after the "*").
func bind(c *runtime.Call, positional int, params ...binding) error {
	if list := listedParams(c); list != nil {
		for _, b := range params {
			*list = append(*list, b.name)
		}
		return errParamsListed
	}
	if len(c.Args) > positional {
		return fmt.Errorf("%s: got %d positional arguments, want at most %d", c.Name, len(c.Args), positional)
	}
	raw := make([]starlark.Value, len(params))
	pairs := make([]any, 0, 2*len(params))
	for i, b := range params {
		name := b.name
		if b.optional {
			name += "?"
		}
		pairs = append(pairs, name, &raw[i])
	}
	if err := starlark.UnpackArgs(c.Name, c.Args, c.Kwargs, pairs...); err != nil {
		return err
	}
	for i, b := range params {
		if raw[i] == nil {
			continue // not passed: the variable keeps its default
		}
		if err := b.p.set(raw[i]); err != nil {
			var ae *argError
			if errors.As(err, &ae) {
				return fmt.Errorf("%s: %s%s: %s", c.Name, b.name, ae.path, ae.msg)
			}
			return fmt.Errorf("%s: %s: %w", c.Name, b.name, err)
		}
	}
	return nil
}

// errParamsListed is what bind returns once it listed a builtin's
// parameters for a test (listedParams).
var errParamsListed = errors.New("parameters listed")

// listParamsKey names the thread-local through which a test asks bind to
// list the parameters it was given instead of binding them: how the test
// checks that each Sig names exactly what its Func takes
// (signature_test.go).
const listParamsKey = "sous.builtins.listParams"

// listedParams is where bind lists the parameters, or nil when it binds
// them (always, but in that test).
func listedParams(c *runtime.Call) *[]string {
	if c.Thread == nil {
		return nil
	}
	list, _ := c.Thread.Local(listParamsKey).(*[]string)
	return list
}

// argError is a conversion error inside a container argument; path locates
// the element (`[2]`, `["HOME"]`).
type argError struct{ path, msg string }

func (e *argError) Error() string { return e.path + ": " + e.msg }

func want(what string, v starlark.Value) error {
	return fmt.Errorf("want %s, got %s", what, v.Type())
}

// paramFunc adapts a function to param.
type paramFunc func(v starlark.Value) error

func (f paramFunc) set(v starlark.Value) error { return f(v) }

// str binds a string; None is refused.
func str(dst *string) param {
	return paramFunc(func(v starlark.Value) error {
		s, ok := starlark.AsString(v)
		if !ok {
			return want("string", v)
		}
		*dst = s
		return nil
	})
}

// optStr binds a string or None (which leaves dst unchanged).
func optStr(dst *string) param {
	return paramFunc(func(v starlark.Value) error {
		if v == starlark.None {
			return nil
		}
		return str(dst).set(v)
	})
}

func boolean(dst *bool) param {
	return paramFunc(func(v starlark.Value) error {
		b, ok := v.(starlark.Bool)
		if !ok {
			return want("bool", v)
		}
		*dst = bool(b)
		return nil
	})
}

// integer binds an int that fits in int64 and is at least lo.
func integer(dst *int64, lo int64) param {
	return paramFunc(func(v starlark.Value) error {
		i, ok := v.(starlark.Int)
		if !ok {
			return want("int", v)
		}
		n, ok := i.Int64()
		if !ok {
			return fmt.Errorf("%s is out of range", i)
		}
		if n < lo {
			return fmt.Errorf("want at least %d, got %d", lo, n)
		}
		*dst = n
		return nil
	})
}

// optInteger binds an int or None (which leaves *dst nil).
func optInteger(dst **int64, lo int64) param {
	return paramFunc(func(v starlark.Value) error {
		if v == starlark.None {
			return nil
		}
		var n int64
		if err := integer(&n, lo).set(v); err != nil {
			return err
		}
		*dst = &n
		return nil
	})
}

// maxSeconds bounds durations well below time.Duration's range.
const maxSeconds = 100 * 365 * 24 * 3600

// seconds binds a non-negative duration given in seconds (int or float).
func seconds(dst *time.Duration) param {
	return paramFunc(func(v starlark.Value) error {
		var f float64
		switch x := v.(type) {
		case starlark.Int:
			f = float64(x.Float())
		case starlark.Float:
			f = float64(x)
		default:
			return want("seconds (int or float)", v)
		}
		if math.IsNaN(f) || f < 0 || f > maxSeconds {
			return fmt.Errorf("want a number of seconds between 0 and %d, got %s", maxSeconds, v)
		}
		*dst = time.Duration(f * float64(time.Second))
		return nil
	})
}

// optSeconds binds seconds or None (which leaves *dst nil: no limit).
func optSeconds(dst **time.Duration) param {
	return paramFunc(func(v starlark.Value) error {
		if v == starlark.None {
			return nil
		}
		var d time.Duration
		if err := seconds(&d).set(v); err != nil {
			return err
		}
		*dst = &d
		return nil
	})
}

// strList binds a list or tuple of strings.
func strList(dst *[]string) param {
	return paramFunc(func(v starlark.Value) error {
		seq, ok := v.(starlark.Indexable)
		if _, isStr := v.(starlark.String); !ok || isStr {
			return want("list of strings", v)
		}
		// Grow while checking: a range(10**12) is Indexable too, and
		// allocating its Len() up front would crash the runner.
		n := seq.Len()
		out := make([]string, 0, min(n, 64))
		for i := range n {
			s, ok := starlark.AsString(seq.Index(i))
			if !ok {
				return &argError{path: fmt.Sprintf("[%d]", i), msg: want("string", seq.Index(i)).Error()}
			}
			out = append(out, s)
		}
		*dst = out
		return nil
	})
}

// command binds a program name or a list of program and arguments; list,
// when not nil, is set when it was a list.
func command(dst *[]string, list *bool) param {
	return paramFunc(func(v starlark.Value) error {
		if s, ok := starlark.AsString(v); ok {
			*dst = []string{s}
			return nil
		}
		if _, ok := v.(starlark.Indexable); !ok {
			return want("string or list of strings", v)
		}
		if list != nil {
			*list = true
		}
		return strList(dst).set(v)
	})
}

// envDict binds a dict of string to string or None (None unsets an
// inherited variable).
func envDict(dst *map[string]*string) param {
	return stringKeyed(dst, "string or None", func(v starlark.Value) (*string, bool) {
		if v == starlark.None {
			return nil, true
		}
		s, ok := starlark.AsString(v)
		return &s, ok
	})
}

// strDict binds a dict of string to string, or None (which leaves dst
// unchanged).
func strDict(dst *map[string]string) param {
	return stringKeyed(dst, "string", starlark.AsString)
}

// stringKeyed binds a dict with string keys whose values value converts (it
// reports false for a value of the wrong type, which wantValue names), or
// None, which leaves dst unchanged.
func stringKeyed[V any](dst *map[string]V, wantValue string, value func(starlark.Value) (V, bool)) param {
	return paramFunc(func(v starlark.Value) error {
		if v == starlark.None {
			return nil
		}
		d, ok := v.(*starlark.Dict)
		if !ok {
			return want("dict", v)
		}
		out := make(map[string]V, d.Len())
		for _, item := range d.Items() {
			k, ok := starlark.AsString(item[0])
			if !ok {
				return &argError{path: " key " + item[0].String(), msg: want("string", item[0]).Error()}
			}
			val, ok := value(item[1])
			if !ok {
				return &argError{path: fmt.Sprintf("[%q]", k), msg: want(wantValue, item[1]).Error()}
			}
			out[k] = val
		}
		*dst = out
		return nil
	})
}

// data binds a string or bytes (a process's stdin).
func data(dst *[]byte) param {
	return paramFunc(func(v starlark.Value) error {
		switch x := v.(type) {
		case starlark.String:
			*dst = []byte(x)
		case starlark.Bytes:
			*dst = []byte(x)
		default:
			return want("string or bytes", v)
		}
		return nil
	})
}

// optData binds a string, bytes or None (which leaves *dst nil).
func optData(dst *[]byte) param {
	return paramFunc(func(v starlark.Value) error {
		if v == starlark.None {
			return nil
		}
		return data(dst).set(v)
	})
}

// value binds any value, for arguments checked by the builtin itself.
func value(dst *starlark.Value) param {
	return paramFunc(func(v starlark.Value) error {
		*dst = v
		return nil
	})
}

// signalName binds a signal: a name ("TERM", "SIGKILL") or a number.
func signalName(dst *string) param {
	return paramFunc(func(v starlark.Value) error {
		switch x := v.(type) {
		case starlark.String:
			if strings.TrimSpace(string(x)) == "" {
				return errors.New("want a signal name, got an empty string")
			}
			*dst = string(x)
		case starlark.Int:
			n, ok := x.Int64()
			if !ok || n < 1 || n > 64 {
				return fmt.Errorf("want a signal number between 1 and 64, got %s", x)
			}
			*dst = x.String()
		default:
			return want("signal name or number", v)
		}
		return nil
	})
}
