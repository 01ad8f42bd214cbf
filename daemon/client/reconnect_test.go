package client_test

import (
	"bufio"
	"bytes"
	"context"
	"crypto/rand"
	"crypto/sha256"
	"fmt"
	mrand "math/rand/v2"
	"net"
	"os"
	"path/filepath"
	"strconv"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/seed5ad92d46/sous/daemon"
	"github.com/seed5ad92d46/sous/daemon/client"
	"github.com/seed5ad92d46/sous/daemon/wire"
)

const testToken = "t0ken with spaces "

// startDaemon serves a real daemon on a temp socket and returns its path.
func startDaemon(t *testing.T, cfg daemon.Config) string {
	t.Helper()
	dir := shortTempDir(t)
	cfg.Token = testToken
	if cfg.StateDir == "" {
		cfg.StateDir = filepath.Join(dir, "state")
	}
	srv, err := daemon.New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	sock := filepath.Join(dir, "d.sock")
	ln, err := daemon.ListenUnix(sock)
	if err != nil {
		t.Fatal(err)
	}
	go srv.Serve(ln)
	t.Cleanup(func() { srv.Close() })
	return sock
}

// shortTempDir keeps socket paths under the 108-byte sun_path limit.
func shortTempDir(t *testing.T) string {
	d, err := os.MkdirTemp("", "sous-")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(d) })
	return d
}

// cuttingProxy relays connections to a daemon socket and cuts each one after
// a random number of bytes (seeded, so a failure can be replayed).
type cuttingProxy struct {
	path   string
	target string
	rng    *mrand.Rand
	minCut int
	maxCut int
	mu     sync.Mutex
	cuts   atomic.Int64
}

func newCuttingProxy(t *testing.T, target string, seed uint64, minCut, maxCut int) *cuttingProxy {
	t.Helper()
	p := &cuttingProxy{
		path:   filepath.Join(shortTempDir(t), "p.sock"),
		target: target,
		rng:    mrand.New(mrand.NewPCG(seed, seed^0x5eed)),
		minCut: minCut,
		maxCut: maxCut,
	}
	t.Logf("cutting proxy seed %d, cuts every %d..%d bytes", seed, minCut, maxCut)
	ln, err := net.Listen("unix", p.path)
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
			go p.relay(c)
		}
	}()
	return p
}

func (p *cuttingProxy) budget() int64 {
	p.mu.Lock()
	defer p.mu.Unlock()
	return int64(p.minCut + p.rng.IntN(p.maxCut-p.minCut+1))
}

func (p *cuttingProxy) relay(c net.Conn) {
	u, err := net.Dial("unix", p.target)
	if err != nil {
		c.Close()
		return
	}
	var left atomic.Int64
	left.Store(p.budget())
	cut := func() {
		c.Close()
		u.Close()
	}
	pipe := func(dst, src net.Conn) {
		buf := make([]byte, 16<<10)
		for {
			n, err := src.Read(buf)
			if n > 0 {
				if rest := left.Add(-int64(n)); rest < 0 {
					// Deliver part of this read, then cut mid-line.
					keep := max(int64(n)+rest, 0)
					dst.Write(buf[:keep])
					p.cuts.Add(1)
					cut()
					return
				}
				if _, err := dst.Write(buf[:n]); err != nil {
					cut()
					return
				}
			}
			if err != nil {
				cut()
				return
			}
		}
	}
	go pipe(u, c)
	go pipe(c, u)
}

func dialProxy(t *testing.T, path string) *client.Client {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	c, err := client.DialUnix(ctx, path, testToken, client.Options{ReconnectTimeout: 20 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	return c
}

func TestReconnectStreamsByteExact(t *testing.T) {
	size := 100 << 20
	if testing.Short() {
		size = 8 << 20
	}
	dir := t.TempDir()
	src := filepath.Join(dir, "random")
	data := make([]byte, size)
	rand.Read(data)
	if err := os.WriteFile(src, data, 0o600); err != nil {
		t.Fatal(err)
	}
	want := sha256.Sum256(data)
	data = nil

	sock := startDaemon(t, daemon.Config{ReplayMemLimit: 1 << 20})
	proxy := newCuttingProxy(t, sock, uint64(time.Now().UnixNano()), 200<<10, 600<<10)
	c := dialProxy(t, proxy.path)

	h := sha256.New()
	var got atomic.Int64
	var stderr bytes.Buffer
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	p, err := c.Spawn(ctx, client.SpawnSpec{ID: "stream", Command: "cat", Args: []string{src}}, func(f *wire.Frame) {
		switch f.Stream {
		case wire.Stdout:
			h.Write(f.Data)
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
		t.Fatalf("wait: %v (received %d of %d bytes, %d cuts)", err, got.Load(), size, proxy.cuts.Load())
	}
	if code != 0 {
		t.Fatalf("cat exited %d: %s", code, stderr.String())
	}
	if got.Load() != int64(size) || !bytes.Equal(h.Sum(nil), want[:]) {
		t.Fatalf("received %d bytes (want %d), sha256 match %v", got.Load(), size, bytes.Equal(h.Sum(nil), want[:]))
	}
	if p.Lost() != 0 {
		t.Fatalf("client reports %d lost frames", p.Lost())
	}
	if proxy.cuts.Load() < 10 {
		t.Fatalf("only %d cuts: the test did not exercise reconnects", proxy.cuts.Load())
	}
	t.Logf("%d MiB byte-exact across %d dropped connections", size>>20, proxy.cuts.Load())
}

func TestReconnectStdinExactlyOnce(t *testing.T) {
	lines := 50000
	if testing.Short() {
		lines = 5000
	}
	sock := startDaemon(t, daemon.Config{})
	proxy := newCuttingProxy(t, sock, uint64(time.Now().UnixNano()), 50<<10, 150<<10)
	c := dialProxy(t, proxy.path)

	out := filepath.Join(t.TempDir(), "received")
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	p, err := c.Spawn(ctx, client.SpawnSpec{ID: "stdin", Command: "sh", Args: []string{"-c", "cat > " + out}}, nil)
	if err != nil {
		t.Fatal(err)
	}
	for i := range lines {
		if _, err := p.Write(ctx, []byte("line "+strconv.Itoa(i)+"\n")); err != nil {
			t.Fatalf("write line %d: %v (%d cuts so far)", i, err, proxy.cuts.Load())
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
	if proxy.cuts.Load() < 5 {
		t.Fatalf("only %d cuts: the test did not exercise reconnects", proxy.cuts.Load())
	}
	t.Logf("%d stdin lines exactly once across %d dropped connections", lines, proxy.cuts.Load())
}

func TestEmbeddedSpawnWaitAndReattach(t *testing.T) {
	srv, err := daemon.New(daemon.Config{})
	if err != nil {
		t.Fatal(err)
	}
	defer srv.Close()
	c := client.Embedded(srv)
	defer c.Close()
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

func TestClientGivesUpWhenDaemonGone(t *testing.T) {
	dir := shortTempDir(t)
	srv, err := daemon.New(daemon.Config{Token: testToken})
	if err != nil {
		t.Fatal(err)
	}
	sock := filepath.Join(dir, "d.sock")
	ln, err := daemon.ListenUnix(sock)
	if err != nil {
		t.Fatal(err)
	}
	go srv.Serve(ln)
	ctx := context.Background()
	c, err := client.DialUnix(ctx, sock, testToken, client.Options{ReconnectTimeout: 300 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	p, err := c.Spawn(ctx, client.SpawnSpec{ID: "long", Command: "sleep", Args: []string{"30"}}, nil)
	if err != nil {
		t.Fatal(err)
	}
	srv.Close()
	_, err = p.Wait(ctx)
	if err == nil || !bytes.Contains([]byte(err.Error()), []byte("connection to the daemon lost")) {
		t.Fatalf("wait err = %v", err)
	}
	if err := c.Call(ctx, "server.ping", nil, nil); err == nil {
		t.Fatal("ping after the daemon died succeeded")
	}
}
