package main

import (
	"context"
	"encoding/json"
	"strconv"
	"strings"
	"testing"

	"github.com/seed5ad92d46/sous/daemon/client"
)

// TestDaemonLogCompleteWhenKilled: the daemon's log lines of a spawn and
// of its exit are written before the client sees the exit frame, so a
// daemon SIGKILLed right after loses none of them (docs/PERFORMANCE.md,
// "Spawn to exit", says why they are not buffered).
func TestDaemonLogCompleteWhenKilled(t *testing.T) {
	s := startServe(t, "tok", "--log-format", "json")
	ctx := context.Background()
	c, err := client.DialUnix(ctx, s.socket, s.token, client.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	const n = 20
	for i := range n {
		p, err := c.Spawn(ctx, client.SpawnSpec{ID: "log" + strconv.Itoa(i), Command: "true"}, nil)
		if err != nil {
			t.Fatal(err)
		}
		if code, err := p.Wait(ctx); err != nil || code != 0 {
			t.Fatalf("wait: %d %v", code, err)
		}
	}
	s.cmd.Process.Kill() // SIGKILL: nothing of the daemon's runs after this
	<-s.exited
	spawned, exited := map[string]bool{}, map[string]bool{}
	for _, line := range strings.Split(s.log.String(), "\n") {
		var rec struct{ Msg, ID string }
		if json.Unmarshal([]byte(line), &rec) != nil {
			continue
		}
		switch rec.Msg {
		case "spawn":
			spawned[rec.ID] = true
		case "exit":
			exited[rec.ID] = true
		}
	}
	for i := range n {
		id := "log" + strconv.Itoa(i)
		if !spawned[id] || !exited[id] {
			t.Errorf("%s: spawn line %v, exit line %v, after SIGKILL; log:\n%s", id, spawned[id], exited[id], s.log.String())
		}
	}
}
