package client_test

import (
	"bytes"
	"context"
	"errors"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/seed5ad92d46/sous/daemon"
	"github.com/seed5ad92d46/sous/daemon/client"
	"github.com/seed5ad92d46/sous/daemon/wire"
)

// An answer longer than the client takes (files.read of a big file) fails
// its call, and the connection goes on. It used to break the connection:
// the client reconnected and resent the call, which brought the same
// answer again, forever.
func TestAnswerTooLargeFailsTheCall(t *testing.T) {
	t.Parallel()
	big := filepath.Join(t.TempDir(), "big")
	if err := os.WriteFile(big, bytes.Repeat([]byte("x"), 3<<20), 0o644); err != nil {
		t.Fatal(err)
	}
	sock := startDaemon(t, daemon.Config{})
	wsAddr, _ := startWSDaemon(t, daemon.Config{}, daemon.WebSocketOptions{RequireBearer: true})
	for _, over := range []string{"unix", "websocket"} {
		t.Run(over, func(t *testing.T) {
			ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
			defer cancel()
			var log bytes.Buffer
			opt := client.WithAnswerLimit(client.Options{Logger: slog.New(slog.NewTextHandler(&log, nil))}, 1<<20)
			var c *client.Client
			var err error
			if over == "unix" {
				c, err = client.DialUnix(ctx, sock, testToken, opt)
			} else {
				c, err = client.DialWebSocket(ctx, "ws://"+wsAddr+"/", testToken, opt)
			}
			if err != nil {
				t.Fatal(err)
			}
			defer c.Close()
			for range 2 { // the link is still in step after the first
				var res wire.ReadResult
				err = c.Call(ctx, "files.read", map[string]any{"path": big}, &res)
				if !errors.Is(err, client.ErrAnswerTooLarge) {
					t.Fatalf("files.read of 3 MiB with a 1 MiB limit: %v", err)
				}
				var small wire.ReadResult
				if err := c.Call(ctx, "files.read", map[string]any{"path": big, "maxBytes": 10 << 20}, &small); !errors.Is(err, client.ErrAnswerTooLarge) {
					t.Fatalf("again: %v", err)
				}
				if err := c.Call(ctx, "server.ping", nil, nil); err != nil {
					t.Fatalf("ping after: %v", err)
				}
			}
			if strings.Contains(log.String(), "reconnect") {
				t.Errorf("the connection was dropped:\n%s", log.String())
			}
		})
	}
}
