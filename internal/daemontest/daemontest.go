// Package daemontest serves a real daemon for the tests of what talks to
// one: the client, the recipe builtins, the agent runtime, the CLI. It
// serves one on a Unix socket (ServeUnix), or composes an in-process one
// (embedded.go) as cmd/sous does for its embedded target.
package daemontest

import (
	"os"
	"path/filepath"
	"testing"

	"github.com/seed5ad92d46/sous/daemon"
	"github.com/seed5ad92d46/sous/internal/testutil"
)

// ServeUnix serves a daemon made from cfg on a Unix socket until the test
// ends, and returns the socket's path and the daemon. The socket is in a
// short temp dir: a Unix socket path must stay under about 108 bytes.
func ServeUnix(tb testing.TB, cfg daemon.Config) (sock string, srv *daemon.Server) {
	tb.Helper()
	srv, err := daemon.New(cfg)
	if err != nil {
		tb.Fatal(err)
	}
	dir := testutil.ShortTempDir(tb)
	sock = filepath.Join(dir, "d.sock")
	ln, err := daemon.ListenUnix(sock)
	if err != nil {
		srv.Close()
		tb.Fatal(err)
	}
	served := make(chan error, 1)
	go func() { served <- srv.Serve(ln) }()
	tb.Cleanup(func() {
		srv.Close()
		<-served
		os.RemoveAll(dir)
	})
	return sock, srv
}
