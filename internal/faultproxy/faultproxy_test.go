package faultproxy

import (
	"bytes"
	"io"
	"net"
	"path/filepath"
	"testing"
	"time"

	"github.com/seed5ad92d46/sous/internal/testutil"
)

// echoServer echoes every connection back until it ends.
func echoServer(t *testing.T) string {
	t.Helper()
	dir := testutil.ShortTempDir(t)
	path := filepath.Join(dir, "echo.sock")
	ln, err := net.Listen("unix", path)
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
			go func() { io.Copy(c, c); c.Close() }()
		}
	}()
	return path
}

// relayed sends data through a fresh connection and returns what came back
// before the proxy cut it.
func relayed(t *testing.T, p *Proxy, data []byte) []byte {
	t.Helper()
	c, err := net.Dial("unix", p.Path())
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	c.SetDeadline(time.Now().Add(10 * time.Second))
	go c.Write(data)
	got, _ := io.ReadAll(c)
	return got
}

func TestCutsAtTheByteBudget(t *testing.T) {
	p := Start(t, echoServer(t), Options{MinBytes: 1000, MaxBytes: 1000, Seed: 7})
	data := bytes.Repeat([]byte("0123456789"), 1000)
	got := relayed(t, p, data)
	// 1000 bytes in both directions together: what went out, what came back.
	if len(got) >= 1000 || !bytes.Equal(got, data[:len(got)]) {
		t.Fatalf("got %d bytes back through a 1000-byte budget", len(got))
	}
	if p.Cuts() != 1 || p.Dials() != 1 {
		t.Fatalf("cuts %d dials %d", p.Cuts(), p.Dials())
	}
}

func TestSameSeedSameBudgets(t *testing.T) {
	target := echoServer(t)
	a := Start(t, target, Options{MinBytes: 1, MaxBytes: 1 << 20, MinLife: time.Millisecond, MaxLife: time.Hour, Seed: 42})
	b := Start(t, target, Options{MinBytes: 1, MaxBytes: 1 << 20, MinLife: time.Millisecond, MaxLife: time.Hour, Seed: 42})
	for range 20 {
		n1, d1 := a.budgets()
		n2, d2 := b.budgets()
		if n1 != n2 || d1 != d2 {
			t.Fatalf("seed 42 gave %d/%s and %d/%s", n1, d1, n2, d2)
		}
	}
}

func TestPauseAndTimeCuts(t *testing.T) {
	p := Start(t, echoServer(t), Options{MinLife: 50 * time.Millisecond, MaxLife: 50 * time.Millisecond})
	c, err := net.Dial("unix", p.Path())
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	c.SetDeadline(time.Now().Add(10 * time.Second))
	if _, err := io.ReadAll(c); err != nil {
		t.Fatal(err)
	}
	if p.Cuts() != 1 {
		t.Fatalf("cuts %d after the time budget", p.Cuts())
	}
	p.Pause()
	c2, err := net.Dial("unix", p.Path())
	if err != nil {
		t.Fatal(err)
	}
	defer c2.Close()
	time.Sleep(150 * time.Millisecond)
	c2.Write([]byte("still here\n"))
	buf := make([]byte, 11)
	c2.SetDeadline(time.Now().Add(5 * time.Second))
	if _, err := io.ReadFull(c2, buf); err != nil || string(buf) != "still here\n" {
		t.Fatalf("paused proxy cut the connection: %q %v", buf, err)
	}
	p.Close() // cuts what is open and waits for the relays
}

// CountMethods counts the requests going to the target by method, a line
// split across writes included, and passes every byte on unchanged; what
// comes back from the target is not counted.
func TestCountsRequestsByMethod(t *testing.T) {
	p := Start(t, echoServer(t), Options{CountMethods: true})
	c, err := net.Dial("unix", p.Path())
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	c.SetDeadline(time.Now().Add(10 * time.Second))
	lines := `{"jsonrpc":"2.0","id":1,"method":"server.ping"}` + "\n" +
		`{"jsonrpc":"2.0","id":2,"method":"process.stdin","params":{"data":"aGkK"}}` + "\n" +
		`{"jsonrpc":"2.0","id":3,"method":"server.ping"}` + "\n" +
		`not json` + "\n"
	split := len(lines) / 2 // in the middle of the second request
	for _, part := range []string{lines[:split], lines[split:]} {
		if _, err := c.Write([]byte(part)); err != nil {
			t.Fatal(err)
		}
		time.Sleep(20 * time.Millisecond) // two reads on the proxy's side
	}
	got := make([]byte, len(lines))
	if _, err := io.ReadFull(c, got); err != nil || string(got) != lines {
		t.Fatalf("echoed %q, %v", got, err)
	}
	if n, m := p.Requests("server.ping"), p.Requests("process.stdin"); n != 2 || m != 1 {
		t.Errorf("counted %d server.ping and %d process.stdin, want 2 and 1", n, m)
	}
	if n := p.Requests("process.spawn"); n != 0 {
		t.Errorf("%d process.spawn counted, none sent", n)
	}
}
