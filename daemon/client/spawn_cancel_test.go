package client_test

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/seed5ad92d46/sous/daemon"
	"github.com/seed5ad92d46/sous/daemon/client"
	"github.com/seed5ad92d46/sous/internal/daemontest"
)

// A spawn whose context ends while its request is on the way must not
// leave a process running that nobody knows of: the daemon may start it
// after the caller gave up (an interrupt landing during parallel()'s
// spawns left `sleep 60` running on a socket daemon).
func TestCancelledSpawnLeavesNothingRunning(t *testing.T) {
	t.Parallel()
	sock, srv := daemontest.ServeUnix(t, daemon.Config{Token: testToken})
	c, err := client.DialUnix(context.Background(), sock, testToken, client.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	started := 0
	for i := range 60 {
		ctx, cancel := context.WithCancel(context.Background())
		// Cancel at every moment of the call's life: before it is sent,
		// while the daemon starts the child, after.
		go func() {
			time.Sleep(time.Duration(i%12) * 100 * time.Microsecond)
			cancel()
		}()
		p, err := c.Spawn(ctx, client.SpawnSpec{ID: fmt.Sprint("s", i), Command: "sleep", Args: []string{"60"}}, nil)
		if err == nil {
			started++
			p.KillAndWait(context.Background(), "SIGKILL", time.Second, true)
		}
		cancel()
	}
	deadline := time.Now().Add(10 * time.Second)
	for {
		var running []string
		for _, p := range srv.Registry().List() {
			if p.Running() {
				running = append(running, p.ID)
			}
		}
		if len(running) == 0 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("%d spawns answered, but these run on with no handle: %v", started, running)
		}
		time.Sleep(20 * time.Millisecond)
	}
}
