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

// catToFile spawns id, a process that writes its stdin to a file in dir,
// and returns it with the file's path.
func catToFile(ctx context.Context, c *client.Client, id, dir string) (*client.Proc, string, error) {
	out := filepath.Join(dir, id+".in")
	p, err := c.Spawn(ctx, client.SpawnSpec{ID: id, Command: "sh", Args: []string{"-c", `cat > "$0"`, out}}, nil)
	return p, out, err
}

// checkReceived closes p's stdin, waits for p, and says how the file it
// wrote differs from want, if it does.
func checkReceived(ctx context.Context, p *client.Proc, out string, want []byte) error {
	if err := p.CloseStdin(ctx); err != nil {
		return err
	}
	if code, err := p.Wait(ctx); err != nil || code != 0 {
		return fmt.Errorf("wait: exit %d, %v", code, err)
	}
	got, err := os.ReadFile(out)
	if err != nil {
		return err
	}
	if !bytes.Equal(got, want) {
		at := 0
		for at < min(len(got), len(want)) && got[at] == want[at] {
			at++
		}
		return fmt.Errorf("the child read %d bytes, want the %d written, once and in order; they differ from byte %d", len(got), len(want), at)
	}
	return nil
}

func randomBytes(n int) []byte {
	b := make([]byte, n)
	rand.Read(b)
	return b
}

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
			data := randomBytes(6<<20 + i*77777)
			id := "big" + string(rune('a'+i))
			p, out, err := catToFile(ctx, c, id, dir)
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
			if err := checkReceived(ctx, p, out, data); err != nil {
				t.Errorf("%s: %v", id, err)
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
	// Each way. At 50 ms the pipelined write took 1.615 s once against the
	// 1.6 s of 16 round trips, with three test packages loading the two
	// CPUs: the copying, not the round trips, had become most of it.
	const latency = 100 * time.Millisecond
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
			p, out, err := catToFile(ctx, c, "slow", t.TempDir())
			if err != nil {
				t.Fatal(err)
			}
			data := randomBytes(chunks * 512 << 10)
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
			if err := checkReceived(ctx, p, out, data); err != nil {
				t.Fatal(err)
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
	if !client.PipelinesStdin(c) {
		t.Fatal("the client does not keep several stdin requests in flight on this link: nothing here would be resent out of turn")
	}
	p, out, err := catToFile(ctx, c, "cut", t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	data := randomBytes(48 << 20)
	for off := 0; off < len(data); {
		n := min(len(data)-off, 3<<20+off%777) // 6 or 7 requests per write
		if _, err := p.Write(ctx, data[off:off+n]); err != nil {
			t.Fatalf("write at %d: %v (%d cuts so far)", off, err, proxy.Cuts())
		}
		off += n
	}
	if err := checkReceived(ctx, p, out, data); err != nil {
		t.Fatalf("%v (%d cuts)", err, proxy.Cuts())
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
	c := dialProxyWith(t, startDaemon(t, daemon.Config{DisableFeatures: []string{wire.FeatureStdinOrdered}}),
		client.WithStdinPipelinedAlways(client.Options{ReconnectTimeout: 20 * time.Second}))
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	p, out, err := catToFile(ctx, c, "gaps", t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	data := randomBytes(32 << 20)
	for off := 0; off < len(data); off += 4 << 20 {
		if applied, err := p.Write(ctx, data[off:off+4<<20]); err != nil || applied != int64(off+4<<20) {
			t.Fatalf("write at %d: applied %d, %v", off, applied, err)
		}
	}
	if err := checkReceived(ctx, p, out, data); err != nil {
		t.Fatal(err)
	}
}
