package daemon

import (
	"io"
	"net"
	"os"
	"path/filepath"
	"syscall"
	"testing"
	"time"

	"github.com/seed5ad92d46/sous/daemon/wire"
)

// pingLine is a server.ping request with id.
func pingLine(id string) string {
	return `{"jsonrpc":"2.0","id":` + id + `,"method":"server.ping","auth":` + string(wire.QuoteID(testToken)) + "}\n"
}

// pipeConn serves one end of a net.Pipe and returns the other, whose
// every Read returns what one Write of the daemon wrote: where the
// daemon's writes end shows.
func pipeConn(t *testing.T) net.Conn {
	t.Helper()
	srv, err := New(Config{Token: testToken, Dir: t.TempDir()})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { srv.Close() })
	client, server := net.Pipe()
	t.Cleanup(func() { client.Close() })
	srv.ServeConn(server)
	client.SetDeadline(time.Now().Add(30 * time.Second))
	return client
}

// Requests the reader runs itself that came together are answered
// together: a runner's journal record and its effect's request arrive in
// one write, and their answers leave in one, so the runner wakes once.
func TestInlineAnswersThatCameTogetherGoTogether(t *testing.T) {
	c := pipeConn(t)
	if _, err := io.WriteString(c, pingLine("1")+pingLine("2")+pingLine("3")); err != nil {
		t.Fatal(err)
	}
	buf := make([]byte, 64<<10)
	n, err := c.Read(buf)
	if err != nil {
		t.Fatal(err)
	}
	want := `{"jsonrpc":"2.0","id":1,"result":{"pong":true}}` + "\n" +
		`{"jsonrpc":"2.0","id":2,"result":{"pong":true}}` + "\n" +
		`{"jsonrpc":"2.0","id":3,"result":{"pong":true}}` + "\n"
	if got := string(buf[:n]); got != want {
		t.Fatalf("the first write of the daemon:\n%s\nwant the three answers in one:\n%s", got, want)
	}

	// One that came alone is answered at once, not held for a next.
	if _, err := io.WriteString(c, pingLine("4")); err != nil {
		t.Fatal(err)
	}
	if n, err = c.Read(buf); err != nil || string(buf[:n]) != `{"jsonrpc":"2.0","id":4,"result":{"pong":true}}`+"\n" {
		t.Fatalf("a lone ping: %q %v", buf[:n], err)
	}
}

// An answer held for the next request is not kept waiting behind one the
// reader hands to a goroutine: files.read of a FIFO whose writer writes
// nothing blocks, and the ping sent with it is answered all the same.
func TestHeldAnswerNotKeptBehindASlowRequest(t *testing.T) {
	c := pipeConn(t)
	fifo := filepath.Join(t.TempDir(), "fifo")
	if err := syscall.Mkfifo(fifo, 0o600); err != nil {
		t.Fatal(err)
	}
	// Held open read-write (which never blocks), it is a writer from the
	// start: the daemon's open does not wait, and its read waits until
	// this writer writes and goes.
	w, err := os.OpenFile(fifo, os.O_RDWR, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer w.Close()
	read := `{"jsonrpc":"2.0","id":2,"method":"files.read","params":{"path":` + string(wire.QuoteID(fifo)) + `},"auth":` +
		string(wire.QuoteID(testToken)) + "}\n"
	go io.WriteString(c, pingLine("1")+read)
	c.SetReadDeadline(time.Now().Add(5 * time.Second))
	buf := make([]byte, 4096)
	n, err := c.Read(buf)
	if err != nil || string(buf[:n]) != `{"jsonrpc":"2.0","id":1,"result":{"pong":true}}`+"\n" {
		t.Fatalf("the ping sent with a slow request: %q %v", buf[:n], err)
	}
	// Let the read end, and take its answer.
	w.WriteString("x")
	w.Close()
	if _, err := c.Read(buf); err != nil {
		t.Fatalf("files.read's answer: %v", err)
	}
}
