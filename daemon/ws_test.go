package daemon

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/coder/websocket"

	"github.com/seed5ad92d46/sous/daemon/wire"
	"github.com/seed5ad92d46/sous/internal/testutil"
)

// startDaemonWS is startDaemon also serving WebSocket on a loopback port.
func startDaemonWS(t *testing.T, cfg Config, opt WebSocketOptions) *testDaemon {
	t.Helper()
	d := startDaemon(t, cfg)
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	served := make(chan error, 1)
	go func() { served <- d.srv.ServeWebSocket(ln, opt) }()
	t.Cleanup(func() {
		d.srv.Close()
		if err := <-served; err != nil {
			t.Errorf("ServeWebSocket: %v", err)
		}
	})
	path := opt.Path
	if path == "" {
		path = "/"
	}
	d.wsURL = "ws://" + ln.Addr().String() + path
	return d
}

// dialWSConn opens a WebSocket to the daemon with the valid bearer.
func (d *testDaemon) dialWSConn(header http.Header) (*websocket.Conn, error) {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	if header == nil {
		header = http.Header{"Authorization": {"Bearer " + testToken}}
	}
	ws, resp, err := websocket.Dial(ctx, d.wsURL, &websocket.DialOptions{HTTPHeader: header})
	if err != nil {
		if resp != nil {
			return nil, fmt.Errorf("%w (HTTP %d)", err, resp.StatusCode)
		}
		return nil, err
	}
	ws.SetReadLimit(64 << 20)
	return ws, nil
}

// dialWS is dial over WebSocket: the same rawClient, the same exact lines.
func (d *testDaemon) dialWS() *rawClient {
	d.t.Helper()
	ws, err := d.dialWSConn(nil)
	if err != nil {
		d.t.Fatal(err)
	}
	return d.newRawClient(&wsLineConn{t: d.t, ws: ws})
}

// wsLineConn shows a WebSocket as the NDJSON byte stream the socket tests
// read and write: each message read is followed by a newline (and must not
// contain one: one JSON document per message) but a binary frame's, which
// is as the socket sends it already; and each line written is
// sent as one message, without its newline. A write that does not end in a
// newline is sent as a message as it is.
type wsLineConn struct {
	t    *testing.T
	ws   *websocket.Conn
	rest []byte // what is left of the current message, newline included
	wmu  sync.Mutex
	// binary counts the binary messages read: binary frames.
	binary atomic.Int64
}

func (c *wsLineConn) Read(p []byte) (int, error) {
	if len(c.rest) == 0 {
		typ, msg, err := c.ws.Read(context.Background())
		if err != nil {
			if websocket.CloseStatus(err) != -1 {
				return 0, fmt.Errorf("%w: %v", io.EOF, err)
			}
			return 0, err
		}
		if typ == websocket.MessageBinary {
			// A binary frame (connection.binaryFrames): its header line,
			// '\n' and its data, as the socket sends it.
			var f wire.Frame
			if _, err := wire.ParseBinaryFrame(msg, &f); err != nil {
				c.t.Errorf("daemon sent a binary message that is not a binary frame: %v", err)
			}
			c.binary.Add(1)
			c.rest = msg
			n := copy(p, c.rest)
			c.rest = c.rest[n:]
			return n, nil
		}
		if bytes.IndexByte(msg, '\n') >= 0 {
			c.t.Errorf("daemon sent a message with a newline: %q", msg)
		}
		c.rest = append(msg, '\n')
	}
	n := copy(p, c.rest)
	c.rest = c.rest[n:]
	return n, nil
}

func (c *wsLineConn) Write(p []byte) (int, error) {
	c.wmu.Lock()
	defer c.wmu.Unlock()
	n := len(p)
	for len(p) > 0 {
		i := bytes.IndexByte(p, '\n')
		msg := p
		if i >= 0 {
			msg, p = p[:i], p[i+1:]
		} else {
			p = nil
		}
		if err := c.ws.Write(context.Background(), websocket.MessageText, msg); err != nil {
			return 0, err
		}
	}
	return n, nil
}

func (c *wsLineConn) Close() error                     { return c.ws.CloseNow() }
func (c *wsLineConn) LocalAddr() net.Addr              { return &net.TCPAddr{} }
func (c *wsLineConn) RemoteAddr() net.Addr             { return &net.TCPAddr{} }
func (c *wsLineConn) SetDeadline(time.Time) error      { return nil }
func (c *wsLineConn) SetReadDeadline(time.Time) error  { return nil }
func (c *wsLineConn) SetWriteDeadline(time.Time) error { return nil }

// upgrade makes a raw upgrade request and returns the HTTP status and body:
// refusals must happen before any WebSocket exists.
func upgrade(t *testing.T, url string, header http.Header) (int, string) {
	t.Helper()
	req, err := http.NewRequest("GET", strings.Replace(url, "ws://", "http://", 1), nil)
	if err != nil {
		t.Fatal(err)
	}
	for k, v := range header {
		req.Header[k] = v
	}
	req.Header.Set("Connection", "Upgrade")
	req.Header.Set("Upgrade", "websocket")
	req.Header.Set("Sec-WebSocket-Version", "13")
	req.Header.Set("Sec-WebSocket-Key", "dGhlIHNhbXBsZSBub25jZQ==")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	if resp.StatusCode == http.StatusSwitchingProtocols {
		return resp.StatusCode, ""
	}
	body, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, strings.TrimSpace(string(body))
}

func TestWebSocketValidationOrder(t *testing.T) {
	t.Parallel()
	d := startDaemonWS(t, Config{}, WebSocketOptions{RequireBearer: true})
	checkValidationOrder(t, d.dialWS())
}

func TestWebSocketMethodsAndCapabilities(t *testing.T) {
	t.Parallel()
	d := startDaemonWS(t, Config{Version: "v9"}, WebSocketOptions{RequireBearer: true})
	c := d.dialWS()
	c.wantResult("server.ping", "", `{"pong":true}`)
	caps := c.result("server.capabilities", "")
	if !strings.Contains(caps, `"transport.websocket"`) {
		t.Errorf("capabilities lack transport.websocket: %s", caps)
	}
	// String ids are echoed exactly; a trailing newline is accepted.
	c.send(`{"jsonrpc":"2.0","id":"a\"b","method":"server.ping","auth":"` + testToken + `"}` + "\n\n")
	if got := string(c.respFor(`"a\"b"`)); got != `{"jsonrpc":"2.0","id":"a\"b","result":{"pong":true}}`+"\n" {
		t.Errorf("string id: %s", got)
	}
	// A blank message is ignored, as a blank line is.
	c.send("\n")
	c.wantResult("server.ping", "", `{"pong":true}`)
}

func TestWebSocketProcessesAndCrossTransportReattach(t *testing.T) {
	t.Parallel()
	d := startDaemonWS(t, Config{}, WebSocketOptions{RequireBearer: true})
	c := d.dialWS()
	// Big output: every 32 KiB frame is its own message, byte-exact.
	c.result("process.spawn", shParams("big", `head -c 3000000 /dev/zero | tr '\0' 'x'; echo done >&2`))
	frames := c.waitExit("big")
	checkSeqs(t, frames, 1)
	if out := output(frames, wire.Stdout); len(out) != 3000000 || bytes.Count(out, []byte("x")) != 3000000 {
		t.Fatalf("stdout %d bytes", len(out))
	}
	if got := string(output(frames, wire.Stderr)); got != "done\n" {
		t.Fatalf("stderr %q", got)
	}

	// Stdin with offsets, then a process spawned over WebSocket is picked
	// up on the socket and the other way round.
	c.result("process.spawn", `{"id":"cat","command":"cat"}`)
	c.wantResult("process.stdin", `{"id":"cat","data":"aGVsbG8K","offset":0}`, `{"success":true,"applied":6}`)
	c.wantResult("process.stdin", `{"id":"cat","data":"aGVsbG8K","offset":0}`, `{"success":true,"applied":6,"duplicate":true}`)
	c.waitFrames("cat", 1)
	c.nc.Close()
	u := d.dial()
	u.wantResult("process.reattach", `{"id":"cat","fromSeq":0}`, `{"found":true,"running":true,"firstSeq":1,"lastSeq":1,"stdinApplied":6}`)
	u.result("process.spawn", shParams("sock", `echo from-socket`))
	u.waitExit("sock")
	w := d.dialWS()
	w.wantResult("process.reattach", `{"id":"sock","fromSeq":0}`, `{"found":true,"running":false,"firstSeq":1,"lastSeq":2,"stdinApplied":0}`)
	if got := string(output(w.waitExit("sock"), wire.Stdout)); got != "from-socket\n" {
		t.Fatalf("replayed over WebSocket: %q", got)
	}
	u.result("process.stdin", `{"id":"cat","data":"","close":true}`)
	if got := string(output(u.waitExit("cat"), wire.Stdout)); got != "hello\n" {
		t.Fatalf("cat: %q", got)
	}
}

func TestWebSocketBearer(t *testing.T) {
	t.Parallel()
	var logs testutil.SyncBuffer
	strict := startDaemonWS(t, Config{Logger: slog.New(slog.NewTextHandler(&logs, nil))}, WebSocketOptions{RequireBearer: true})
	lax := startDaemonWS(t, Config{}, WebSocketOptions{RequireBearer: false})
	bearer := func(v string) http.Header { return http.Header{"Authorization": {v}} }
	cases := []struct {
		name   string
		d      *testDaemon
		header http.Header
		code   int
		body   string
	}{
		{"right", strict, bearer("Bearer " + testToken), 101, ""},
		{"scheme case", strict, bearer("bearer " + testToken), 101, ""},
		{"wrong", strict, bearer("Bearer nope"), 401, "Unauthorized: invalid bearer token"},
		{"prefix", strict, bearer("Bearer s3cret"), 401, "Unauthorized: invalid bearer token"},
		{"basic", strict, bearer("Basic " + testToken), 401, "Unauthorized: Authorization is not a Bearer token"},
		{"missing", strict, nil, 401, "Unauthorized: missing Authorization: Bearer token"},
		{"twice", strict, http.Header{"Authorization": {"Bearer " + testToken, "Bearer " + testToken}}, 401, "Unauthorized: more than one Authorization header"},
		{"lax right", lax, bearer("Bearer " + testToken), 101, ""},
		{"lax missing", lax, nil, 101, ""},
		{"lax wrong", lax, bearer("Bearer nope"), 401, "Unauthorized: invalid bearer token"},
	}
	for _, tc := range cases {
		code, body := upgrade(t, tc.d.wsURL, tc.header)
		if code != tc.code || body != tc.body {
			t.Errorf("%s: HTTP %d %q, want %d %q", tc.name, code, body, tc.code, tc.body)
		}
	}
	if got := strict.srv.Stats().UpgradesRefused.Load(); got != 5 {
		t.Errorf("UpgradesRefused = %d, want 5", got)
	}
	if !strings.Contains(logs.String(), "[Server] Unauthorized websocket upgrade: invalid bearer token") {
		t.Errorf("no log line for the refusal:\n%s", logs.String())
	}
	if strings.Contains(logs.String(), "nope") || strings.Contains(logs.String(), testToken) {
		t.Errorf("a token reached the log:\n%s", logs.String())
	}

	// Without a bearer (lax), every request must still carry the token;
	// with one, too: the header does not replace the per-request check.
	for _, h := range []http.Header{{}, bearer("Bearer " + testToken)} {
		ws, err := lax.dialWSConn(h)
		if err != nil {
			t.Fatal(err)
		}
		c := lax.newRawClient(&wsLineConn{t: t, ws: ws})
		c.send(`{"jsonrpc":"2.0","id":1,"method":"server.ping"}` + "\n")
		if got := string(c.respFor("1")); got != `{"jsonrpc":"2.0","id":1,"error":{"code":-32001,"message":"Unauthorized: invalid or missing auth token"}}`+"\n" {
			t.Errorf("no auth: %s", got)
		}
		c.send(`{"jsonrpc":"2.0","id":2,"method":"server.shutdown","auth":"nope"}` + "\n")
		if got := string(c.respFor("2")); !strings.Contains(got, "-32001") {
			t.Errorf("wrong auth: %s", got)
		}
		c.wantResult("server.ping", "", `{"pong":true}`)
	}
	if got := lax.srv.Stats().Refused.Load(); got != 4 {
		t.Errorf("Refused = %d, want 4", got)
	}
}

// HTTP drops a header value's surrounding spaces; the bearer is compared
// trimmed, the per-request auth exactly.
func TestWebSocketBearerWithSpaces(t *testing.T) {
	t.Parallel()
	d := startDaemonWS(t, Config{Token: " spaced token "}, WebSocketOptions{RequireBearer: true})
	if code, body := upgrade(t, d.wsURL, http.Header{"Authorization": {"Bearer  spaced token "}}); code != 101 {
		t.Fatalf("HTTP %d %s", code, body)
	}
	if code, _ := upgrade(t, d.wsURL, http.Header{"Authorization": {"Bearer spaced"}}); code != 401 {
		t.Fatalf("HTTP %d", code)
	}
}

func TestWebSocketPathAndPlainHTTP(t *testing.T) {
	t.Parallel()
	d := startDaemonWS(t, Config{}, WebSocketOptions{Path: "/rpc", RequireBearer: true})
	base := strings.TrimSuffix(d.wsURL, "/rpc")
	if code, body := upgrade(t, base+"/other", http.Header{"Authorization": {"Bearer " + testToken}}); code != 404 || !strings.Contains(body, "try /rpc") {
		t.Errorf("other path: %d %q", code, body)
	}
	// A plain GET with the token is told to upgrade.
	req, _ := http.NewRequest("GET", strings.Replace(d.wsURL, "ws://", "http://", 1), nil)
	req.Header.Set("Authorization", "Bearer "+testToken)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusUpgradeRequired {
		t.Errorf("plain GET: %d", resp.StatusCode)
	}
	if n := d.srv.Stats().WebSocketsOpen.Load(); n != 0 {
		t.Errorf("a failed upgrade holds a slot: %d open", n)
	}
	d.dialWS().wantResult("server.ping", "", `{"pong":true}`)
}

func TestWebSocketMaxConnections(t *testing.T) {
	t.Parallel()
	d := startDaemonWS(t, Config{}, WebSocketOptions{RequireBearer: true, MaxConnections: 2})
	auth := http.Header{"Authorization": {"Bearer " + testToken}}
	a, b := d.dialWS(), d.dialWS()
	a.wantResult("server.ping", "", `{"pong":true}`)
	b.wantResult("server.ping", "", `{"pong":true}`)
	code, body := upgrade(t, d.wsURL, auth)
	if code != http.StatusServiceUnavailable || body != "sous daemon: too many connections (limit 2); retry later" {
		t.Fatalf("third: HTTP %d %q", code, body)
	}
	// An unauthenticated peer is told 401, not whether the daemon is full.
	if code, _ := upgrade(t, d.wsURL, nil); code != 401 {
		t.Fatalf("unauthenticated at the limit: HTTP %d", code)
	}
	// Unix socket connections do not count.
	d.dial().wantResult("server.ping", "", `{"pong":true}`)
	a.nc.Close()
	deadline := time.Now().Add(5 * time.Second)
	for d.srv.Stats().WebSocketsOpen.Load() > 1 {
		if time.Now().After(deadline) {
			t.Fatal("the closed connection still holds its slot")
		}
		time.Sleep(5 * time.Millisecond)
	}
	d.dialWS().wantResult("server.ping", "", `{"pong":true}`)
	if got := d.srv.Stats().UpgradesOverLimit.Load(); got != 1 {
		t.Errorf("UpgradesOverLimit = %d", got)
	}
}

func TestWebSocketHeartbeatDropsDeadPeer(t *testing.T) {
	t.Parallel()
	d := startDaemonWS(t, Config{}, WebSocketOptions{RequireBearer: true, PingInterval: 50 * time.Millisecond, PingTimeout: time.Second})
	// A live peer (its reader answers pings) stays through many pings.
	live := d.dialWS()
	live.result("process.spawn", shParams("kept", `sleep 1.5; echo still here`))
	// A dead one: connected, then never reads again, so it never answers.
	dead, err := d.dialWSConn(nil)
	if err != nil {
		t.Fatal(err)
	}
	defer dead.CloseNow()
	deadline := time.Now().Add(5 * time.Second)
	for d.srv.Stats().HeartbeatDrops.Load() == 0 {
		if time.Now().After(deadline) {
			t.Fatal("the dead peer was not dropped")
		}
		time.Sleep(10 * time.Millisecond)
	}
	if got := string(output(live.waitExit("kept"), wire.Stdout)); got != "still here\n" {
		t.Fatalf("live peer: %q", got)
	}
	live.wantResult("server.ping", "", `{"pong":true}`)
	if got := d.srv.Stats().HeartbeatDrops.Load(); got != 1 {
		t.Fatalf("HeartbeatDrops = %d, want 1 (the live peer was dropped too?)", got)
	}
	for d.srv.Stats().WebSocketsOpen.Load() != 1 {
		if time.Now().After(deadline) {
			t.Fatalf("%d WebSockets open, want 1", d.srv.Stats().WebSocketsOpen.Load())
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// A peer that stops reading while the daemon streams to it blocks the
// daemon's writes; the heartbeat still finds it and the process survives.
// (A pong queues behind the frames already in the socket buffers, so the
// timeout must allow a live reader to drain them: 10 s by default.)
func TestWebSocketHeartbeatUnblocksWrites(t *testing.T) {
	t.Parallel()
	d := startDaemonWS(t, Config{}, WebSocketOptions{RequireBearer: true, PingInterval: 50 * time.Millisecond, PingTimeout: time.Second})
	ws, err := d.dialWSConn(nil)
	if err != nil {
		t.Fatal(err)
	}
	defer ws.CloseNow()
	req := `{"jsonrpc":"2.0","id":1,"method":"process.spawn","params":` + shParams("flood", `head -c 50000000 /dev/zero`) + `,"auth":"` + testToken + `"}`
	if err := ws.Write(context.Background(), websocket.MessageText, []byte(req)); err != nil {
		t.Fatal(err)
	}
	deadline := time.Now().Add(10 * time.Second)
	for d.srv.Stats().HeartbeatDrops.Load() == 0 {
		if time.Now().After(deadline) {
			t.Fatal("the stalled peer was not dropped")
		}
		time.Sleep(10 * time.Millisecond)
	}
	// The process ran on; another connection follows it to its end.
	c := d.dialWS()
	c.result("process.reattach", `{"id":"flood","fromSeq":0}`)
	if code := exitCodeOf(c.waitExit("flood")); code != 0 {
		t.Fatalf("exit code %d", code)
	}
}

func TestWebSocketMessageLimit(t *testing.T) {
	t.Parallel()
	d := startDaemonWS(t, Config{}, WebSocketOptions{RequireBearer: true})
	pong := `{"jsonrpc":"2.0","id":7,"result":{"pong":true}}` + "\n"
	for _, tc := range []struct {
		name string
		msg  string
	}{
		{"1048575 served", strings.TrimSuffix(paddedPing(1048575), "\n")},
		{"1048575 and a newline served", paddedPing(1048575)},
	} {
		c := d.dialWS()
		if err := c.nc.(*wsLineConn).ws.Write(context.Background(), websocket.MessageText, []byte(tc.msg)); err != nil {
			t.Fatal(err)
		}
		if got := string(c.respFor("7")); got != pong {
			t.Errorf("%s: %s", tc.name, got)
		}
	}
	for _, tc := range []struct {
		name string
		msg  string
	}{
		{"1048576 closes", strings.TrimSuffix(paddedPing(1048576), "\n")},
		{"1048576 and a newline closes", paddedPing(1048576)},
		{"far over closes", strings.Repeat("y", 3<<20)},
	} {
		ws, err := d.dialWSConn(nil)
		if err != nil {
			t.Fatal(err)
		}
		ws.Write(context.Background(), websocket.MessageText, []byte(tc.msg))
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		_, msg, err := ws.Read(ctx)
		cancel()
		if got := websocket.CloseStatus(err); got != websocket.StatusMessageTooBig {
			t.Errorf("%s: read %q, %v; want a close with status 1009", tc.name, msg, err)
		}
	}
	// Binary messages are refused with 1003.
	ws, err := d.dialWSConn(nil)
	if err != nil {
		t.Fatal(err)
	}
	ws.Write(context.Background(), websocket.MessageBinary, []byte(`{"jsonrpc":"2.0","id":1,"method":"server.ping","auth":"`+testToken+`"}`))
	_, _, err = ws.Read(context.Background())
	if got := websocket.CloseStatus(err); got != websocket.StatusUnsupportedData {
		t.Errorf("binary: %v; want a close with status 1003", err)
	}
	// Text that is not UTF-8 is refused with 1007 (RFC 6455 section 8.1),
	// not answered with the bytes echoed back.
	ws, err = d.dialWSConn(nil)
	if err != nil {
		t.Fatal(err)
	}
	ws.Write(context.Background(), websocket.MessageText, []byte(`{"jsonrpc":"2.0","id":"`+"\xff"+`","method":"server.ping","auth":"`+testToken+`"}`))
	_, msg, err := ws.Read(context.Background())
	if got := websocket.CloseStatus(err); got != websocket.StatusInvalidFramePayloadData {
		t.Errorf("invalid UTF-8: read %q, %v; want a close with status 1007", msg, err)
	}
}

func TestWebSocketGoingAwayOnClose(t *testing.T) {
	t.Parallel()
	d := startDaemonWS(t, Config{}, WebSocketOptions{RequireBearer: true})
	ws, err := d.dialWSConn(nil)
	if err != nil {
		t.Fatal(err)
	}
	defer ws.CloseNow()
	read := make(chan error, 1)
	go func() {
		_, _, err := ws.Read(context.Background())
		read <- err
	}()
	// Once the daemon serves the connection (a connection still upgrading
	// when the daemon closes is dropped without a close frame).
	for d.srv.Stats().ConnectionsOpen.Load() != 1 {
		time.Sleep(time.Millisecond)
	}
	start := time.Now()
	d.srv.Close()
	if el := time.Since(start); el > 2*time.Second {
		t.Errorf("Close took %v", el)
	}
	select {
	case err := <-read:
		var ce websocket.CloseError
		if !errors.As(err, &ce) || ce.Code != websocket.StatusGoingAway || ce.Reason != "daemon shutting down" {
			t.Fatalf("read: %v; want a going-away close", err)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("no close from the daemon")
	}
	if _, err := d.dialWSConn(nil); err == nil {
		t.Fatal("dialed a closed daemon")
	}
}
