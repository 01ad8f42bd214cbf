package metrics

import (
	"bufio"
	"errors"
	"io"
	"net"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/seed5ad92d46/sous/internal/testutil"

	"github.com/seed5ad92d46/sous/daemon"
)

func listen(t *testing.T) (*Server, string) {
	t.Helper()
	var st daemon.Stats
	s, err := Listen("127.0.0.1:0", &st)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Close() })
	return s, strings.TrimSuffix(strings.TrimPrefix(s.URL(), "http://"), "/metrics")
}

// The metrics endpoint has no auth, so anyone who can reach it is a peer:
// each scrape is answered and its connection closed, and peers that
// connect and say nothing hold a bounded number of the daemon's
// descriptors for a bounded time. Not parallel: it counts descriptors.
func TestMetricsPeersAreBounded(t *testing.T) {
	_, addr := listen(t)

	c, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	io.WriteString(c, "GET /metrics HTTP/1.1\r\nHost: x\r\n\r\n")
	resp, err := http.ReadResponse(bufio.NewReader(c), nil)
	if err != nil {
		t.Fatal(err)
	}
	io.Copy(io.Discard, resp.Body)
	resp.Body.Close()
	if resp.StatusCode != 200 {
		t.Fatalf("scrape: %s", resp.Status)
	}
	c.SetReadDeadline(time.Now().Add(2 * time.Second))
	if _, err := c.Read(make([]byte, 1)); !errors.Is(err, io.EOF) {
		t.Fatalf("after a scrape the connection is still open: %v", err)
	}

	const peers = 100
	base := testutil.OpenFDs(t)
	conns := make([]net.Conn, peers)
	for i := range conns {
		if conns[i], err = net.Dial("tcp", addr); err != nil {
			t.Fatal(err)
		}
		defer conns[i].Close()
	}
	held := func() int { return testutil.OpenFDs(t) - base - peers }
	// Give the server time to accept them all.
	deadline := time.Now().Add(time.Second)
	for held() > maxPending+2 && time.Now().Before(deadline) {
		time.Sleep(10 * time.Millisecond)
	}
	time.Sleep(100 * time.Millisecond)
	if n := held(); n > maxPending+2 {
		t.Fatalf("%d silent peers hold %d of the daemon's descriptors, want at most %d", peers, n, maxPending)
	}
	// A scraper gets through once the silent ones time out.
	deadline = time.Now().Add(3 * handshakeTimeout)
	for {
		resp, err := http.Get("http://" + addr + "/metrics")
		if err == nil {
			resp.Body.Close()
			if resp.StatusCode == 200 {
				break
			}
		}
		if time.Now().After(deadline) {
			t.Fatalf("no scrape got through after the silent peers: %v", err)
		}
		time.Sleep(50 * time.Millisecond)
	}
}
