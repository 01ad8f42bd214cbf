package client_test

import (
	"bytes"
	"context"
	"encoding/json"
	"net"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/seed5ad92d46/sous/daemon/client"
)

// chunkDaemon serves a Unix socket that answers every request with an
// empty result ({"count":1} for run.append), and keeps what each read of
// the connection returned: where the client's writes end shows.
type chunkDaemon struct {
	sock   string
	mu     sync.Mutex
	chunks []string
}

func newChunkDaemon(t *testing.T) *chunkDaemon {
	t.Helper()
	d := &chunkDaemon{}
	d.sock = fakeDaemonConns(t, func(_ int, nc net.Conn) {
		buf := make([]byte, 64<<10)
		var pending []byte
		for {
			n, err := nc.Read(buf)
			if err != nil {
				return
			}
			d.mu.Lock()
			d.chunks = append(d.chunks, string(buf[:n]))
			d.mu.Unlock()
			pending = append(pending, buf[:n]...)
			for {
				i := bytes.IndexByte(pending, '\n')
				if i < 0 {
					break
				}
				var req struct {
					ID     json.RawMessage `json:"id"`
					Method string          `json:"method"`
				}
				json.Unmarshal(pending[:i], &req)
				pending = pending[i+1:]
				result := `{}`
				if req.Method == "run.append" {
					result = `{"count":1}`
				}
				nc.Write([]byte(`{"jsonrpc":"2.0","id":` + string(req.ID) + `,"result":` + result + "}\n"))
			}
		}
	})
	return d
}

// reads returns the reads that held method, in order.
func (d *chunkDaemon) reads(method string) []string {
	d.mu.Lock()
	defer d.mu.Unlock()
	var out []string
	for _, c := range d.chunks {
		if strings.Contains(c, `"method":"`+method+`"`) {
			out = append(out, c)
		}
	}
	return out
}

// A run.append sent Ahead waits for the client's next request and goes in
// the same write, before it; one nobody follows goes when its answer is
// waited for, or with SendHeld.
func TestAppendAheadGoesWithTheNextRequest(t *testing.T) {
	d := newChunkDaemon(t)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	c, err := client.DialUnix(ctx, d.sock, "tok", client.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	rec := []json.RawMessage{json.RawMessage(`{"k":"call","seq":1}`)}

	a, err := c.AppendRunAsync(ctx, "r", "lease", 1, rec, client.AppendOptions{Ahead: true})
	if err != nil {
		t.Fatal(err)
	}
	time.Sleep(100 * time.Millisecond)
	if got := d.reads("run.append"); len(got) != 0 {
		t.Fatalf("run.append sent Ahead went before the next request: %q", got)
	}
	if err := c.Call(ctx, "server.ping", nil, nil); err != nil {
		t.Fatal(err)
	}
	got := d.reads("run.append")
	if len(got) != 1 || !strings.Contains(got[0], `"method":"server.ping"`) ||
		strings.Index(got[0], "run.append") > strings.Index(got[0], "server.ping") {
		t.Fatalf("want one read with the run.append, then the ping: %q", got)
	}
	if n, err := a.Wait(ctx); err != nil || n != 1 {
		t.Fatalf("Wait: %d %v", n, err)
	}

	// Nothing follows: waiting for the answer sends it.
	a, err = c.AppendRunAsync(ctx, "r", "lease", 2, rec, client.AppendOptions{Ahead: true})
	if err != nil {
		t.Fatal(err)
	}
	if n, err := a.Wait(ctx); err != nil || n != 1 {
		t.Fatalf("Wait of a held append: %d %v", n, err)
	}

	// Nor here: SendHeld sends it.
	if _, err := c.AppendRunAsync(ctx, "r", "lease", 3, rec, client.AppendOptions{Ahead: true}); err != nil {
		t.Fatal(err)
	}
	if err := c.SendHeld(); err != nil {
		t.Fatal(err)
	}
	for deadline := time.Now().Add(5 * time.Second); len(d.reads("run.append")) < 3; time.Sleep(5 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("SendHeld did not send: %q", d.reads("run.append"))
		}
	}
}
