package netlimit

import (
	"errors"
	"io"
	"net"
	"net/http"
	"sync/atomic"
	"testing"
	"time"
)

// Real TCP peers: over the limit a connection is closed on accept; closing
// or releasing a pending one makes room.
func TestListener(t *testing.T) {
	t.Parallel()
	tcp, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	var pending, shed atomic.Int64
	ln := New(tcp, 2, Counters{Pending: &pending, Shed: &shed})
	defer ln.Close()
	accepted := make(chan net.Conn, 10)
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				close(accepted)
				return
			}
			accepted <- c
		}
	}()
	dial := func() net.Conn {
		t.Helper()
		c, err := net.Dial("tcp", tcp.Addr().String())
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { c.Close() })
		return c
	}
	next := func() net.Conn {
		t.Helper()
		select {
		case c := <-accepted:
			return c
		case <-time.After(5 * time.Second):
			t.Fatal("nothing accepted")
		}
		return nil
	}
	dial()
	dial()
	a, b := next(), next()
	over := dial()
	over.SetReadDeadline(time.Now().Add(5 * time.Second))
	if _, err := over.Read(make([]byte, 1)); !errors.Is(err, io.EOF) && !isReset(err) {
		t.Fatalf("a peer over the limit: read %v, want the connection closed", err)
	}
	if shed.Load() != 1 || pending.Load() != 2 || ln.Pending() != 2 {
		t.Fatalf("shed %d, pending %d/%d", shed.Load(), pending.Load(), ln.Pending())
	}
	a.Close()
	a.Close() // idempotent
	ConnState(b, http.StateHijacked)
	if pending.Load() != 0 {
		t.Fatalf("pending %d after a close and a hijack", pending.Load())
	}
	dial()
	dial()
	next()
	next()
	if shed.Load() != 1 {
		t.Fatalf("shed %d: room was not made", shed.Load())
	}
	b.Close() // released already: counts nothing twice
	if pending.Load() != 2 {
		t.Fatalf("pending %d", pending.Load())
	}
}

func isReset(err error) bool {
	var ne *net.OpError
	return errors.As(err, &ne) && !ne.Timeout()
}
