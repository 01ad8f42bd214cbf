package client_test

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"sync/atomic"
	"testing"
	"time"

	"github.com/seed5ad92d46/sous/daemon"
	"github.com/seed5ad92d46/sous/daemon/client"
	"github.com/seed5ad92d46/sous/daemon/wire"
	"github.com/seed5ad92d46/sous/internal/daemontest"
	"github.com/seed5ad92d46/sous/internal/faultproxy"
	"github.com/seed5ad92d46/sous/internal/soak"
	"github.com/seed5ad92d46/sous/internal/testutil"
)

const testToken = "t0ken with spaces "

// startDaemon serves a real daemon on a temp socket and returns its path.
func startDaemon(t testing.TB, cfg daemon.Config) string {
	t.Helper()
	cfg.Token = testToken
	if cfg.StateDir == "" {
		cfg.StateDir = filepath.Join(t.TempDir(), "state")
	}
	sock, _ := daemontest.ServeUnix(t, cfg)
	return sock
}

// embeddedDaemon returns an in-process daemon and a client of it, both
// closed when the test ends.
func embeddedDaemon(t testing.TB) (*daemon.Server, *client.Client) {
	t.Helper()
	return daemontest.Embedded(t, daemon.Config{})
}

func dialProxy(t *testing.T, path string) *client.Client {
	t.Helper()
	return dialProxyWith(t, path, client.Options{ReconnectTimeout: 20 * time.Second})
}

func dialProxyWith(t *testing.T, path string, opt client.Options) *client.Client {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	c, err := client.DialUnix(ctx, path, testToken, opt)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	return c
}

func TestReconnectStreamsByteExact(t *testing.T) {
	sock := startDaemon(t, daemon.Config{ReplayMemLimit: 1 << 20})
	proxy := faultproxy.Start(t, sock, faultproxy.Options{MinBytes: 200 << 10, MaxBytes: 600 << 10})
	checkStreamByteExact(t, dialProxy(t, proxy.Path()), proxy, "")
}

// checkStreamByteExact streams 200 MiB in CI (a few seconds), 1 GiB with
// SOUS_SOAK=1, through c while proxy cuts its connections, and checks every
// byte arrives once, in order. The child is this test binary writing a
// seeded ChaCha8 stream (see TestMain), which the handler regenerates and
// compares as frames arrive: no temp file, no second pass. The socket and
// WebSocket tests share it: only the link differs.
func checkStreamByteExact(t *testing.T, c *client.Client, proxy *faultproxy.Proxy, over string) {
	t.Helper()
	size := int64(soak.Int(200<<20, 1<<30))
	if testing.Short() {
		size = 8 << 20
	}
	self, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	seed := uint64(time.Now().UnixNano())

	expect := randomStream(seed)
	var buf []byte
	var got atomic.Int64
	var mismatch atomic.Int64
	mismatch.Store(-1)
	start := time.Now()
	var stderr bytes.Buffer
	ctx, cancel := context.WithTimeout(context.Background(), soak.Duration(2*time.Minute, 30*time.Minute))
	defer cancel()
	spec := client.SpawnSpec{ID: "stream", Command: self,
		Env: map[string]*string{randomOutputEnv: ptr(fmt.Sprintf("%d:%d", seed, size))}}
	p, err := c.Spawn(ctx, spec, func(f *wire.Frame) {
		switch f.Stream {
		case wire.Stdout:
			buf = slices.Grow(buf[:0], len(f.Data))[:len(f.Data)]
			expect.Read(buf)
			if !bytes.Equal(buf, f.Data) && mismatch.Load() < 0 {
				mismatch.Store(got.Load())
			}
			got.Add(int64(len(f.Data)))
		case wire.Stderr:
			stderr.Write(f.Data)
		}
	})
	if err != nil {
		t.Fatal(err)
	}
	code, err := p.Wait(ctx)
	if err != nil {
		t.Fatalf("wait: %v (received %d of %d bytes, %d cuts)", err, got.Load(), size, proxy.Cuts())
	}
	if code != 0 {
		t.Fatalf("the writer exited %d: %s", code, stderr.String())
	}
	if got.Load() != size || mismatch.Load() >= 0 {
		t.Fatalf("received %d bytes (want %d); first difference in the frame at byte %d", got.Load(), size, mismatch.Load())
	}
	if p.Lost() != 0 {
		t.Fatalf("client reports %d lost frames", p.Lost())
	}
	if proxy.Cuts() < 10 {
		t.Fatalf("only %d cuts: the test did not exercise reconnects", proxy.Cuts())
	}
	took := time.Since(start)
	t.Logf("%d MiB byte-exact%s across %d dropped connections in %s (%.0f MiB/s)", size>>20, over, proxy.Cuts(), took.Round(time.Millisecond), float64(size>>20)/took.Seconds())
}

func ptr[T any](v T) *T { return &v }

func TestReconnectStdinExactlyOnce(t *testing.T) {
	sock := startDaemon(t, daemon.Config{})
	proxy := faultproxy.Start(t, sock, faultproxy.Options{MinBytes: 50 << 10, MaxBytes: 150 << 10})
	checkStdinExactlyOnce(t, dialProxy(t, proxy.Path()), proxy, "")
}

// checkStdinExactlyOnce writes 50,000 stdin lines (500,000 with SOUS_SOAK=1)
// through c while proxy cuts its connections, and checks the child got each
// exactly once, in order.
func checkStdinExactlyOnce(t *testing.T, c *client.Client, proxy *faultproxy.Proxy, over string) {
	t.Helper()
	lines := soak.Int(50000, 500000)
	if testing.Short() {
		lines = 5000
	}
	out := filepath.Join(t.TempDir(), "received")
	ctx, cancel := context.WithTimeout(context.Background(), soak.Duration(3*time.Minute, 30*time.Minute))
	defer cancel()
	p, err := c.Spawn(ctx, client.SpawnSpec{ID: "stdin", Command: "sh", Args: []string{"-c", "cat > " + out}}, nil)
	if err != nil {
		t.Fatal(err)
	}
	start := time.Now()
	for i := range lines {
		if _, err := p.Write(ctx, []byte("line "+strconv.Itoa(i)+"\n")); err != nil {
			t.Fatalf("write line %d: %v (%d cuts so far)", i, err, proxy.Cuts())
		}
	}
	if err := p.CloseStdin(ctx); err != nil {
		t.Fatal(err)
	}
	if code, err := p.Wait(ctx); err != nil || code != 0 {
		t.Fatalf("wait: code %d, %v", code, err)
	}
	f, err := os.Open(out)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	n := 0
	for sc.Scan() {
		if want := "line " + strconv.Itoa(n); sc.Text() != want {
			t.Fatalf("line %d is %q, want %q", n, sc.Text(), want)
		}
		n++
	}
	if n != lines {
		t.Fatalf("child received %d lines, want %d", n, lines)
	}
	if proxy.Cuts() < 5 {
		t.Fatalf("only %d cuts: the test did not exercise reconnects", proxy.Cuts())
	}
	t.Logf("%d stdin lines exactly once, in order%s, across %d dropped connections in %s", lines, over, proxy.Cuts(), time.Since(start).Round(time.Millisecond))
}

func TestEmbeddedSpawnWaitAndReattach(t *testing.T) {
	srv, c := embeddedDaemon(t)
	ctx := context.Background()

	var seen []string
	p, err := c.Spawn(ctx, client.SpawnSpec{ID: "e1", Command: "sh", Args: []string{"-c", "echo one; echo two >&2; exit 7"}}, func(f *wire.Frame) {
		seen = append(seen, fmt.Sprintf("%d:%s:%q", f.Seq, f.Stream, f.Data))
	})
	if err != nil {
		t.Fatal(err)
	}
	code, err := p.Wait(ctx)
	if err != nil || code != 7 {
		t.Fatalf("wait: %d, %v", code, err)
	}
	if p.Pid <= 0 {
		t.Fatalf("pid %d", p.Pid)
	}

	// A second client (another run) replays everything after seq 1.
	c2 := client.Embedded(srv)
	defer c2.Close()
	var replay []string
	p2, res, err := c2.Reattach(ctx, "e1", 1, func(f *wire.Frame) {
		replay = append(replay, fmt.Sprintf("%d:%s:%q", f.Seq, f.Stream, f.Data))
	})
	if err != nil || !res.Found || res.Running {
		t.Fatalf("reattach: %+v %v", res, err)
	}
	if code, err := p2.Wait(ctx); err != nil || code != 7 {
		t.Fatalf("reattached wait: %d %v", code, err)
	}
	if len(seen) != 3 || fmt.Sprint(replay) != fmt.Sprint(seen[1:]) {
		t.Fatalf("replay after seq 1 = %v, first client saw %v", replay, seen)
	}
	if _, res, err := c2.Reattach(ctx, "nope", 0, nil); err != nil || res.Found {
		t.Fatalf("unknown id: %+v %v", res, err)
	}
}

func TestDialWrongTokenFailsClearly(t *testing.T) {
	sock := startDaemon(t, daemon.Config{})
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	_, err := client.DialUnix(ctx, sock, "wrong", client.Options{})
	if err == nil || !bytes.Contains([]byte(err.Error()), []byte("refused the token")) {
		t.Fatalf("err = %v", err)
	}
	_, err = client.DialUnix(ctx, filepath.Join(t.TempDir(), "none.sock"), "x", client.Options{})
	if err == nil || !bytes.Contains([]byte(err.Error()), []byte("connect to daemon at")) {
		t.Fatalf("err = %v", err)
	}
}

// daemonWithSleeper serves a daemon on a fresh socket, dials it with opt
// and spawns a long sleep the client follows.
func daemonWithSleeper(t *testing.T, cfg daemon.Config, opt client.Options) (*daemon.Server, *client.Client, *client.Proc) {
	t.Helper()
	cfg.Token = testToken
	srv, err := daemon.New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { srv.Close() })
	sock := filepath.Join(testutil.ShortTempDir(t), "d.sock")
	ln, err := daemon.ListenUnix(sock)
	if err != nil {
		t.Fatal(err)
	}
	go srv.Serve(ln)
	c, err := client.DialUnix(context.Background(), sock, testToken, opt)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	p, err := c.Spawn(context.Background(), client.SpawnSpec{ID: "long", Command: "sleep", Args: []string{"30"}}, nil)
	if err != nil {
		t.Fatal(err)
	}
	return srv, c, p
}

func TestClientGivesUpWhenDaemonGone(t *testing.T) {
	srv, c, p := daemonWithSleeper(t, daemon.Config{}, client.Options{ReconnectTimeout: 300 * time.Millisecond})
	ctx := context.Background()
	srv.Close()
	_, err := p.Wait(ctx)
	if err == nil || !bytes.Contains([]byte(err.Error()), []byte("connection to the daemon lost")) {
		t.Fatalf("wait err = %v", err)
	}
	if err := c.Call(ctx, "server.ping", nil, nil); err == nil {
		t.Fatal("ping after the daemon died succeeded")
	}
}

// A daemon that stops gracefully removes its socket and closes its
// connections: its clients give up at once, not after ReconnectTimeout
// (30 s by default), since what it ran went with it.
func TestClientGivesUpAtOnceWhenTheSocketIsGone(t *testing.T) {
	t.Parallel()
	srv, _, p := daemonWithSleeper(t, daemon.Config{ShutdownGrace: 200 * time.Millisecond}, client.Options{})
	start := time.Now()
	srv.Close()
	_, err := p.Wait(context.Background())
	if err == nil || !bytes.Contains([]byte(err.Error()), []byte("the daemon is gone")) {
		t.Fatalf("wait err = %v, want the daemon gone", err)
	}
	if el := time.Since(start); el > 5*time.Second {
		t.Errorf("gave up after %v, want at once", el)
	}
}

// A link that always breaks before a stdin request gets through (each is
// up to 700 KB of JSON; this one cuts every 20-60 KB) is an outage, even
// though every reconnect succeeds: the client gives up after
// ReconnectTimeout, where it reconnected forever.
func TestReconnectGivesUpWhenNothingGetsThrough(t *testing.T) {
	t.Parallel()
	sock := startDaemon(t, daemon.Config{})
	proxy := faultproxy.Start(t, sock, faultproxy.Options{MinBytes: 20 << 10, MaxBytes: 60 << 10})
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	c, err := client.DialUnix(ctx, proxy.Path(), testToken, client.Options{ReconnectTimeout: 2 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	p, err := c.Spawn(ctx, client.SpawnSpec{ID: "sink", Command: "sh", Args: []string{"-c", "cat > /dev/null"}}, nil)
	if err != nil {
		t.Fatal(err)
	}
	start := time.Now()
	_, err = p.Write(ctx, make([]byte, 600<<10))
	if !errors.Is(err, client.ErrConnectionLost) {
		t.Fatalf("write: %v (after %s, %d cuts), want the connection lost", err, time.Since(start), proxy.Cuts())
	}
	if el := time.Since(start); el > 20*time.Second {
		t.Errorf("gave up after %s, want about ReconnectTimeout (2s)", el)
	}
	t.Logf("gave up after %s and %d cuts: %v", time.Since(start).Round(time.Millisecond), proxy.Cuts(), err)
}
