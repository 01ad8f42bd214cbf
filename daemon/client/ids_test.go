package client_test

import (
	"context"
	"strings"
	"testing"

	"github.com/seed5ad92d46/sous/daemon/client"
)

// An id that is not valid UTF-8 cannot travel in JSON unchanged: the
// daemon would see U+FFFD and the client would wait forever for frames
// under the id it sent. It is refused at once instead.
func TestInvalidUTF8IDRefused(t *testing.T) {
	_, c := embeddedDaemon(t)
	ctx := context.Background()
	if _, err := c.Spawn(ctx, client.SpawnSpec{ID: "bad\xffid", Command: "true"}, nil); err == nil || !strings.Contains(err.Error(), "not valid UTF-8") {
		t.Fatalf("spawn: %v", err)
	}
	if _, _, err := c.Reattach(ctx, "bad\xffid", 0, nil); err == nil || !strings.Contains(err.Error(), "not valid UTF-8") {
		t.Fatalf("reattach: %v", err)
	}
	// Unicode that is valid is fine.
	p, err := c.Spawn(ctx, client.SpawnSpec{ID: "ünïcödé ✓", Command: "true"}, nil)
	if err != nil {
		t.Fatal(err)
	}
	if code, err := p.Wait(ctx); err != nil || code != 0 {
		t.Fatalf("wait: %d %v", code, err)
	}
}
