package client_test

import (
	"bytes"
	"context"
	"io"
	"net"
	"path/filepath"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/seed5ad92d46/sous/daemon"
	"github.com/seed5ad92d46/sous/daemon/client"
	"github.com/seed5ad92d46/sous/daemon/wire"
	"github.com/seed5ad92d46/sous/internal/testutil"
)

// watchProxy relays connections to a daemon (over a Unix socket, or TCP
// for WebSocket) and watches what the daemon sends on each: whether
// binary frames ("dataBytes") and base64 data ("data":") went by. It can
// cut the first connection once that many bytes came down it.
type watchProxy struct {
	addr    string
	cutAt   int64 // 0: never
	mu      sync.Mutex
	conns   []*watched
	network string
}

// watched is what one connection carried from the daemon.
type watched struct {
	binary, base64 atomic.Bool
	down           atomic.Int64
}

var (
	binaryMark = []byte(`"dataBytes":`)
	base64Mark = []byte(`"data":"`)
)

func startWatchProxy(t *testing.T, network, target string, cutAt int64) *watchProxy {
	t.Helper()
	addr := "127.0.0.1:0"
	if network == "unix" {
		addr = filepath.Join(testutil.ShortTempDir(t), "w")
	}
	ln, err := net.Listen(network, addr)
	if err != nil {
		t.Fatal(err)
	}
	p := &watchProxy{addr: ln.Addr().String(), cutAt: cutAt, network: network}
	t.Cleanup(func() { ln.Close() })
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			up, err := net.Dial(network, target)
			if err != nil {
				c.Close()
				continue
			}
			w := &watched{}
			p.mu.Lock()
			first := len(p.conns) == 0
			p.conns = append(p.conns, w)
			p.mu.Unlock()
			t.Cleanup(func() { c.Close(); up.Close() })
			go func() { io.Copy(up, c); up.Close() }()
			go p.down(c, up, w, first)
		}
	}()
	return p
}

// down copies the daemon's bytes to the client, watching them.
func (p *watchProxy) down(c, up net.Conn, w *watched, first bool) {
	defer c.Close()
	buf := make([]byte, 64<<10)
	var tail []byte // the end of the last read, for a mark split across reads
	for {
		n, err := up.Read(buf)
		if n > 0 {
			seen := append(tail, buf[:n]...)
			if bytes.Contains(seen, binaryMark) {
				w.binary.Store(true)
			}
			if bytes.Contains(seen, base64Mark) {
				w.base64.Store(true)
			}
			tail = append(tail[:0], seen[max(0, len(seen)-16):]...)
			if _, werr := c.Write(buf[:n]); werr != nil {
				return
			}
			if w.down.Add(int64(n)) > p.cutAt && first && p.cutAt > 0 {
				up.Close()
				return
			}
		}
		if err != nil {
			return
		}
	}
}

func (p *watchProxy) watched() []*watched {
	p.mu.Lock()
	defer p.mu.Unlock()
	return append([]*watched(nil), p.conns...)
}

// spawnRandom spawns a child that writes random files, stdout and stderr
// interleaved, and checks that both streams arrive exact.
func spawnRandom(t *testing.T, c *client.Client, id string) {
	t.Helper()
	dir := t.TempDir()
	var want [2][]byte
	script, want0, want1 := testutil.RandomOutputScript(t, dir, 3<<20+1, 1<<20+2, 2<<20+3, 700<<10)
	want[0], want[1] = want0, want1
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	var got [2][]byte
	p, err := c.Spawn(ctx, client.SpawnSpec{ID: id, Command: "sh", Args: []string{"-c", script}, Cwd: dir}, func(f *wire.Frame) {
		switch f.Stream {
		case wire.Stdout:
			got[0] = append(got[0], f.Data...)
		case wire.Stderr:
			got[1] = append(got[1], f.Data...)
		}
	})
	if err != nil {
		t.Fatal(err)
	}
	if code, err := p.Wait(ctx); err != nil || code != 0 {
		t.Fatalf("wait: %d %v", code, err)
	}
	for i, name := range []string{"stdout", "stderr"} {
		if !bytes.Equal(got[i], want[i]) {
			t.Errorf("%s: %d bytes, want %d (equal: false)", name, len(got[i]), len(want[i]))
		}
	}
}

// The client turns binary frames on by itself when the daemon offers
// them, over the socket and over WebSocket, and a child's random output
// arrives exact; no base64 data crosses the connection.
func TestBinaryFramesByteExact(t *testing.T) {
	t.Run("socket", func(t *testing.T) {
		proxy := startWatchProxy(t, "unix", startDaemon(t, daemon.Config{}), 0)
		spawnRandom(t, dialProxy(t, proxy.addr), "r")
		checkWatched(t, proxy, true)
	})
	t.Run("websocket", func(t *testing.T) {
		addr, _ := startWSDaemon(t, daemon.Config{}, daemon.WebSocketOptions{RequireBearer: true})
		proxy := startWatchProxy(t, "tcp", addr, 0)
		spawnRandom(t, dialWS(t, proxy.addr), "r")
		checkWatched(t, proxy, true)
	})
}

// checkWatched checks that every connection the proxy relayed carried
// frames in the form wanted (binary, or base64 in JSON).
func checkWatched(t *testing.T, p *watchProxy, binary bool) {
	t.Helper()
	ws := p.watched()
	if len(ws) == 0 {
		t.Fatal("no connection went through the proxy")
	}
	for i, w := range ws {
		if w.binary.Load() != binary || w.base64.Load() == binary {
			t.Errorf("connection %d of %d: binary frames %v, base64 data %v; want binary %v", i+1, len(ws), w.binary.Load(), w.base64.Load(), binary)
		}
	}
}

// After a reconnect the client asks the new connection for binary frames
// before it reattaches: the replay and the rest of the output come binary
// too, exact.
func TestBinaryFramesAfterReconnect(t *testing.T) {
	proxy := startWatchProxy(t, "unix", startDaemon(t, daemon.Config{}), 2<<20)
	spawnRandom(t, dialProxy(t, proxy.addr), "r")
	if n := len(proxy.watched()); n < 2 {
		t.Fatalf("%d connections: the cut did not make the client reconnect", n)
	}
	checkWatched(t, proxy, true)
}

// A daemon without the extension (an older sous, a claustrum) is not asked:
// frames stay base64 in JSON, and arrive exact.
func TestBinaryFramesNotOffered(t *testing.T) {
	proxy := startWatchProxy(t, "unix", startDaemon(t, daemon.Config{DisableFeatures: []string{wire.FeatureBinaryFrames}}), 0)
	spawnRandom(t, dialProxy(t, proxy.addr), "r")
	checkWatched(t, proxy, false)
}
