package agent

import (
	"bytes"
	"context"
	"crypto/rand"
	"crypto/sha256"
	"crypto/subtle"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"net"
	"net/http"
	"sync"
	"time"

	"github.com/coder/websocket"
)

// WebSocket timings. The CLI pings every 10 s and treats a missing pong as a
// dead connection; sous does the same from its side so a wedged connection
// is dropped and the CLI's reconnect takes over.
const (
	wsPingInterval = 10 * time.Second
	wsWriteTimeout = 10 * time.Second
)

// wsTransport hosts the WebSocket endpoint the CLI connects to with
// --sdk-url. The CLI is the client: it dials, sends a Bearer token, and
// reconnects with backoff when the connection drops.
//
// Everything sous sends that the CLI has not visibly acted on stays in
// unsettled and is sent again on every new connection, because a message
// written just before a drop may or may not have arrived. Resending is safe:
// the CLI skips a user message whose uuid it has seen, ignores a permission
// answer for a toolUseID it already resolved, and answers a repeated control
// request again (sous drops the second answer).
type wsTransport struct {
	*cliProc
	l     launch // how the CLI was started (explainStartFailure runs it again)
	srv   *http.Server
	token string
	path  string
	url   string
	ctx   context.Context
	stopC context.CancelFunc

	wmu sync.Mutex // serializes writes on the current connection
	mu  sync.Mutex
	cur *wsConn
	// unsettled is what the CLI may not have received yet, in send order.
	unsettled []outbound
	// lastUUID is the uuid of the last CLI message sous received, compared
	// with the X-Last-Request-Id the CLI sends when it reconnects.
	lastUUID  string
	conns     int
	connected chan struct{} // closed on the first connection
}

type wsConn struct {
	c      *websocket.Conn
	cancel context.CancelFunc
}

func randomHex(n int) string {
	b := make([]byte, n)
	rand.Read(b)
	return hex.EncodeToString(b)
}

// startWebSocket listens on a random loopback port and path, then starts
// the CLI pointed at it with a fresh token.
func startWebSocket(ctx context.Context, l launch) (*wsTransport, error) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, fmt.Errorf("agent: websocket endpoint: %w", err)
	}
	t := &wsTransport{
		l:         l,
		token:     randomHex(32),
		path:      "/sous/agent/" + randomHex(8),
		connected: make(chan struct{}),
	}
	t.url = "ws://" + ln.Addr().String() + t.path
	t.ctx, t.stopC = context.WithCancel(context.Background())
	t.srv = &http.Server{Handler: http.HandlerFunc(t.serveHTTP), ReadHeaderTimeout: 10 * time.Second}
	go t.srv.Serve(ln)

	args := append(append([]string(nil), l.args...), "--sdk-url", t.url)
	cp, err := spawnCLI(ctx, l, args, map[string]string{"CLAUDE_CODE_SESSION_ACCESS_TOKEN": t.token}, nil)
	if err != nil {
		t.stopC()
		t.srv.Close()
		return nil, err
	}
	t.cliProc = cp
	return t, nil
}

// serveHTTP authenticates before upgrading: anything without the session's
// token is refused with 401 and never becomes a WebSocket.
func (t *wsTransport) serveHTTP(w http.ResponseWriter, r *http.Request) {
	if r.URL.Path != t.path {
		http.NotFound(w, r)
		return
	}
	// Compare fixed-length hashes: ConstantTimeCompare returns at once on a
	// length mismatch, which would tell a guesser the token's length.
	got := sha256.Sum256([]byte(r.Header.Get("Authorization")))
	want := sha256.Sum256([]byte("Bearer " + t.token))
	if subtle.ConstantTimeCompare(got[:], want[:]) != 1 {
		http.Error(w, "unauthorized", http.StatusUnauthorized)
		return
	}
	c, err := websocket.Accept(w, r, &websocket.AcceptOptions{CompressionMode: websocket.CompressionDisabled})
	if err != nil {
		return
	}
	c.SetReadLimit(maxLine)
	ctx, cancel := context.WithCancel(t.ctx)
	wc := &wsConn{c: c, cancel: cancel}
	t.attach(wc, r.Header.Get("X-Last-Request-Id"))
	go t.keepAlive(ctx, wc)
	t.read(ctx, wc)
}

// attach makes wc the connection in use and replays what is unsettled.
func (t *wsTransport) attach(wc *wsConn, lastSent string) {
	t.wmu.Lock()
	defer t.wmu.Unlock()
	t.mu.Lock()
	old := t.cur
	t.cur = wc
	t.conns++
	first := t.conns == 1
	replay := append([]outbound(nil), t.unsettled...)
	missed := lastSent != "" && lastSent != t.lastUUID
	last := t.lastUUID
	t.mu.Unlock()
	if old != nil {
		old.cancel()
		old.c.CloseNow()
	}
	if first {
		close(t.connected)
	}
	if missed {
		// The CLI says it sent a message sous never received. Node builds
		// of the CLI do not resend on reconnect, so all sous can do is
		// make the gap visible.
		t.note(fmt.Sprintf("the CLI reconnected reporting last sent message %s, but the last sous received was %q: messages were lost in the drop", lastSent, last))
	}
	for _, o := range replay {
		if err := t.write(wc, o.line); err != nil {
			t.drop(wc)
			return
		}
	}
}

func (t *wsTransport) write(wc *wsConn, line []byte) error {
	ctx, cancel := context.WithTimeout(t.ctx, wsWriteTimeout)
	defer cancel()
	return wc.c.Write(ctx, websocket.MessageText, line)
}

// drop forgets a broken connection; the CLI reconnects on its own.
func (t *wsTransport) drop(wc *wsConn) {
	t.mu.Lock()
	if t.cur == wc {
		t.cur = nil
	}
	t.mu.Unlock()
	wc.cancel()
	wc.c.CloseNow()
}

func (t *wsTransport) read(ctx context.Context, wc *wsConn) {
	for {
		_, data, err := wc.c.Read(ctx)
		if err != nil {
			t.drop(wc)
			return
		}
		// One message carries one or more NDJSON lines; a last line
		// without its newline is complete all the same.
		for len(data) > 0 {
			line := data
			if i := bytes.IndexByte(data, '\n'); i >= 0 {
				line, data = data[:i], data[i+1:]
			} else {
				data = nil
			}
			line = bytes.TrimSpace(line)
			if len(line) == 0 {
				continue
			}
			t.settle(line)
			t.l.to.deliver(line)
		}
	}
}

// keepAlive pings the CLI and sends keep_alive messages, dropping a
// connection that stopped answering.
func (t *wsTransport) keepAlive(ctx context.Context, wc *wsConn) {
	tk := time.NewTicker(wsPingInterval)
	defer tk.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-tk.C:
		}
		pctx, cancel := context.WithTimeout(ctx, wsPingInterval)
		err := wc.c.Ping(pctx)
		cancel()
		if err == nil {
			t.wmu.Lock()
			err = t.write(wc, []byte(`{"type":"keep_alive"}`+"\n"))
			t.wmu.Unlock()
		}
		if err != nil {
			t.drop(wc)
			return
		}
	}
}

// settle removes from unsettled what this message from the CLI shows it
// received.
func (t *wsTransport) settle(line []byte) {
	var m struct {
		Type      string `json:"type"`
		UUID      string `json:"uuid"`
		RequestID string `json:"request_id"`
		Response  struct {
			RequestID string `json:"request_id"`
		} `json:"response"`
		Message struct {
			Content json.RawMessage `json:"content"`
		} `json:"message"`
	}
	if json.Unmarshal(line, &m) != nil {
		return
	}
	var results map[string]bool
	if m.Type == "user" {
		for _, id := range toolResultIDs(m.Message.Content) {
			if results == nil {
				results = map[string]bool{}
			}
			results[id] = true
		}
	}
	t.mu.Lock()
	defer t.mu.Unlock()
	if m.UUID != "" {
		t.lastUUID = m.UUID
	}
	keep := t.unsettled[:0]
	for _, o := range t.unsettled {
		done := false
		switch m.Type {
		case "control_response":
			done = o.meta.kind == outControl && o.meta.requestID == m.Response.RequestID
		case "control_cancel_request":
			done = o.meta.kind == outAnswer && o.meta.requestID == m.RequestID
		case "user":
			done = o.meta.kind == outAnswer && results[o.meta.toolUseID]
		case "result":
			done = o.meta.kind == outUser || o.meta.kind == outAnswer
		}
		if !done {
			keep = append(keep, o)
		}
	}
	clear(t.unsettled[len(keep):])
	t.unsettled = keep
}

func (t *wsTransport) send(ctx context.Context, o outbound) error {
	t.wmu.Lock()
	defer t.wmu.Unlock()
	t.mu.Lock()
	if o.meta.kind != outOther {
		t.unsettled = append(t.unsettled, o)
	}
	wc := t.cur
	t.mu.Unlock()
	if wc == nil {
		return nil // sent when the CLI (re)connects
	}
	if err := t.write(wc, o.line); err != nil {
		// Not the session's failure: the message stays unsettled and
		// goes again on the CLI's next connection.
		t.drop(wc)
	}
	return nil
}

func (t *wsTransport) stop() error {
	// The CLI does not exit when its socket closes: stop it first.
	err := t.cliProc.stop()
	t.stopC()
	t.mu.Lock()
	wc := t.cur
	t.cur = nil
	t.mu.Unlock()
	if wc != nil {
		wc.c.CloseNow()
	}
	t.srv.Close()
	return err
}
