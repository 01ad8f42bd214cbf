package client_test

import (
	"bufio"
	"bytes"
	"context"
	"crypto/rand"
	"crypto/sha256"
	"net"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/seed5ad92d46/sous/daemon"
	"github.com/seed5ad92d46/sous/daemon/client"
	"github.com/seed5ad92d46/sous/daemon/wire"
	"github.com/seed5ad92d46/sous/internal/faultproxy"
)

// startWSDaemon serves a real daemon's WebSocket endpoint on a loopback
// port and returns its host:port.
func startWSDaemon(t *testing.T, cfg daemon.Config, opt daemon.WebSocketOptions) (string, *daemon.Server) {
	t.Helper()
	cfg.Token = testToken
	if cfg.StateDir == "" {
		cfg.StateDir = filepath.Join(t.TempDir(), "state")
	}
	srv, err := daemon.New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	go srv.ServeWebSocket(ln, opt)
	t.Cleanup(func() { srv.Close() })
	return ln.Addr().String(), srv
}

// dialWS connects to ws://addr/ through the fault proxy's address.
func dialWS(t *testing.T, addr string) *client.Client {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	c, err := client.DialWebSocket(ctx, "ws://"+addr+"/", testToken, client.Options{ReconnectTimeout: 20 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	return c
}

// The WebSocket transport keeps the socket's guarantees: a stream cut at
// random points (mid-message, mid-frame header) arrives byte-exact, with
// nothing lost or repeated. Only the link differs; the reconnect machinery
// is the same.
func TestWebSocketReconnectStreamsByteExact(t *testing.T) {
	size := 100 << 20
	if testing.Short() {
		size = 8 << 20
	}
	src := filepath.Join(t.TempDir(), "random")
	data := make([]byte, size)
	rand.Read(data)
	if err := os.WriteFile(src, data, 0o600); err != nil {
		t.Fatal(err)
	}
	want := sha256.Sum256(data)
	data = nil

	addr, _ := startWSDaemon(t, daemon.Config{ReplayMemLimit: 1 << 20}, daemon.WebSocketOptions{RequireBearer: true})
	proxy := faultproxy.Start(t, addr, faultproxy.Options{TCP: true, MinBytes: 200 << 10, MaxBytes: 600 << 10})
	c := dialWS(t, proxy.Path())

	h := sha256.New()
	var got atomic.Int64
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	start := time.Now()
	p, err := c.Spawn(ctx, client.SpawnSpec{ID: "stream", Command: "cat", Args: []string{src}}, func(f *wire.Frame) {
		if f.Stream == wire.Stdout {
			h.Write(f.Data)
			got.Add(int64(len(f.Data)))
		}
	})
	if err != nil {
		t.Fatal(err)
	}
	code, err := p.Wait(ctx)
	if err != nil || code != 0 {
		t.Fatalf("wait: %d, %v (received %d of %d bytes, %d cuts)", code, err, got.Load(), size, proxy.Cuts())
	}
	if got.Load() != int64(size) || !bytes.Equal(h.Sum(nil), want[:]) {
		t.Fatalf("received %d bytes (want %d), sha256 match %v", got.Load(), size, bytes.Equal(h.Sum(nil), want[:]))
	}
	if p.Lost() != 0 {
		t.Fatalf("client reports %d lost frames", p.Lost())
	}
	if proxy.Cuts() < 10 {
		t.Fatalf("only %d cuts: the test did not exercise reconnects", proxy.Cuts())
	}
	t.Logf("%d MiB byte-exact over WebSocket across %d dropped connections in %v", size>>20, proxy.Cuts(), time.Since(start).Round(time.Millisecond))
}

func TestWebSocketReconnectStdinExactlyOnce(t *testing.T) {
	lines := 50000
	if testing.Short() {
		lines = 5000
	}
	addr, _ := startWSDaemon(t, daemon.Config{}, daemon.WebSocketOptions{RequireBearer: true})
	proxy := faultproxy.Start(t, addr, faultproxy.Options{TCP: true, MinBytes: 50 << 10, MaxBytes: 150 << 10})
	c := dialWS(t, proxy.Path())

	out := filepath.Join(t.TempDir(), "received")
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	p, err := c.Spawn(ctx, client.SpawnSpec{ID: "stdin", Command: "sh", Args: []string{"-c", "cat > " + out}}, nil)
	if err != nil {
		t.Fatal(err)
	}
	for i := range lines {
		if _, err := p.Write(ctx, []byte("line "+strconv.Itoa(i)+"\n")); err != nil {
			t.Fatalf("write line %d: %v (%d cuts so far)", i, err, proxy.Cuts())
		}
	}
	if err := p.CloseStdin(ctx); err != nil {
		t.Fatal(err)
	}
	if code, err := p.Wait(ctx); err != nil || code != 0 {
		t.Fatalf("wait: code %d, %v", code, err)
	}
	f, err := os.Open(out)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	n := 0
	for sc.Scan() {
		if want := "line " + strconv.Itoa(n); sc.Text() != want {
			t.Fatalf("line %d is %q, want %q", n, sc.Text(), want)
		}
		n++
	}
	if n != lines {
		t.Fatalf("child received %d lines, want %d", n, lines)
	}
	if proxy.Cuts() < 5 {
		t.Fatalf("only %d cuts: the test did not exercise reconnects", proxy.Cuts())
	}
	t.Logf("%d stdin lines exactly once over WebSocket across %d dropped connections", lines, proxy.Cuts())
}

// A daemon restart on the same address (a going-away close) is survived
// like a socket EOF: the client redials and the daemon's processes, gone
// with it, fail clearly.
func TestWebSocketDaemonGoingAway(t *testing.T) {
	t.Parallel()
	addr, srv := startWSDaemon(t, daemon.Config{}, daemon.WebSocketOptions{RequireBearer: true})
	ctx := context.Background()
	c, err := client.DialWebSocket(ctx, "ws://"+addr, testToken, client.Options{ReconnectTimeout: 300 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	p, err := c.Spawn(ctx, client.SpawnSpec{ID: "long", Command: "sleep", Args: []string{"30"}}, nil)
	if err != nil {
		t.Fatal(err)
	}
	srv.Close()
	if _, err := p.Wait(ctx); err == nil || !strings.Contains(err.Error(), "connection to the daemon lost") {
		t.Fatalf("wait err = %v", err)
	}
}

func TestWebSocketDialErrors(t *testing.T) {
	t.Parallel()
	addr, _ := startWSDaemon(t, daemon.Config{}, daemon.WebSocketOptions{RequireBearer: true, MaxConnections: 1})
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	open := func(url, token string) error {
		c, err := client.Open(ctx, client.Target{URL: url, Token: token})
		if err == nil {
			c.Shutdown()
		}
		return err
	}
	if err := open("ws://"+addr, "wrong"); err == nil || !strings.Contains(err.Error(), "daemon refused the token (HTTP 401: Unauthorized: invalid bearer token)") {
		t.Errorf("wrong token: %v", err)
	}
	if err := open("ws://"+addr+"/nope", testToken); err == nil || !strings.Contains(err.Error(), "no WebSocket endpoint there (HTTP 404") {
		t.Errorf("wrong path: %v", err)
	}
	ln, _ := net.Listen("tcp", "127.0.0.1:0")
	dead := ln.Addr().String()
	ln.Close()
	if err := open("ws://"+dead, testToken); err == nil || !strings.Contains(err.Error(), "connect to daemon at ws://"+dead) {
		t.Errorf("no daemon: %v", err)
	}
	held, err := client.Open(ctx, client.Target{URL: "ws://" + addr, Token: testToken})
	if err != nil {
		t.Fatal(err)
	}
	defer held.Shutdown()
	if err := open("ws://"+addr, testToken); err == nil || !strings.Contains(err.Error(), "daemon is busy (HTTP 503: sous daemon: too many connections (limit 1); retry later)") {
		t.Errorf("over the limit: %v", err)
	}
	if err := held.Call(ctx, "server.ping", nil, nil); err != nil {
		t.Errorf("held connection: %v", err)
	}
	for _, bad := range []string{"ws://", "ws:///path", "ws://user:pw@host:1"} {
		if _, _, err := client.Kind(bad); err == nil {
			t.Errorf("Kind(%q) accepted", bad)
		}
	}
}
