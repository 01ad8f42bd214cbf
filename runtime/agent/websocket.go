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
	"regexp"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/coder/websocket"
	"github.com/google/uuid"

	"github.com/seed5ad92d46/sous/daemon/client"
	"github.com/seed5ad92d46/sous/daemon/wire"
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
	s     *Session
	c     *client.Client
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

func startWebSocket(ctx context.Context, c *client.Client, s *Session, args []string) (*wsTransport, error) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, fmt.Errorf("agent: websocket endpoint: %w", err)
	}
	t := &wsTransport{
		s:         s,
		c:         c,
		token:     randomHex(32),
		path:      "/sous/agent/" + randomHex(8),
		connected: make(chan struct{}),
	}
	t.url = "ws://" + ln.Addr().String() + t.path
	t.ctx, t.stopC = context.WithCancel(context.Background())
	t.srv = &http.Server{Handler: http.HandlerFunc(t.serveHTTP), ReadHeaderTimeout: 10 * time.Second}
	go t.srv.Serve(ln)

	args = append(args, "--sdk-url", t.url)
	cp, err := spawnCLI(ctx, c, s, args, map[string]string{"CLAUDE_CODE_SESSION_ACCESS_TOKEN": t.token}, nil)
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
			t.s.deliver(line)
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
		var blocks []struct {
			Type      string `json:"type"`
			ToolUseID string `json:"tool_use_id"`
		}
		json.Unmarshal(m.Message.Content, &blocks)
		for _, b := range blocks {
			if b.Type == "tool_result" {
				if results == nil {
					results = map[string]bool{}
				}
				results[b.ToolUseID] = true
			}
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

// dropConnection cuts the current connection (tests use it to exercise the
// CLI's reconnect).
func (t *wsTransport) dropConnection() bool {
	t.mu.Lock()
	wc := t.cur
	t.mu.Unlock()
	if wc == nil {
		return false
	}
	wc.c.Close(websocket.StatusGoingAway, "sous test: dropping the connection")
	t.drop(wc)
	return true
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

// minSDKURLRejecting is the first CLI version known to refuse --sdk-url for
// hosts other than Anthropic's.
var minSDKURLRejecting = [3]int{2, 1, 121}

var versionRE = regexp.MustCompile(`(\d+)\.(\d+)\.(\d+)`)

// explainStartFailure turns a failed start into an error that says what to
// do when the cause is a CLI that refuses local --sdk-url endpoints.
func (t *wsTransport) explainStartFailure(err error) error {
	stderr := t.stderr.String()
	if strings.Contains(stderr, "--sdk-url rejected") || strings.Contains(stderr, "not an approved Anthropic endpoint") {
		return fmt.Errorf("%w (Claude Code %s refuses it; versions from about 2.1.121 accept only Anthropic's hosts): use transport=\"stdio\": %v", ErrSDKURLRejected, t.version(), err)
	}
	select {
	case <-t.connected:
		return err
	default:
	}
	// The CLI never connected. Its version tells whether it would have.
	v := t.version()
	if m := versionRE.FindStringSubmatch(v); m != nil {
		var got [3]int
		for i := range got {
			got[i], _ = strconv.Atoi(m[i+1])
		}
		if compareVersion(got, minSDKURLRejecting) >= 0 {
			return fmt.Errorf("%w (Claude Code %s; versions from about 2.1.121 accept only Anthropic's hosts): use transport=\"stdio\": %v", ErrSDKURLRejected, v, err)
		}
	}
	return fmt.Errorf("the CLI never connected to %s: %w", t.url, err)
}

func compareVersion(a, b [3]int) int {
	for i := range a {
		if a[i] != b[i] {
			if a[i] < b[i] {
				return -1
			}
			return 1
		}
	}
	return 0
}

// version runs the CLI with --version on the daemon ("unknown version" when
// that fails too).
func (t *wsTransport) version() string {
	ctx, cancel := context.WithTimeout(context.Background(), 15*time.Second)
	defer cancel()
	var mu sync.Mutex
	var out bytes.Buffer
	opt := t.s.opt
	spec := client.SpawnSpec{ID: "claude-version-" + uuid.NewString(), Command: opt.CLI[0], Args: append(append([]string(nil), opt.CLI[1:]...), "--version"), Cwd: opt.Cwd}
	if len(opt.Env) > 0 {
		spec.Env = make(map[string]*string, len(opt.Env))
		for k, v := range opt.Env {
			spec.Env[k] = &v
		}
	}
	p, err := t.c.Spawn(ctx, spec, func(f *wire.Frame) {
		if f.Stream != wire.Stdout {
			return
		}
		mu.Lock()
		if out.Len() < 4096 {
			out.Write(f.Data)
		}
		mu.Unlock()
	})
	if err != nil {
		return "unknown version"
	}
	if _, err := p.Wait(ctx); err != nil {
		p.KillAndWait(context.Background(), "KILL", time.Second, true)
		return "unknown version"
	}
	mu.Lock()
	defer mu.Unlock()
	// "2.1.330 (Claude Code)": the number is what matters.
	if v := versionRE.FindString(out.String()); v != "" {
		return v
	}
	return "unknown version"
}
