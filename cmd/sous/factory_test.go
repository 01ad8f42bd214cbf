package main

import (
	"io"

	"github.com/seed5ad92d46/sous/daemon/envlist"
)

// newTestFactory is a factory with the given streams and environment:
// Getenv reads environ, not the test process's.
func newTestFactory(in io.Reader, out, errOut io.Writer, environ []string) *Factory {
	return &Factory{
		IO: &IO{In: in, Out: out, ErrOut: errOut},
		Getenv: func(key string) string {
			v, _ := envlist.Lookup(environ, key)
			return v
		},
		Environ: environ,
	}
}
