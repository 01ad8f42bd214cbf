package methodcount_test

import (
	"context"
	"testing"
	"time"

	"github.com/seed5ad92d46/sous/daemon"
	"github.com/seed5ad92d46/sous/daemon/client"
	"github.com/seed5ad92d46/sous/internal/daemontest"
	"github.com/seed5ad92d46/sous/internal/methodcount"
)

// Requests through the relay reach a real daemon, answered, and are
// counted by method.
func TestCountsRequestsByMethod(t *testing.T) {
	sock, _ := daemontest.ServeUnix(t, daemon.Config{Token: "tok"})
	r := methodcount.Start(t, sock)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	c, err := client.DialUnix(ctx, r.Path(), "tok", client.Options{ReconnectTimeout: -1})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	before := r.Count("server.ping")
	for range 3 {
		if err := c.Call(ctx, "server.ping", nil, nil); err != nil {
			t.Fatal(err)
		}
	}
	if n := r.Count("server.ping") - before; n != 3 {
		t.Errorf("%d server.ping counted, want 3", n)
	}
	if n := r.Count("process.spawn"); n != 0 {
		t.Errorf("%d process.spawn counted, none sent", n)
	}
}
