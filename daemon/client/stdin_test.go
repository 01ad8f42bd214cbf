package client_test

import (
	"bytes"
	"context"
	"crypto/rand"
	"fmt"
	"os"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"github.com/seed5ad92d46/sous/daemon"
	"github.com/seed5ad92d46/sous/daemon/client"
	"github.com/seed5ad92d46/sous/daemon/wire"
	"github.com/seed5ad92d46/sous/internal/faultproxy"
)

// Large stdin through process.stdin arrives exactly: the daemon reads long
// request lines into pooled buffers and decodes them into pooled buffers
// that go round once written, so a buffer handed back too early would show
// here as another request's bytes. Several processes at once, on one
// connection and on two, and resends that overlap what was applied (the
// daemon keeps the tail of such a chunk, not the whole buffer).
func TestStdinLargeChunksExact(t *testing.T) {
	sock := startDaemon(t, daemon.Config{})
	t.Run("unix socket", func(t *testing.T) { checkStdinLargeChunks(t, dialProxy(t, sock), dialProxy(t, sock)) })
	addr, _ := startWSDaemon(t, daemon.Config{}, daemon.WebSocketOptions{})
	t.Run("websocket", func(t *testing.T) { checkStdinLargeChunks(t, dialWS(t, addr), dialWS(t, addr)) })
}

func checkStdinLargeChunks(t *testing.T, conns ...*client.Client) {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	dir := t.TempDir()
	var wg sync.WaitGroup
	for i := range 4 {
		c := conns[i%len(conns)]
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

// Over a link with a round trip, a large Write keeps several requests in
// flight (process.stdin.ordered): one at a time, each 512 KiB chunk costs
// at least a round trip, so sixteen of them could not take less than
// sixteen. Against a daemon that does not apply them in order, the client
// sends one at a time, and the data arrives exactly either way.
func TestStdinPipelinedOverALatentLink(t *testing.T) {
	const latency = 50 * time.Millisecond // each way
	const chunks = 16
	for _, ordered := range []bool{true, false} {
		t.Run(fmt.Sprint("ordered=", ordered), func(t *testing.T) {
			cfg := daemon.Config{}
			if !ordered {
				cfg.DisableFeatures = []string{wire.FeatureStdinOrdered}
			}
			proxy := faultproxy.Start(t, startDaemon(t, cfg), faultproxy.Options{Latency: latency})
			c := dialProxy(t, proxy.Path())
			ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
			defer cancel()
			out := filepath.Join(t.TempDir(), "in")
			p, err := c.Spawn(ctx, client.SpawnSpec{ID: "slow", Command: "sh", Args: []string{"-c", `cat > "$0"`, out}}, nil)
			if err != nil {
				t.Fatal(err)
			}
			data := make([]byte, chunks*512<<10)
			rand.Read(data)
			start := time.Now()
			if applied, err := p.Write(ctx, data); err != nil || applied != int64(len(data)) {
				t.Fatalf("write: applied %d, %v", applied, err)
			}
			took := time.Since(start)
			sequential := chunks * 2 * latency
			if ordered && took >= sequential {
				t.Errorf("16 chunks took %s, no less than 16 round trips (%s): not pipelined", took, sequential)
			}
			if !ordered && took < sequential {
				t.Errorf("16 chunks took %s, less than 16 round trips (%s), to a daemon that does not order them", took, sequential)
			}
			t.Logf("ordered %v: 8 MiB in %s (16 round trips: %s)", ordered, took.Round(time.Millisecond), sequential)
			if err := p.CloseStdin(ctx); err != nil {
				t.Fatal(err)
			}
			if code, err := p.Wait(ctx); err != nil || code != 0 {
				t.Fatalf("wait: %d %v", code, err)
			}
			if got, err := os.ReadFile(out); err != nil || !bytes.Equal(got, data) {
				t.Fatalf("the child read %d bytes (%v), want the %d written", len(got), err, len(data))
			}
		})
	}
}

// Large writes, pipelined, through a proxy that cuts the connection every
// megabyte or so: requests in flight are resent on the new connection (in
// the order first sent, and one that still overtakes an earlier one is
// sent again once that is applied), and the child reads every byte once,
// in order.
func TestStdinPipelinedAcrossCuts(t *testing.T) {
	proxy := faultproxy.Start(t, startDaemon(t, daemon.Config{}), faultproxy.Options{MinBytes: 700 << 10, MaxBytes: 3 << 20})
	c := dialProxy(t, proxy.Path())
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	out := filepath.Join(t.TempDir(), "in")
	p, err := c.Spawn(ctx, client.SpawnSpec{ID: "cut", Command: "sh", Args: []string{"-c", `cat > "$0"`, out}}, nil)
	if err != nil {
		t.Fatal(err)
	}
	data := make([]byte, 48<<20)
	rand.Read(data)
	for off := 0; off < len(data); {
		n := min(len(data)-off, 3<<20+off%777) // 6 or 7 requests per write
		if _, err := p.Write(ctx, data[off:off+n]); err != nil {
			t.Fatalf("write at %d: %v (%d cuts so far)", off, err, proxy.Cuts())
		}
		off += n
	}
	if err := p.CloseStdin(ctx); err != nil {
		t.Fatal(err)
	}
	if code, err := p.Wait(ctx); err != nil || code != 0 {
		t.Fatalf("wait: %d %v", code, err)
	}
	got, err := os.ReadFile(out)
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(got, data) {
		at := 0
		for at < min(len(got), len(data)) && got[at] == data[at] {
			at++
		}
		t.Fatalf("the child read %d bytes, want %d; they differ from byte %d (%d cuts)", len(got), len(data), at, proxy.Cuts())
	}
	if proxy.Cuts() < 5 {
		t.Fatalf("only %d cuts: the test did not exercise reconnects", proxy.Cuts())
	}
	t.Logf("48 MiB exactly once across %d cuts", proxy.Cuts())
}

// Requests in flight together that the daemon applies out of order (one
// without process.stdin.ordered, as claustrum handles them concurrently):
// each refused as a gap is sent again once the earlier ones are answered,
// and the child reads every byte once, in order.
func TestStdinPipelinedMendsGaps(t *testing.T) {
	c := dialProxy(t, startDaemon(t, daemon.Config{DisableFeatures: []string{wire.FeatureStdinOrdered}}))
	client.PipelineStdinAlways(c)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	out := filepath.Join(t.TempDir(), "in")
	p, err := c.Spawn(ctx, client.SpawnSpec{ID: "gaps", Command: "sh", Args: []string{"-c", `cat > "$0"`, out}}, nil)
	if err != nil {
		t.Fatal(err)
	}
	data := make([]byte, 32<<20)
	rand.Read(data)
	for off := 0; off < len(data); off += 4 << 20 {
		if applied, err := p.Write(ctx, data[off:off+4<<20]); err != nil || applied != int64(off+4<<20) {
			t.Fatalf("write at %d: applied %d, %v", off, applied, err)
		}
	}
	if err := p.CloseStdin(ctx); err != nil {
		t.Fatal(err)
	}
	if code, err := p.Wait(ctx); err != nil || code != 0 {
		t.Fatalf("wait: %d %v", code, err)
	}
	if got, err := os.ReadFile(out); err != nil || !bytes.Equal(got, data) {
		t.Fatalf("the child read %d bytes (%v), want the %d written once, in order", len(got), err, len(data))
	}
}
