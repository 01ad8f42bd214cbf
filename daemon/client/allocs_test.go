package client_test

import (
	"context"
	"testing"

	"github.com/seed5ad92d46/sous/daemon"
	"github.com/seed5ad92d46/sous/daemon/client"
	"github.com/seed5ad92d46/sous/internal/testutil"
)

// A ping over a Unix socket costs the client 5 allocations. Reading a line
// is on every answer's path: the check for an oversize answer once cost a
// sixth there (its error target escaped to the heap on every read).
func TestPingCallAllocations(t *testing.T) {
	if testutil.RaceEnabled {
		t.Skip("the race detector allocates")
	}
	sock := startDaemon(t, daemon.Config{})
	ctx := context.Background()
	c, err := client.DialUnix(ctx, sock, testToken, client.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	ping := func() {
		if err := c.Call(ctx, "server.ping", nil, nil); err != nil {
			t.Fatal(err)
		}
	}
	for range 100 {
		ping() // buffers grown, pools filled
	}
	if n := testing.AllocsPerRun(2000, ping); n > 5 {
		t.Errorf("a ping call allocates %.2f times, want at most 5", n)
	}
}
