package client_test

import (
	"context"
	"encoding/json"
	"net"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/seed5ad92d46/sous/daemon/client"
)

// TestResentCallsGoBeforeNewOnes: the calls in flight when a connection
// broke are sent again on the new one before any call made after it came
// up. A durable run's journal appends name the count they follow, so an
// append that overtook the resent ones was refused ("run.append: at 4871,
// but the journal holds 2071 records"), and the run failed. The daemon
// here answers nothing on the first connection and cuts it after 300
// appends, while the caller goes on appending; on the next connection
// every append must come in order.
func TestResentCallsGoBeforeNewOnes(t *testing.T) {
	const cutAfter, total = 300, 1200
	var mu sync.Mutex
	var second []int // the appends' "at" on the connection after the cut, in arrival order
	appends := 0     // on the first connection (one goroutine serves it)
	sock := fakeDaemonLines(t, func(conn int, nc net.Conn, line []byte) bool {
		var req struct {
			ID     json.RawMessage `json:"id"`
			Method string          `json:"method"`
			Params struct {
				At int `json:"at"`
			} `json:"params"`
		}
		if json.Unmarshal(line, &req) != nil {
			return false
		}
		if req.Method != "run.append" {
			nc.Write([]byte(`{"jsonrpc":"2.0","id":` + string(req.ID) + `,"result":{}}` + "\n"))
			return true
		}
		if conn == 0 {
			appends++
			return appends < cutAfter // unanswered, all of them; then cut
		}
		mu.Lock()
		second = append(second, req.Params.At)
		mu.Unlock()
		nc.Write([]byte(`{"jsonrpc":"2.0","id":` + string(req.ID) + `,"result":{"count":1}}` + "\n"))
		return true
	})
	c := dialProxy(t, sock)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	waits := make(chan *client.Append, total)
	go func() {
		defer close(waits)
		for at := range total {
			a, err := c.AppendRunAsync(ctx, "r", "lease", at, []json.RawMessage{json.RawMessage(`{}`)}, client.AppendOptions{})
			if err != nil {
				t.Errorf("append %d: %v", at, err)
				return
			}
			waits <- a
		}
	}()
	for a := range waits {
		if _, err := a.Wait(ctx); err != nil {
			t.Fatalf("an append failed: %v", err)
		}
	}
	mu.Lock()
	defer mu.Unlock()
	if len(second) < total-cutAfter {
		t.Fatalf("only %d appends on the second connection", len(second))
	}
	if !slices.IsSorted(second) {
		for i := 1; i < len(second); i++ {
			if second[i] < second[i-1] {
				t.Fatalf("on the new connection, append at %d came after append at %d: a new call overtook a resent one", second[i], second[i-1])
			}
		}
	}
}
