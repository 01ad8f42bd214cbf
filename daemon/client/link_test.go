package client_test

import (
	"context"
	"errors"
	"sync"
	"testing"

	"github.com/seed5ad92d46/sous/daemon"
	"github.com/seed5ad92d46/sous/daemon/client"
)

// TestEmbeddedCallsRacingClose makes calls while the client closes, as a
// recipe's background stdin writer may when its run ends. Each call either
// succeeds or fails with ErrClosed; under -race, nothing may race.
func TestEmbeddedCallsRacingClose(t *testing.T) {
	t.Parallel()
	for range 20 {
		srv, err := daemon.New(daemon.Config{})
		if err != nil {
			t.Fatal(err)
		}
		c := client.Embedded(srv)
		var wg sync.WaitGroup
		for range 4 {
			wg.Add(1)
			go func() {
				defer wg.Done()
				for range 50 {
					err := c.Call(context.Background(), "server.ping", nil, nil)
					if err != nil && !errors.Is(err, client.ErrClosed) {
						t.Errorf("call during close: %v", err)
						return
					}
				}
			}()
		}
		c.Close()
		wg.Wait()
		srv.Close()
	}
}
