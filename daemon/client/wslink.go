package client

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"strings"
	"sync"
	"time"

	"github.com/coder/websocket"
)

// DialWebSocket connects to a daemon's WebSocket endpoint (ws://host:port
// [/path], or wss:// through a TLS-terminating proxy). The token goes as
// "Authorization: Bearer" on every dial and in every request's "auth"; the
// client reconnects, reattaches and resumes stdin exactly as over a socket.
func DialWebSocket(ctx context.Context, url, token string, opt Options) (*Client, error) {
	c, err := dialLinks(ctx, token, func(ctx context.Context, recv receiver) (link, error) {
		ws, err := dialWS(ctx, url, token)
		if err != nil {
			return nil, err
		}
		return newWSLink(ws, token, recv, opt.answerLimit(), opt.heartbeat()), nil
	}, opt)
	var nc *notConnectedError
	if errors.As(err, &nc) {
		return nil, fmt.Errorf("connect to daemon at %s: %w", url, err)
	}
	return c, err
}

// BearerHeader is the Authorization value that carries token, or "" when
// it cannot travel in an HTTP header (a control character). HTTP drops
// leading and trailing whitespace from header values, so the daemon
// compares the bearer with its token trimmed; each request's "auth" still
// carries the token verbatim.
func BearerHeader(token string) string {
	t := strings.TrimSpace(token)
	if t == "" {
		return ""
	}
	for i := 0; i < len(t); i++ {
		if c := t[i]; c < ' ' && c != '\t' || c == 0x7f {
			return ""
		}
	}
	return "Bearer " + t
}

func dialWS(ctx context.Context, url, token string) (*websocket.Conn, error) {
	h := http.Header{}
	if v := BearerHeader(token); v != "" {
		h.Set("Authorization", v)
	}
	ws, resp, err := websocket.Dial(ctx, url, &websocket.DialOptions{HTTPHeader: h})
	if err != nil {
		if resp != nil {
			var msg string
			if resp.Body != nil {
				b, _ := io.ReadAll(resp.Body)
				msg = strings.TrimSpace(string(b))
			}
			switch resp.StatusCode {
			case http.StatusUnauthorized:
				return nil, fmt.Errorf("connect to %s: %w (HTTP 401: %s); set --token-file, SOUS_TOKEN or CLAUDE_RPC_TOKEN to the daemon's token", url, ErrTokenRefused, msg)
			case http.StatusServiceUnavailable:
				return nil, fmt.Errorf("connect to %s: daemon is busy (HTTP 503: %s)", url, msg)
			case http.StatusNotFound:
				return nil, fmt.Errorf("connect to %s: no WebSocket endpoint there (HTTP 404: %s)", url, msg)
			}
		}
		return nil, fmt.Errorf("connect to daemon at %s: %w", url, err)
	}
	// Responses can be large (files.read of a big file); readMessage
	// bounds them itself, so that one over the limit fails its call and
	// not the connection (the library's limit closes it).
	ws.SetReadLimit(-1)
	return ws, nil
}

// wsHeartbeat is the heartbeat of the client's WebSocket links: a daemon
// that stops answering pings (a vanished host, a dead NAT entry) is
// dropped and redialed, as a broken socket would be. It pings every
// interval, and waits timeout for the pong.
type wsHeartbeat struct{ interval, timeout time.Duration }

// The heartbeat, unless the tests shorten it (Options.wsHeartbeat).
const (
	wsPingInterval = 15 * time.Second
	wsPingTimeout  = 10 * time.Second
)

// wsLink speaks the protocol over a WebSocket: one JSON document per text
// message, each way, and from the daemon binary frames as binary messages
// (binframes.go).
type wsLink struct {
	ws        *websocket.Conn
	recv      receiver
	enc       requestEncoder
	maxAnswer int // the longest message taken (maxResponseLine)
	beat      wsHeartbeat

	done      chan struct{}
	closeOnce sync.Once
}

func newWSLink(ws *websocket.Conn, token string, recv receiver, maxAnswer int, beat wsHeartbeat) *wsLink {
	l := &wsLink{ws: ws, recv: recv, enc: newRequestEncoder(token), maxAnswer: maxAnswer, beat: beat, done: make(chan struct{})}
	go l.read()
	go l.heartbeat()
	return l
}

func (l *wsLink) send(id uint64, method string, params json.RawMessage) error {
	return l.enc.send(id, method, params, func(b []byte) error {
		// Bounded by the connection: the heartbeat's close unblocks a
		// write to a daemon that stopped reading.
		if err := l.ws.Write(context.Background(), websocket.MessageText, b); err != nil {
			l.ws.CloseNow()
			return fmt.Errorf("%w: %v", net.ErrClosed, err) // the reader reconnects
		}
		return nil
	})
}

// close ends the link with a normal close, waiting at most a second for
// the daemon's answer, and never in the caller.
func (l *wsLink) close() {
	l.closeOnce.Do(func() {
		close(l.done)
		go func() {
			stop := time.AfterFunc(time.Second, func() { l.ws.CloseNow() })
			l.ws.Close(websocket.StatusNormalClosure, "")
			stop.Stop()
		}()
	})
}

func (l *wsLink) read() {
	var (
		d       lineDispatcher
		msg     gatherer
		lastErr error
	)
	for {
		typ, r, err := l.ws.Reader(context.Background())
		if err != nil {
			lastErr = err
			break
		}
		msg.reset()
		if err = readMessage(r, &msg, l.maxAnswer); err != nil {
			if lastErr = answerOversized(l, l.recv, err); lastErr != nil {
				break
			}
			continue // an oversize answer, skipped
		}
		line, owned := msg.line()
		if typ == websocket.MessageBinary {
			// A binary frame, header and data (binframes.go).
			if lastErr = d.dispatchBinary(l, l.recv, line); lastErr != nil {
				break
			}
			continue
		}
		if lastErr = d.dispatch(l, l.recv, line, owned); lastErr != nil {
			break
		}
		if d.awaitingData() {
			lastErr = errors.New("daemon sent a binary frame's header in a text message")
			break
		}
	}
	l.close()
	l.recv.closed(l, wsLinkErr(lastErr))
}

// readMessage gathers the rest of a message into g. A message over max
// bytes is read to its end and dropped: the error is an *oversizeLine with
// its start.
func readMessage(r io.Reader, g *gatherer, max int) error {
	if err := g.readFrom(r, max); err != nil {
		return err
	}
	if g.len() > max {
		o := &oversizeLine{prefix: bytes.Clone(g.head(oversizePrefix)), limit: max}
		g.reset()
		if _, err := io.Copy(io.Discard, r); err != nil {
			return err
		}
		return o
	}
	return nil
}

// wsLinkErr words why a link ended. A close from the daemon (going away at
// shutdown) is not an error in itself, but the link is gone all the same,
// like a socket at EOF: the client reconnects.
func wsLinkErr(err error) error {
	var ce websocket.CloseError
	if errors.As(err, &ce) {
		if ce.Reason != "" {
			return fmt.Errorf("%w: daemon closed the WebSocket (%d, %s)", io.ErrUnexpectedEOF, ce.Code, ce.Reason)
		}
		return fmt.Errorf("%w: daemon closed the WebSocket (%d)", io.ErrUnexpectedEOF, ce.Code)
	}
	if errors.Is(err, io.EOF) {
		return io.ErrUnexpectedEOF
	}
	return err
}

func (l *wsLink) heartbeat() {
	tick := time.NewTicker(l.beat.interval)
	defer tick.Stop()
	for {
		select {
		case <-l.done:
			return
		case <-tick.C:
		}
		ctx, cancel := context.WithTimeout(context.Background(), l.beat.timeout)
		err := l.ws.Ping(ctx)
		cancel()
		if err != nil {
			// Dropping the connection ends the reader, which reconnects.
			l.ws.CloseNow()
			return
		}
	}
}
