package agent

import (
	"context"
	"fmt"
	"path/filepath"
	"testing"
	"time"

	"github.com/seed5ad92d46/sous/daemon"
	"github.com/seed5ad92d46/sous/daemon/client"
	"github.com/seed5ad92d46/sous/internal/claudecli"
	"github.com/seed5ad92d46/sous/internal/daemontest"
	"github.com/seed5ad92d46/sous/internal/faultproxy"
	"github.com/seed5ad92d46/sous/internal/soak"
	"github.com/seed5ad92d46/sous/runtime/agent/fakemodel"
)

// TestSessionThroughFaultyConnection runs a real Claude Code session (the
// current CLI over stdio, a scripted model) on a socket daemon reached
// through a proxy that keeps cutting the connection: after a few KiB or a
// fraction of a second, mid-line. Every turn (2 in CI, 25 with SOUS_SOAK=1)
// must still finish with its tool permission round trip: one permission
// request (not a replayed duplicate), the approved Write on disk, the
// model's closing text. The CLI's stdout
// survives as frames replayed by seq; the permission answer and the prompt
// reach its stdin exactly once through the stdin offsets.
func TestSessionThroughFaultyConnection(t *testing.T) {
	t.Parallel()
	turns := soak.Int(2, 25)
	var w *world
	target := func(i int) string { return filepath.Join(w.work, fmt.Sprintf("through-faults-%d.txt", i)) }
	w = newWorld(t, claudecli.Latest, fakemodel.Options{Func: func(req *fakemodel.Request, n int) fakemodel.Reply {
		if n >= 2*turns {
			return fakemodel.Text("unexpected request")
		}
		if n%2 == 0 {
			return fakemodel.ToolUse("Write", map[string]any{"file_path": target(n / 2), "content": fmt.Sprintf("survived the cuts %d\n", n/2)})
		}
		return fakemodel.Text(fmt.Sprintf("written %d despite the faults", n/2))
	}})

	const token = "fault-session-token"
	sock, _ := daemontest.ServeUnix(t, daemon.Config{Token: token, Env: daemonEnv(), ShutdownGrace: time.Second, StateDir: t.TempDir()})

	proxy := faultproxy.Start(t, sock, faultproxy.Options{
		MinBytes: 4 << 10, MaxBytes: 128 << 10, // a frame line of 32 KiB of data is 43 KiB
		MinLife: 50 * time.Millisecond, MaxLife: 500 * time.Millisecond,
	})
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	c, err := client.DialUnix(ctx, proxy.Path(), token, client.Options{ReconnectTimeout: 30 * time.Second})
	cancel()
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })

	rec := &recorder{decide: func(r Request) (Decision, error) { return Allow(nil), nil }}
	s := w.start(c, TransportStdio, Options{Permission: rec.callback})
	for i := range turns {
		turn := send(t, s, fmt.Sprintf("write file %d", i))
		if got, want := readFile(t, target(i)), fmt.Sprintf("survived the cuts %d\n", i); got != want {
			t.Errorf("turn %d: file = %q, want %q", i, got, want)
		}
		if want := fmt.Sprintf("written %d despite the faults", i); turn.Text != want || turn.IsError {
			t.Errorf("turn %d: text %q (want %q) subtype %q is_error %v", i, turn.Text, want, turn.Subtype, turn.IsError)
		}
		if reqs := rec.requests(); len(reqs) != i+1 || reqs[i].Tool != "Write" {
			t.Errorf("after turn %d: permission requests %+v, want one Write per turn", i, reqs)
		}
	}
	if ex := w.api.Exhausted(); len(ex) > 0 {
		t.Errorf("script exhausted: %v", ex)
	}
	proxy.Pause() // let Close talk to the CLI without a cut in the middle
	if proxy.Cuts() == 0 {
		t.Fatalf("the proxy never cut the connection (%d bytes relayed): the test exercised nothing", proxy.Bytes())
	}
	t.Logf("%d agent turns, each with a permission round trip, finished across %d cut connections (%d KiB relayed)", turns, proxy.Cuts(), proxy.Bytes()>>10)
}
