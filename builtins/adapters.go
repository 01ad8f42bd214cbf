package builtins

import (
	"go.starlark.net/starlark"

	"github.com/seed5ad92d46/sous/runtime"
)

// method adapts a method of receiver type T to a runtime.Func.
func method[T starlark.Value](fn func(c *runtime.Call, recv T) (starlark.Value, error)) runtime.Func {
	return func(c *runtime.Call) (starlark.Value, error) { return fn(c, c.Recv.(T)) }
}

// attr adapts an attribute getter of receiver type T.
func attr[T starlark.Value](fn func(recv T) starlark.Value) func(starlark.Value) starlark.Value {
	return func(v starlark.Value) starlark.Value { return fn(v.(T)) }
}
