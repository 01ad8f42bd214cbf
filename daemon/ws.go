package daemon

import (
	"bytes"
	"context"
	"crypto/sha256"
	"crypto/subtle"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"strings"
	"sync"
	"time"
	"unicode/utf8"

	"github.com/coder/websocket"

	"github.com/seed5ad92d46/sous/daemon/netlimit"
	"github.com/seed5ad92d46/sous/daemon/wire"
)

// The WebSocket transport (feature transport.websocket) serves the same
// JSON-RPC as the socket, one JSON document per WebSocket text message:
// requests in; responses and stream frames out, each in its own message,
// with no newline. A request may end in one newline (it is dropped), so a
// client can send its NDJSON lines unchanged. On a connection that asked
// for binary frames (binframes.go), each output frame that carries data is
// a binary message instead; requests stay text, and a binary one from the
// client still ends the connection (1003).
//
// Auth is checked twice. Every request carries "auth" and is validated
// exactly as on the socket (parse → auth → version → method → params). The
// upgrade itself is refused with 401 before any WebSocket exists when an
// Authorization header is present and is not "Bearer <the token>", and, with
// RequireBearer (the CLI's default), when it is absent: so a peer without
// the token cannot even hold a connection open.

// WebSocketOptions configure a WebSocket listener.
type WebSocketOptions struct {
	// Path is where the endpoint is served (default "/"); other paths get 404.
	Path string
	// RequireBearer refuses upgrades that carry no Authorization header.
	// Without it such upgrades are accepted and every request must still
	// carry the token in "auth" (what browsers, which cannot set headers on
	// a WebSocket, need). A header that is present must always be right.
	RequireBearer bool
	// MaxConnections bounds the WebSocket connections open at once, counted
	// across all of the daemon's WebSocket listeners; an upgrade over the
	// limit gets 503. Zero: no limit. Unix socket connections do not count.
	MaxConnections int
	// MaxPending bounds, per listener, the TCP connections that are not
	// WebSocket connections yet: still sending their upgrade request, or
	// being refused. One accepted beyond it is closed at once (counted in
	// Stats.WebSocketsShed). Unauthenticated peers can take these slots, and
	// no others: MaxConnections is a separate pool. Zero: DefaultMaxPending;
	// negative: no limit.
	MaxPending int
	// HandshakeTimeout bounds the HTTP phase of a connection: reading the
	// upgrade request, writing the answer (default 5 s). Every answer that is
	// not an upgrade closes the connection.
	HandshakeTimeout time.Duration
	// PingInterval is how often each connection is pinged (default 15 s;
	// negative: never); a peer that has not answered within PingTimeout
	// (default 10 s) is dropped. Its processes keep running.
	PingInterval, PingTimeout time.Duration
}

// DefaultMaxPending is WebSocketOptions.MaxPending's default: far more than
// honest peers need at once (a handshake takes a round trip), far fewer
// descriptors than a daemon has.
const DefaultMaxPending = 64

// maxUpgradeHeader bounds an upgrade request's header: a real one is well
// under 2 KiB; net/http's default of 1 MiB per pending connection is not
// worth holding.
const maxUpgradeHeader = 16 << 10

func (o *WebSocketOptions) defaults() {
	if o.Path == "" {
		o.Path = "/"
	}
	if o.MaxPending == 0 {
		o.MaxPending = DefaultMaxPending
	}
	if o.HandshakeTimeout <= 0 {
		o.HandshakeTimeout = 5 * time.Second
	}
	if o.PingInterval == 0 {
		o.PingInterval = 15 * time.Second
	}
	if o.PingTimeout <= 0 {
		o.PingTimeout = 10 * time.Second
	}
}

// features is what server.capabilities advertises: the static list, plus
// transport.websocket while the daemon serves a WebSocket listener.
func (s *Server) features() []string {
	if s.wsListeners.Load() == 0 {
		return features
	}
	return append(append(make([]string, 0, len(features)+1), features...), wire.FeatureWebSocket)
}

// ServeWebSocket serves WebSocket JSON-RPC on ln until the server is closed
// or ln fails. The daemon's Close ends it and every connection it accepted
// (with a going-away close).
func (s *Server) ServeWebSocket(ln net.Listener, opt WebSocketOptions) error {
	untrack, err := s.trackListener(ln)
	if err != nil {
		return err
	}
	defer untrack()
	s.wsListeners.Add(1)
	defer s.wsListeners.Add(-1)
	opt.defaults()
	// Until its upgrade a connection is pending, and bounded: by number
	// (netlimit, MaxPending), by time (HandshakeTimeout) and by size. Every
	// answer but an upgrade closes it (no keep-alive: a refused peer must
	// not hold a descriptor), so a peer without the token costs the daemon
	// a descriptor for one round trip at most.
	hs := &http.Server{
		Handler:           s.WebSocketHandler(opt),
		ReadHeaderTimeout: opt.HandshakeTimeout,
		ReadTimeout:       opt.HandshakeTimeout,
		WriteTimeout:      opt.HandshakeTimeout, // hijacking clears these deadlines
		IdleTimeout:       opt.HandshakeTimeout,
		MaxHeaderBytes:    maxUpgradeHeader,
		ConnState:         netlimit.ConnState,
		ErrorLog:          slog.NewLogLogger(s.log.Handler(), slog.LevelWarn),
	}
	hs.SetKeepAlivesEnabled(false)
	err = hs.Serve(netlimit.New(ln, opt.MaxPending, netlimit.Counters{Pending: &s.stats.WebSocketsPending, Shed: &s.stats.WebSocketsShed}))
	hs.Close() // idle keep-alive connections (refused upgrades); WebSockets are ours
	if s.isClosed() || errors.Is(err, net.ErrClosed) || errors.Is(err, http.ErrServerClosed) {
		return nil
	}
	return fmt.Errorf("websocket: %w", err)
}

// WebSocketHandler returns the HTTP handler of the WebSocket endpoint, for
// callers that run their own http.Server.
func (s *Server) WebSocketHandler(opt WebSocketOptions) http.Handler {
	opt.defaults()
	return &wsHandler{s: s, opt: opt}
}

type wsHandler struct {
	s   *Server
	opt WebSocketOptions
}

func (h *wsHandler) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	s := h.s
	if r.URL.Path != h.opt.Path {
		http.Error(w, "sous daemon: no WebSocket endpoint at "+r.URL.Path+" (try "+h.opt.Path+")", http.StatusNotFound)
		return
	}
	// Auth before anything else: an unauthenticated peer learns nothing,
	// not even whether the daemon is full.
	if why := h.checkBearer(r.Header.Values("Authorization")); why != "" {
		s.stats.UpgradesRefused.Add(1)
		s.log.Warn(fmt.Sprintf("[Server] Unauthorized websocket upgrade: %s, remote=%s", why, r.RemoteAddr))
		w.Header().Set("WWW-Authenticate", `Bearer realm="sous"`)
		http.Error(w, "Unauthorized: "+why, http.StatusUnauthorized)
		return
	}
	if n := s.stats.WebSocketsOpen.Add(1); h.opt.MaxConnections > 0 && n > int64(h.opt.MaxConnections) {
		s.stats.WebSocketsOpen.Add(-1)
		s.stats.UpgradesOverLimit.Add(1)
		s.log.Warn("websocket upgrade refused: connection limit reached", "limit", h.opt.MaxConnections, "remote", r.RemoteAddr)
		w.Header().Set("Retry-After", "1")
		http.Error(w, fmt.Sprintf("sous daemon: too many connections (limit %d); retry later", h.opt.MaxConnections), http.StatusServiceUnavailable)
		return
	}
	release := func() { s.stats.WebSocketsOpen.Add(-1) }
	ws, err := websocket.Accept(w, r, &websocket.AcceptOptions{CompressionMode: websocket.CompressionDisabled})
	if err != nil {
		release() // Accept has answered the request (e.g. 426 for plain HTTP)
		s.log.Info("websocket upgrade failed", "err", err, "remote", r.RemoteAddr)
		return
	}
	t := newWSTransport(s, ws, r.RemoteAddr, h.opt)
	s.serveTransport(t, release)
}

// checkBearer returns why the Authorization header values refuse the
// upgrade, or "" to accept it.
func (h *wsHandler) checkBearer(values []string) string {
	switch len(values) {
	case 0:
		if h.opt.RequireBearer {
			return "missing Authorization: Bearer token"
		}
		return ""
	case 1:
	default:
		return "more than one Authorization header"
	}
	scheme, token, _ := strings.Cut(values[0], " ")
	if !strings.EqualFold(scheme, "Bearer") {
		return "Authorization is not a Bearer token"
	}
	if !h.s.bearerAuthorized(token) {
		return "invalid bearer token"
	}
	return ""
}

// bearerAuthorized compares a bearer token with the daemon's, in constant
// time. HTTP strips a header value's surrounding whitespace, so both sides
// are compared trimmed (the per-request "auth" check stays exact).
func (s *Server) bearerAuthorized(token string) bool {
	got := sha256.Sum256([]byte(strings.TrimSpace(token)))
	want := sha256.Sum256([]byte(strings.TrimSpace(s.cfg.Token)))
	return subtle.ConstantTimeCompare(got[:], want[:]) == 1
}

// wsTransport is one WebSocket connection.
type wsTransport struct {
	s    *Server
	ws   *websocket.Conn
	addr string
	buf  []byte // reads a message; handed over when it is large
	own  []byte // the connection's own buffer, which buf is unless a large message grew it

	done      chan struct{} // closed by close
	closeOnce sync.Once
}

// wsReadBuffer is the read buffer a connection starts with and returns to.
const wsReadBuffer = 64 << 10

var (
	errBinaryMessage = errors.New("binary message")
	errNotUTF8       = errors.New("text message is not UTF-8")
	errPeerGone      = errors.New("peer did not answer a ping")
)

func newWSTransport(s *Server, ws *websocket.Conn, addr string, opt WebSocketOptions) *wsTransport {
	// One more byte than a request may have, for its optional newline; a
	// longer message fails the read and the library closes with 1009.
	ws.SetReadLimit(wire.MaxLine + 1)
	own := make([]byte, wsReadBuffer)
	t := &wsTransport{s: s, ws: ws, addr: addr, buf: own, own: own, done: make(chan struct{})}
	if opt.PingInterval > 0 {
		go t.heartbeat(opt.PingInterval, opt.PingTimeout)
	}
	return t
}

func (t *wsTransport) kind() string   { return "websocket" }
func (t *wsTransport) remote() string { return t.addr }

// next reads one message. Reads are bounded by the connection, not by a
// context: close (or the heartbeat) unblocks them.
func (t *wsTransport) next() ([]byte, error) {
	typ, r, err := t.ws.Reader(context.Background())
	if err != nil {
		return nil, wsReadErr(err)
	}
	if typ != websocket.MessageText {
		return nil, errBinaryMessage
	}
	n := 0
	for {
		if n == len(t.buf) {
			if n > wire.MaxLine+1 {
				return nil, errLineTooLong // the library's limit should have said so
			}
			// A large message (process.stdin data) grows into a pooled
			// buffer that holds any message in one step, as a socket's
			// long line does (lineReader), and goes back once handled.
			nb := takeBigLine(&t.s.lines)
			copy(nb, t.buf[:n])
			t.buf = nb
		}
		m, err := r.Read(t.buf[n:])
		n += m
		if err == io.EOF {
			break
		}
		if err != nil {
			return nil, wsReadErr(err)
		}
	}
	msg := t.buf[:n]
	if len(msg) > 0 && msg[len(msg)-1] == '\n' {
		msg = msg[:len(msg)-1]
	}
	if len(msg) > wire.MaxLine {
		return nil, errLineTooLong
	}
	// RFC 6455 (section 8.1) has an endpoint fail a text message that is
	// not UTF-8, with 1007. Answering it would echo the bytes (a raw id)
	// into a text message of our own, which a browser then refuses.
	if !utf8.Valid(msg) {
		return nil, errNotUTF8
	}
	if n < wsReadBuffer {
		return append([]byte(nil), msg...), nil
	}
	// A large message: hand the pooled buffer over rather than copy it
	// (with its capacity, so that recycle knows it).
	t.buf = t.own
	return msg[:len(msg):cap(msg)], nil
}

// recycle takes back a message next returned, once handled.
func (t *wsTransport) recycle(msg []byte) { giveBigLine(&t.s.lines, msg) }

func wsReadErr(err error) error {
	if errors.Is(err, websocket.ErrMessageTooBig) {
		return errLineTooLong
	}
	return err
}

// write sends each line of b as one text message, without its newline.
// Writes are bounded by the connection too: a peer that stops reading is
// found by the heartbeat, whose close unblocks them.
func (t *wsTransport) write(b []byte) error {
	for len(b) > 0 {
		i := bytes.IndexByte(b, '\n')
		if i < 0 {
			i = len(b)
		}
		if err := t.ws.Write(context.Background(), websocket.MessageText, b[:i]); err != nil {
			return err
		}
		b = b[min(i+1, len(b)):]
	}
	return nil
}

// writeFrames sends each frame of a binary-frames batch as its own
// message: a binary one holding its header line, '\n' and its data, or a
// text one holding its JSON line without the newline.
func (t *wsTransport) writeFrames(bt *frameBatch) error {
	ctx := context.Background()
	for _, r := range bt.recs {
		msg := bt.b[r.start:r.end]
		var err error
		switch {
		case !r.binary:
			err = t.ws.Write(ctx, websocket.MessageText, bytes.TrimSuffix(msg, []byte("\n")))
		case r.data == nil:
			err = t.ws.Write(ctx, websocket.MessageBinary, msg)
		default:
			err = t.writeParts(websocket.MessageBinary, msg, r.data)
		}
		if err != nil {
			return err
		}
	}
	return nil
}

// writeParts sends one message made of parts, streamed in frames.
func (t *wsTransport) writeParts(typ websocket.MessageType, parts ...[]byte) error {
	w, err := t.ws.Writer(context.Background(), typ)
	if err != nil {
		return err
	}
	for _, p := range parts {
		if _, err := w.Write(p); err != nil {
			w.Close()
			return err
		}
	}
	return w.Close()
}

// writeLine sends parts as one text message, streamed in frames.
func (t *wsTransport) writeLine(parts [][]byte) error {
	w, err := t.ws.Writer(context.Background(), websocket.MessageText)
	if err != nil {
		return err
	}
	for i, p := range parts {
		if i == len(parts)-1 {
			p = bytes.TrimSuffix(p, []byte("\n"))
		}
		if _, err := w.Write(p); err != nil {
			w.Close()
			return err
		}
	}
	return w.Close()
}

// close ends the connection. The peer is told why with a close status when
// the daemon chose to end it; the close handshake is not waited for more
// than a second, and never by the caller.
func (t *wsTransport) close(why error) {
	t.closeOnce.Do(func() {
		close(t.done)
		var code websocket.StatusCode
		var reason string
		switch {
		case errors.Is(why, errShutdown):
			code, reason = websocket.StatusGoingAway, "daemon shutting down"
		case errors.Is(why, errLineTooLong):
			code, reason = websocket.StatusMessageTooBig, "request over 1 MiB"
		case errors.Is(why, errBinaryMessage):
			code, reason = websocket.StatusUnsupportedData, "send JSON-RPC requests as text messages"
		case errors.Is(why, errNotUTF8):
			code, reason = websocket.StatusInvalidFramePayloadData, "text message is not UTF-8"
		default:
			t.ws.CloseNow()
			return
		}
		go func() {
			stop := time.AfterFunc(time.Second, func() { t.ws.CloseNow() })
			t.ws.Close(code, reason)
			stop.Stop()
		}()
	})
}

// heartbeat pings the peer every interval and drops it when a pong does not
// come within timeout: a dead peer (a vanished host, a client that stopped
// reading) would otherwise hold its connection, and block writes to it,
// forever.
func (t *wsTransport) heartbeat(interval, timeout time.Duration) {
	tick := time.NewTicker(interval)
	defer tick.Stop()
	for {
		select {
		case <-t.done:
			return
		case <-tick.C:
		}
		ctx, cancel := context.WithTimeout(context.Background(), timeout)
		err := t.ws.Ping(ctx)
		cancel()
		if err == nil {
			continue
		}
		select {
		case <-t.done:
			return // closed meanwhile: not the peer's fault
		default:
		}
		t.s.stats.HeartbeatDrops.Add(1)
		t.s.log.Warn("websocket peer did not answer a ping: dropping the connection", "remote", t.addr, "timeout", timeout)
		t.close(errPeerGone)
		return
	}
}
