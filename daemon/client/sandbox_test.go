package client_test

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/seed5ad92d46/sous/daemon/client"
	"github.com/seed5ad92d46/sous/daemon/wire"
)

// A sandbox cannot be emulated: against a daemon without the extension the
// spawn fails, naming it, before process.spawn is sent.
func TestSandboxNeedsTheFeature(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	c, err := client.DialUnix(ctx, oldDaemon(t), "any", client.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	_, err = c.Spawn(ctx, client.SpawnSpec{ID: "x", Command: "true", Sandbox: &wire.Sandbox{Mode: wire.SandboxReadOnly}}, nil)
	if err == nil || !strings.Contains(err.Error(), `a sandboxed process needs the daemon extension "process.spawn.sandbox"`) {
		t.Fatalf("err = %v", err)
	}
}
