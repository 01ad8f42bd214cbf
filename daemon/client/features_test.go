package client_test

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"net"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/seed5ad92d46/sous/daemon/client"
	"github.com/seed5ad92d46/sous/internal/testutil"
)

// oldDaemon answers like a claustrum daemon from before the extensions: the
// 19 methods and only the process.stdin.offset feature.
func oldDaemon(t *testing.T) string {
	t.Helper()
	sock := filepath.Join(testutil.ShortTempDir(t), "old.sock")
	ln, err := net.Listen("unix", sock)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { ln.Close() })
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			go func() {
				defer c.Close()
				sc := bufio.NewScanner(c)
				for sc.Scan() {
					var req struct {
						ID     json.RawMessage `json:"id"`
						Method string          `json:"method"`
					}
					json.Unmarshal(sc.Bytes(), &req)
					var result string
					switch req.Method {
					case "server.ping":
						result = `{"pong":true}`
					case "server.capabilities":
						result = `{"version":"old","methods":["server.ping"],"features":["process.stdin.offset"]}`
					default:
						fmt.Fprintf(c, `{"jsonrpc":"2.0","id":%s,"error":{"code":-32601,"message":"Unknown method: %s"}}`+"\n", req.ID, req.Method)
						continue
					}
					fmt.Fprintf(c, `{"jsonrpc":"2.0","id":%s,"result":%s}`+"\n", req.ID, result)
				}
			}()
		}
	}()
	return sock
}

func TestMissingFeatureIsNamed(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	c, err := client.DialUnix(ctx, oldDaemon(t), "any", client.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	ok, err := c.HasFeature(ctx, "process.stdin.offset")
	if err != nil || !ok {
		t.Fatalf("stdin.offset: %v %v", ok, err)
	}
	err = c.RequireFeature(ctx, "process.list", "listing processes")
	if err == nil || !strings.Contains(err.Error(), `"process.list"`) || !strings.Contains(err.Error(), "listing processes") {
		t.Fatalf("err = %v", err)
	}
}
