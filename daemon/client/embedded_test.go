package client_test

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/seed5ad92d46/sous/daemon"
	"github.com/seed5ad92d46/sous/daemon/client"
	"github.com/seed5ad92d46/sous/daemon/wire"
	"github.com/seed5ad92d46/sous/internal/daemontest"
)

// The client never builds a daemon: an "embedded" target without one
// composed for it fails with a clear error instead of starting anything.
func TestOpenEmbeddedWithoutADaemon(t *testing.T) {
	for _, url := range []string{"", "embedded"} {
		c, err := client.Open(context.Background(), client.Target{URL: url})
		if !errors.Is(err, client.ErrNoEmbeddedDaemon) {
			if c != nil {
				c.Shutdown()
			}
			t.Fatalf("Open(%q) with no Embedded.New: %v, want ErrNoEmbeddedDaemon", url, err)
		}
	}
}

// Open builds the embedded daemon with the target's Dir and Env, and its
// children run there with that environment; Shutdown stops the daemon
// it built.
func TestOpenEmbeddedComposed(t *testing.T) {
	dir := t.TempDir()
	embedded := daemontest.EmbeddedDaemon(daemon.Config{})
	embedded.Dir = dir
	embedded.Env = []string{"PATH=" + os.Getenv("PATH"), "SOUS_TEST_MARK=composed"}
	var built client.LocalServer
	newDaemon := embedded.New
	embedded.New = func(dir string, env []string) (client.LocalServer, error) {
		srv, err := newDaemon(dir, env)
		built = srv
		return srv, err
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	conn, err := client.Open(ctx, client.Target{URL: "embedded", Embedded: embedded})
	if err != nil {
		t.Fatal(err)
	}
	if conn.Server() != built || !conn.Local() {
		t.Fatalf("Server() = %v, Local() = %v: want the daemon built, in process", conn.Server(), conn.Local())
	}
	var out strings.Builder
	p, err := conn.Spawn(ctx, client.SpawnSpec{ID: "where", Command: "sh", Args: []string{"-c", `pwd; echo "$SOUS_TEST_MARK"`}},
		func(f *wire.Frame) { out.Write(f.Data) })
	if err != nil {
		t.Fatal(err)
	}
	if code, err := p.Wait(ctx); err != nil || code != 0 {
		t.Fatalf("wait: %d %v", code, err)
	}
	resolved, _ := filepath.EvalSymlinks(dir)
	if want := resolved + "\ncomposed\n"; out.String() != want {
		t.Errorf("child printed %q, want %q", out.String(), want)
	}
	if err := conn.Shutdown(); err != nil {
		t.Fatal(err)
	}
	// The daemon is closed: a new session's calls fail.
	c := client.Embedded(built)
	defer c.Close()
	if err := c.Call(ctx, "process.spawn", map[string]any{"id": "late", "command": "true"}, nil); err == nil {
		t.Error("spawn on a daemon Shutdown closed succeeded")
	} else {
		t.Logf("spawn after Shutdown: %v", err)
	}
}
