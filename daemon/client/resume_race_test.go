package client_test

import (
	"bytes"
	"context"
	"io"
	"net"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/seed5ad92d46/sous/daemon"
	"github.com/seed5ad92d46/sous/daemon/client"
	"github.com/seed5ad92d46/sous/daemon/wire"
)

// cutAfterReattach is a connection that breaks right after delivering the
// answer to a process.reattach: the moment a reconnecting client has
// resumed its processes but not yet made the link its current one.
type cutAfterReattach struct {
	net.Conn
	mu  sync.Mutex
	cut bool
}

func (c *cutAfterReattach) Read(p []byte) (int, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.cut {
		return 0, io.EOF
	}
	n, err := c.Conn.Read(p)
	if i := bytes.Index(p[:n], []byte(`"stdinApplied"`)); i >= 0 {
		if nl := bytes.IndexByte(p[i:n], '\n'); nl >= 0 {
			n = i + nl + 1
			c.cut = true
			c.Conn.Close()
			return n, nil
		}
	}
	return n, err
}

// TestReconnectLinkBreaksWhileResuming: a reconnect whose fresh connection
// breaks after the reattach answered (nothing else in flight on it) must
// dial again. It used to make the dead link current: its reader was gone,
// so the client waited forever (seen as a 2-minute hang of the 200 MiB
// fault test). The race is repeated until it has been hit many times.
func TestReconnectLinkBreaksWhileResuming(t *testing.T) {
	sock := startDaemon(t, daemon.Config{})
	var (
		mu    sync.Mutex
		dials int
		cur   net.Conn
	)
	dial := func(ctx context.Context) (io.ReadWriteCloser, error) {
		var d net.Dialer
		nc, err := d.DialContext(ctx, "unix", sock)
		if err != nil {
			return nil, err
		}
		mu.Lock()
		defer mu.Unlock()
		dials++
		if dials%2 == 0 { // every reconnect's first attempt breaks while resuming
			return &cutAfterReattach{Conn: nc}, nil
		}
		cur = nc
		return nc, nil
	}
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	c, err := client.Dial(ctx, dial, testToken, client.Options{ReconnectTimeout: 10 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	var (
		omu sync.Mutex
		out bytes.Buffer
	)
	p, err := c.Spawn(ctx, client.SpawnSpec{ID: "echo", Command: "cat"}, func(f *wire.Frame) {
		if f.Stream == wire.Stdout {
			omu.Lock()
			out.Write(f.Data)
			omu.Unlock()
		}
	})
	if err != nil {
		t.Fatal(err)
	}
	var want bytes.Buffer
	for i := range 30 {
		mu.Lock()
		cur.Close() // cut the working connection: the client reconnects
		mu.Unlock()
		line := "round " + strconv.Itoa(i) + "\n"
		want.WriteString(line)
		wctx, wcancel := context.WithTimeout(ctx, 10*time.Second)
		_, err := p.Write(wctx, []byte(line))
		wcancel()
		if err != nil {
			t.Fatalf("round %d: write after the reconnect: %v (%d dials)", i, err, dials)
		}
		deadline := time.Now().Add(10 * time.Second)
		for {
			omu.Lock()
			ok := out.String() == want.String()
			omu.Unlock()
			if ok {
				break
			}
			if time.Now().After(deadline) {
				t.Fatalf("round %d: the echo never came back (%d dials): the client is stuck on a dead connection", i, dials)
			}
			time.Sleep(5 * time.Millisecond)
		}
	}
	p.CloseStdin(ctx)
	if code, err := p.Wait(ctx); err != nil || code != 0 {
		t.Fatalf("wait: %d %v", code, err)
	}
}
