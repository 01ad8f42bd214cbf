package client_test

import (
	"bytes"
	"context"
	"crypto/rand"
	"os"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"github.com/seed5ad92d46/sous/daemon"
	"github.com/seed5ad92d46/sous/daemon/client"
)

// Large stdin through process.stdin arrives exactly: the daemon reads long
// request lines into pooled buffers and decodes them into pooled buffers
// that go round once written, so a buffer handed back too early would show
// here as another request's bytes. Several processes at once, on one
// connection and on two, and resends that overlap what was applied (the
// daemon keeps the tail of such a chunk, not the whole buffer).
func TestStdinLargeChunksExact(t *testing.T) {
	sock := startDaemon(t, daemon.Config{})
	conns := []*client.Client{dialProxy(t, sock), dialProxy(t, sock)}
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	dir := t.TempDir()
	var wg sync.WaitGroup
	for i := range 4 {
		c := conns[i%2]
		wg.Add(1)
		go func() {
			defer wg.Done()
			data := make([]byte, 6<<20+i*77777)
			rand.Read(data)
			out := filepath.Join(dir, "in"+string(rune('a'+i)))
			id := "big" + string(rune('a'+i))
			p, err := c.Spawn(ctx, client.SpawnSpec{ID: id, Command: "sh", Args: []string{"-c", `cat > "$0"`, out}}, nil)
			if err != nil {
				t.Error(err)
				return
			}
			// 1 MiB writes (two requests each), then a resend from the middle
			// of what was applied, reaching past it.
			half := len(data) / 2
			for off := 0; off < half; off += 1 << 20 {
				if _, err := p.Write(ctx, data[off:min(off+1<<20, half)]); err != nil {
					t.Errorf("%s: write: %v", id, err)
					return
				}
			}
			from := int64(half - 300<<10)
			if applied, dup, err := p.WriteAt(ctx, data[from:half+200<<10], from); err != nil || dup || applied != int64(half+200<<10) {
				t.Errorf("%s: overlapping resend: applied %d, duplicate %v, %v", id, applied, dup, err)
				return
			}
			if _, err := p.Write(ctx, data[half+200<<10:]); err != nil {
				t.Errorf("%s: write: %v", id, err)
				return
			}
			if err := p.CloseStdin(ctx); err != nil {
				t.Error(err)
				return
			}
			if code, err := p.Wait(ctx); err != nil || code != 0 {
				t.Errorf("%s: wait: %d %v", id, code, err)
				return
			}
			got, err := os.ReadFile(out)
			if err != nil {
				t.Error(err)
				return
			}
			if !bytes.Equal(got, data) {
				at := 0
				for at < min(len(got), len(data)) && got[at] == data[at] {
					at++
				}
				t.Errorf("%s: the child read %d bytes, want %d; they differ from byte %d", id, len(got), len(data), at)
			}
		}()
	}
	wg.Wait()
}
