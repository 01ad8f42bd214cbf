package main

import (
	"bytes"
	"context"
	"crypto/rand"
	"io"
	"os"
	"path/filepath"
	"testing"
	"testing/iotest"
	"time"

	"github.com/seed5ad92d46/sous/daemon"
	"github.com/seed5ad92d46/sous/daemon/client"
)

// forwardStdin ends with the input: after a reader that hands out many small
// pieces, all buffers come back once the reading goroutine is gone, and none
// of them may hold the writer up (it once waited forever to return the last
// one, and the command never saw the end of its stdin).
func TestForwardStdinEnds(t *testing.T) {
	srv, err := daemon.New(embeddedConfig())
	if err != nil {
		t.Fatal(err)
	}
	defer srv.Close()
	c := client.Embedded(srv)
	defer c.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	for run := range 20 {
		out := filepath.Join(t.TempDir(), "in")
		p, err := c.Spawn(ctx, client.SpawnSpec{ID: "fwd", Command: "sh", Args: []string{"-c", `cat > "$0"`, out}}, nil)
		if err != nil {
			t.Fatal(err)
		}
		data := make([]byte, 8<<10)
		rand.Read(data)
		done := make(chan struct{})
		go func() {
			defer close(done)
			forwardStdin(ctx, p, iotest.OneByteReader(bytes.NewReader(data)), io.Discard)
		}()
		select {
		case <-done:
		case <-time.After(20 * time.Second):
			t.Fatalf("run %d: forwardStdin did not return after its input ended", run)
		}
		if code, err := p.Wait(ctx); err != nil || code != 0 {
			t.Fatalf("run %d: wait: %d %v", run, code, err)
		}
		if got, err := os.ReadFile(out); err != nil || !bytes.Equal(got, data) {
			t.Fatalf("run %d: the command read %d bytes (%v), want %d", run, len(got), err, len(data))
		}
	}
}
