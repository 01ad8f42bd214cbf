package client_test

import (
	"context"
	"errors"
	"net"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/seed5ad92d46/sous/daemon"
	"github.com/seed5ad92d46/sous/daemon/client"
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
	addr, _ := startWSDaemon(t, daemon.Config{ReplayMemLimit: 1 << 20}, daemon.WebSocketOptions{RequireBearer: true})
	proxy := faultproxy.Start(t, addr, faultproxy.Options{TCP: true, MinBytes: 200 << 10, MaxBytes: 600 << 10})
	checkStreamByteExact(t, dialWS(t, proxy.Path()), proxy, " over WebSocket")
}

func TestWebSocketReconnectStdinExactlyOnce(t *testing.T) {
	addr, _ := startWSDaemon(t, daemon.Config{}, daemon.WebSocketOptions{RequireBearer: true})
	proxy := faultproxy.Start(t, addr, faultproxy.Options{TCP: true, MinBytes: 50 << 10, MaxBytes: 150 << 10})
	checkStdinExactlyOnce(t, dialWS(t, proxy.Path()), proxy, " over WebSocket")
}

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
	if err := open("ws://"+addr, ""); !errors.Is(err, client.ErrNoToken) {
		t.Errorf("no token: %v, want ErrNoToken", err)
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
