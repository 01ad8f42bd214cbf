package client_test

import (
	"context"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/coder/websocket"

	"github.com/seed5ad92d46/sous/daemon"
	"github.com/seed5ad92d46/sous/daemon/client"
	"github.com/seed5ad92d46/sous/internal/testutil"
)

// fakeSSH writes an executable script that stands in for ssh: it counts its
// runs in a file next to it, then runs body (a real shell, as the far side
// of ssh would). It returns the script and the count file.
func fakeSSH(t *testing.T, body string) (script, runs string) {
	t.Helper()
	dir := t.TempDir()
	script, runs = filepath.Join(dir, "ssh"), filepath.Join(dir, "runs")
	src := "#!/bin/sh\necho run >> " + runs + "\n" + body + "\n"
	if err := os.WriteFile(script, []byte(src), 0o755); err != nil {
		t.Fatal(err)
	}
	return script, runs
}

// TestSSHFirstConnectFailsAtOnce: a connection that never worked once is
// not redialed. ssh that fails after it started (the remote command not
// found, the bridge finding no socket, the key refused: all come after
// the login's round trips, so later than the dial's first glance) used to
// be dialed again for the whole reconnect timeout, about 100 logins in
// 30 s, and end in "gave up reconnecting"; it must fail on the first run
// with ssh's own words.
func TestSSHFirstConnectFailsAtOnce(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name, body, want string
	}{
		{"remote command not found", `sleep 0.3; echo "bash: line 1: sous: command not found" >&2; exit 127`,
			"ssh: bash: line 1: sous: command not found"},
		{"bridge finds no socket", `sleep 0.3; echo "sous: dial server: dial unix /nope.sock: connect: no such file or directory" >&2; exit 1`,
			"ssh: sous: dial server: dial unix /nope.sock: connect: no such file or directory"},
		{"key refused", `sleep 0.3; echo "root@127.0.0.1: Permission denied (publickey)." >&2; exit 255`,
			"ssh: root@127.0.0.1: Permission denied (publickey)."},
		// A bridge that reads the request and then leaves without a word:
		// the stream simply ends.
		{"bridge ends silently", `sleep 0.3; head -c 1 >/dev/null; exit 0`,
			"the connection closed before the daemon answered"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			script, runs := fakeSSH(t, tc.body)
			ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
			defer cancel()
			start := time.Now()
			conn, err := client.Open(ctx, client.Target{URL: "ssh://root@build/run/sous.sock", Token: "tok",
				SSH: client.SSHOptions{SSH: script}, Options: client.Options{ReconnectTimeout: 10 * time.Second}})
			took := time.Since(start)
			if err == nil {
				conn.Close()
				t.Fatal("connected through an ssh that failed")
			}
			msg := err.Error()
			if !strings.Contains(msg, tc.want) || strings.Contains(msg, "reconnect") || strings.Contains(msg, "\n") {
				t.Errorf("error %q\nwant one line with %q, and nothing about reconnecting", msg, tc.want)
			}
			if !strings.HasPrefix(msg, "connect to ssh://root@build/run/sous.sock: ") {
				t.Errorf("error %q does not name the target", msg)
			}
			if took > 3*time.Second {
				t.Errorf("failing took %s, want well under the reconnect timeout", took.Round(time.Millisecond))
			}
			if b, _ := os.ReadFile(runs); strings.Count(string(b), "run") != 1 {
				t.Errorf("ssh ran %d times, want once", strings.Count(string(b), "run"))
			}
		})
	}
}

// TestUnixFirstConnectFailsAtOnce: the same over a socket whose listener
// closes every connection at once (a relay with nothing behind it).
func TestUnixFirstConnectFailsAtOnce(t *testing.T) {
	t.Parallel()
	sock := filepath.Join(testutil.ShortTempDir(t), "s")
	ln, err := net.Listen("unix", sock)
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			c.Close()
		}
	}()
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	start := time.Now()
	c, err := client.DialUnix(ctx, sock, "tok", client.Options{ReconnectTimeout: 10 * time.Second})
	if err == nil {
		c.Close()
		t.Fatal("connected to a socket that closes at once")
	}
	if took := time.Since(start); took > 3*time.Second {
		t.Errorf("failing took %s: %v", took.Round(time.Millisecond), err)
	}
	if msg := err.Error(); strings.Contains(msg, "reconnect") || !strings.Contains(msg, sock) {
		t.Errorf("error %q: want the socket named and nothing about reconnecting", msg)
	}
}

// TestWebSocketFirstConnectFailsAtOnce: a WebSocket target fails at once,
// naming why, whether nothing listens, the path is not the daemon's, the
// bearer is refused, or an endpoint takes the upgrade and closes before
// answering (a proxy with nothing behind it).
func TestWebSocketFirstConnectFailsAtOnce(t *testing.T) {
	t.Parallel()
	addr, _ := startWSDaemon(t, daemon.Config{}, daemon.WebSocketOptions{Path: "/rpc", RequireBearer: true})
	closer := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		ws, err := websocket.Accept(w, r, nil)
		if err != nil {
			return
		}
		ws.Close(websocket.StatusGoingAway, "nothing behind this")
	}))
	defer closer.Close()
	for _, tc := range []struct {
		name, url, token, want string
	}{
		{"nothing listens", "ws://" + freeAddr(t) + "/", testToken, "connection refused"},
		{"wrong path", "ws://" + addr + "/", testToken, "no WebSocket endpoint there (HTTP 404"},
		{"bearer refused", "ws://" + addr + "/rpc", "wrong", "daemon refused the token (HTTP 401"},
		{"closed after the upgrade", "ws://" + strings.TrimPrefix(closer.URL, "http://") + "/", testToken,
			"the connection closed before the daemon answered"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
			defer cancel()
			start := time.Now()
			c, err := client.DialWebSocket(ctx, tc.url, tc.token, client.Options{ReconnectTimeout: 10 * time.Second})
			if err == nil {
				c.Close()
				t.Fatal("connected")
			}
			if took := time.Since(start); took > 3*time.Second {
				t.Errorf("failing took %s", took.Round(time.Millisecond))
			}
			if msg := err.Error(); !strings.Contains(msg, tc.want) || !strings.Contains(msg, tc.url) || strings.Contains(msg, "reconnect") {
				t.Errorf("error %q: want %q and the URL, and nothing about reconnecting", msg, tc.want)
			}
		})
	}
}

// freeAddr is a loopback host:port nothing listens on.
func freeAddr(t *testing.T) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	return ln.Addr().String()
}
