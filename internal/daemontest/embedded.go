package daemontest

import (
	"testing"

	"github.com/seed5ad92d46/sous/daemon"
	"github.com/seed5ad92d46/sous/daemon/client"
)

// EmbeddedDaemon composes an in-process daemon made from cfg for an
// "embedded" client.Target, as cmd/sous composes its own: the client
// library never builds one. Its Dir and Env start as cfg's; a runner fills
// in those left empty, as it does for sous's.
func EmbeddedDaemon(cfg daemon.Config) client.EmbeddedDaemon {
	return client.EmbeddedDaemon{
		New: func(dir string, env []string) (client.LocalServer, error) {
			cfg := cfg
			cfg.Dir, cfg.Env = dir, env
			srv, err := daemon.New(cfg)
			if err != nil {
				return nil, err // not a nil *daemon.Server in the interface
			}
			return srv, nil
		},
		Dir: cfg.Dir,
		Env: cfg.Env,
	}
}

// EmbeddedTarget is the "embedded" target with a daemon of the default
// configuration: a run's default host in tests of the runtime.
func EmbeddedTarget() client.Target {
	return client.Target{URL: "embedded", Embedded: EmbeddedDaemon(daemon.Config{})}
}

// Embedded starts an in-process daemon made from cfg and a client of it,
// both closed when the test ends (the client first).
func Embedded(tb testing.TB, cfg daemon.Config) (*daemon.Server, *client.Client) {
	tb.Helper()
	srv, err := daemon.New(cfg)
	if err != nil {
		tb.Fatal(err)
	}
	tb.Cleanup(func() { srv.Close() })
	c := client.Embedded(srv)
	tb.Cleanup(func() { c.Close() })
	return srv, c
}
