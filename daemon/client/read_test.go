package client_test

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/seed5ad92d46/sous/daemon"
	"github.com/seed5ad92d46/sous/daemon/client"
	"github.com/seed5ad92d46/sous/daemon/wire"
)

// files.read of files of several MiB over every link: the daemon reads
// a file into its answer and escapes it there (or, when the escapes do not
// fit, into a new buffer), writes that answer from where it lies, and
// the client unescapes it in place. The content must be what encoding/json
// makes of the file both ways: its bytes, with U+FFFD for invalid UTF-8.
func TestFilesReadLargeOverEveryLink(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	var text bytes.Buffer
	for i := 0; text.Len() < 3<<20; i++ {
		fmt.Fprintf(&text, "line %d: <tag> & \"quoted\"\tü 日本 \u2028\n", i)
	}
	// Log lines escape only their newlines, which fit the room the daemon
	// leaves to escape in place; text's escapes outgrow it, and bytes that
	// are not UTF-8 grow sixfold: those two are encoded into a new buffer.
	log := bytes.Repeat([]byte("2026-11-23T10:00:00Z INFO step 42 finished in 1.2s\n"), 80000)
	binary := append(bytes.Clone(text.Bytes()[:1<<20]), "\xff\xfe\x00 end"...)
	files := map[string][]byte{"log": log, "text": text.Bytes(), "binary": binary, "empty": nil}
	for name, content := range files {
		if err := os.WriteFile(filepath.Join(dir, name), content, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	sock := startDaemon(t, daemon.Config{})
	wsAddr, _ := startWSDaemon(t, daemon.Config{}, daemon.WebSocketOptions{RequireBearer: true})
	links := map[string]func(ctx context.Context) (*client.Client, error){
		"embedded": func(context.Context) (*client.Client, error) { _, c := embeddedDaemon(t); return c, nil },
		"unix": func(ctx context.Context) (*client.Client, error) {
			return client.DialUnix(ctx, sock, testToken, client.Options{})
		},
		"websocket": func(ctx context.Context) (*client.Client, error) {
			return client.DialWebSocket(ctx, "ws://"+wsAddr+"/", testToken, client.Options{})
		},
	}
	for over, dial := range links {
		t.Run(over, func(t *testing.T) {
			ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
			defer cancel()
			c, err := dial(ctx)
			if err != nil {
				t.Fatal(err)
			}
			defer c.Close()
			for name, content := range files {
				var want wire.ReadResult
				raw, _ := json.Marshal(wire.ReadResult{Content: string(content), Exists: true})
				if err := json.Unmarshal(raw, &want); err != nil {
					t.Fatal(err)
				}
				for range 2 { // and the link is still in step after it
					var got wire.ReadResult
					if err := c.Call(ctx, "files.read", map[string]any{"path": filepath.Join(dir, name)}, &got); err != nil {
						t.Fatalf("%s: %v", name, err)
					}
					if got != want {
						t.Fatalf("%s: %d bytes, exists %v; want %d bytes", name, len(got.Content), got.Exists, len(want.Content))
					}
					if err := c.Call(ctx, "server.ping", nil, nil); err != nil {
						t.Fatalf("ping after %s: %v", name, err)
					}
				}
			}
			var missing wire.ReadResult
			if err := c.Call(ctx, "files.read", map[string]any{"path": filepath.Join(dir, "missing")}, &missing); err != nil || missing != (wire.ReadResult{}) {
				t.Fatalf("missing: %+v, %v", missing, err)
			}
		})
	}
}
