package client

import (
	"context"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/coder/websocket"
)

// A daemon that stops answering (here: it answers the first ping, then
// never reads again, so WebSocket pings go unanswered) is dropped by the
// client's heartbeat and redialed, as a broken socket would be.
func TestWebSocketClientHeartbeatRedials(t *testing.T) {
	var dials atomic.Int64
	stuck := make(chan struct{})
	defer close(stuck)
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Header.Get("Authorization") != "Bearer tok" {
			http.Error(w, "no", http.StatusUnauthorized)
			return
		}
		ws, err := websocket.Accept(w, r, nil)
		if err != nil {
			return
		}
		defer ws.CloseNow()
		dials.Add(1)
		if _, msg, err := ws.Read(r.Context()); err == nil && strings.Contains(string(msg), `"server.ping"`) {
			ws.Write(r.Context(), websocket.MessageText, []byte(`{"jsonrpc":"2.0","id":1,"result":{"pong":true}}`))
		}
		<-stuck // a daemon that hangs: nothing read, no pongs
	}))
	defer srv.Close()

	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	c, err := DialWebSocket(ctx, "ws"+strings.TrimPrefix(srv.URL, "http"), "tok", Options{ReconnectTimeout: 5 * time.Second,
		wsHeartbeat: wsHeartbeat{interval: 50 * time.Millisecond, timeout: 100 * time.Millisecond}})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	for dials.Load() < 2 {
		if ctx.Err() != nil {
			t.Fatal("the client never noticed the hung daemon")
		}
		time.Sleep(10 * time.Millisecond)
	}
}

func TestBearerHeader(t *testing.T) {
	for token, want := range map[string]string{
		"abc":              "Bearer abc",
		" spaced token \n": "Bearer spaced token",
		"":                 "",
		"   ":              "",
		"bad\x00byte":      "",
		"tab\tinside":      "Bearer tab\tinside",
	} {
		if got := BearerHeader(token); got != want {
			t.Errorf("BearerHeader(%q) = %q, want %q", token, got, want)
		}
	}
}
