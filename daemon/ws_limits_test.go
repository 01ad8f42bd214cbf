package daemon

import (
	"bufio"
	"errors"
	"io"
	"net"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/seed5ad92d46/sous/internal/testutil"
)

// rawHTTP connects to the daemon's WebSocket port and sends req as is.
func rawHTTP(t *testing.T, d *testDaemon, req string) net.Conn {
	t.Helper()
	c, err := net.Dial("tcp", strings.TrimPrefix(strings.SplitN(d.wsURL, "/", 4)[2], ""))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	if req != "" {
		if _, err := io.WriteString(c, req); err != nil {
			t.Fatal(err)
		}
	}
	return c
}

// waitClosedByServer reads c until the daemon closes it, which must happen
// within limit.
func waitClosedByServer(t *testing.T, c net.Conn, what string, limit time.Duration) {
	t.Helper()
	c.SetReadDeadline(time.Now().Add(limit))
	_, err := io.Copy(io.Discard, c)
	var ne net.Error
	if errors.As(err, &ne) && ne.Timeout() {
		t.Fatalf("%s: the daemon still holds the connection open after %v", what, limit)
	}
}

func upgradeRequest(path, auth string) string {
	r := "GET " + path + " HTTP/1.1\r\nHost: x\r\nConnection: Upgrade\r\nUpgrade: websocket\r\n" +
		"Sec-WebSocket-Version: 13\r\nSec-WebSocket-Key: dGhlIHNhbXBsZSBub25jZQ==\r\n"
	if auth != "" {
		r += "Authorization: " + auth + "\r\n"
	}
	return r + "\r\n"
}

// A refused upgrade (no or a wrong bearer, a wrong path, plain HTTP) gets its
// answer and the connection is closed: a keep-alive connection left open
// after a 401 held a descriptor forever.
func TestWebSocketRefusalClosesTheConnection(t *testing.T) {
	t.Parallel()
	d := startDaemonWS(t, Config{}, WebSocketOptions{RequireBearer: true})
	for what, req := range map[string]string{
		"401 without a bearer": upgradeRequest("/", ""),
		"401 wrong bearer":     upgradeRequest("/", "Bearer nope"),
		"404 wrong path":       upgradeRequest("/elsewhere", "Bearer "+testToken),
		"426 plain HTTP":       "GET / HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer " + testToken + "\r\n\r\n",
	} {
		c := rawHTTP(t, d, req)
		resp, err := http.ReadResponse(bufio.NewReader(c), nil)
		if err != nil {
			t.Fatalf("%s: %v", what, err)
		}
		resp.Body.Close()
		if !strings.HasPrefix(what, resp.Status[:3]) {
			t.Errorf("%s: got %s", what, resp.Status)
		}
		waitClosedByServer(t, c, what, 2*time.Second)
	}
}

// Peers that connect and say nothing hold at most MaxPending descriptors of
// the daemon, however many they are; token holders on the Unix socket are
// served meanwhile; and once the handshake timeout passes the silent peers
// are dropped and a token holder gets a WebSocket. Not parallel: it counts
// the process's descriptors.
func TestWebSocketSilentPeersAreBounded(t *testing.T) {
	const maxPending, peers = 8, 100
	d := startDaemonWS(t, Config{}, WebSocketOptions{RequireBearer: true, MaxPending: maxPending, HandshakeTimeout: time.Second})
	d.dialWS().wantResult("server.ping", "", `{"pong":true}`) // warm up: its descriptors are counted in base
	base := testutil.OpenFDs(t)
	conns := make([]net.Conn, peers)
	for i := range conns {
		conns[i] = rawHTTP(t, d, "")
	}
	// The daemon's share: what is open beyond the peers' own descriptors.
	held := func() int { return testutil.OpenFDs(t) - base - peers }
	st := d.srv.Stats()
	deadline := time.Now().Add(2 * time.Second)
	for st.WebSocketsShed.Load()+st.WebSocketsPending.Load() < peers && time.Now().Before(deadline) {
		time.Sleep(10 * time.Millisecond) // until the daemon has accepted them all
	}
	if n := held(); n > maxPending+2 {
		t.Fatalf("%d silent peers hold %d of the daemon's descriptors, want at most %d", peers, n, maxPending)
	}
	if got := d.srv.Stats().WebSocketsShed.Load(); got < peers-maxPending {
		t.Errorf("WebSocketsShed = %d, want at least %d", got, peers-maxPending)
	}
	d.dial().wantResult("server.ping", "", `{"pong":true}`)

	// The handshake timeout drops the silent peers that got in.
	for i, c := range conns {
		waitClosedByServer(t, c, "silent peer "+string(rune('0'+i%10)), 3*time.Second)
	}
	if n := d.srv.Stats().WebSocketsPending.Load(); n != 0 {
		t.Errorf("WebSocketsPending = %d after the silent peers went", n)
	}
	d.dialWS().wantResult("server.ping", "", `{"pong":true}`)
}

// 260 refused peers that keep their end open cost the daemon nothing once
// refused: it closes each, and a token holder is served after them.
func TestWebSocketRefusedPeersDoNotAccumulate(t *testing.T) {
	const peers = 260
	d := startDaemonWS(t, Config{}, WebSocketOptions{RequireBearer: true})
	d.dialWS().wantResult("server.ping", "", `{"pong":true}`)
	base := testutil.OpenFDs(t)
	conns := make([]net.Conn, 0, peers)
	for len(conns) < peers {
		// In batches below the pending limit: these peers are refused, not
		// shed, and each sees its 401.
		batch := len(conns)
		for i := 0; i < 32 && len(conns) < peers; i++ {
			conns = append(conns, rawHTTP(t, d, upgradeRequest("/", "")))
		}
		for _, c := range conns[batch:] {
			resp, err := http.ReadResponse(bufio.NewReader(c), nil)
			if err != nil {
				t.Fatalf("peer %d: %v (shed %d)", len(conns), err, d.srv.Stats().WebSocketsShed.Load())
			}
			resp.Body.Close()
			if resp.StatusCode != http.StatusUnauthorized {
				t.Fatalf("status %s", resp.Status)
			}
		}
	}
	for _, c := range conns {
		waitClosedByServer(t, c, "refused peer", 2*time.Second)
	}
	if n := testutil.OpenFDs(t) - base - peers; n > 2 {
		t.Errorf("%d refused peers still hold %d of the daemon's descriptors", peers, n)
	}
	d.dialWS().wantResult("server.ping", "", `{"pong":true}`)
	d.dial().wantResult("server.ping", "", `{"pong":true}`)
	// The upgraded connection is the daemon's (MaxConnections), no longer
	// pending.
	if n := d.srv.Stats().WebSocketsPending.Load(); n != 0 {
		t.Errorf("WebSocketsPending = %d with one WebSocket open", n)
	}
}
