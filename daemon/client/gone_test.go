package client_test

import (
	"bufio"
	"context"
	"net"
	"strings"
	"testing"
	"time"

	"github.com/seed5ad92d46/sous/daemon"
	"github.com/seed5ad92d46/sous/daemon/client"
)

// A process replaced by a spawn that reuses its id (from another client)
// ends for everyone following it: they are told it is gone (process.gone)
// instead of waiting for an exit frame that can no longer come. The client
// whose spawn replaced it follows the new process undisturbed.
func TestReplacedProcessEndsItsFollowers(t *testing.T) {
	sock := startDaemon(t, daemon.Config{})
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	a, b := dialProxy(t, sock), dialProxy(t, sock)

	old, err := a.Spawn(ctx, client.SpawnSpec{ID: "job", Command: "sleep", Args: []string{"30"}}, nil)
	if err != nil {
		t.Fatal(err)
	}
	follower, _, err := b.Reattach(ctx, "job", 0, nil)
	if err != nil {
		t.Fatal(err)
	}
	// A third client replaces it; so does the first client itself later.
	c := dialProxy(t, sock)
	repl, err := c.Spawn(ctx, client.SpawnSpec{ID: "job", Command: "sh", Args: []string{"-c", "echo new"}}, nil)
	if err != nil {
		t.Fatal(err)
	}
	for name, p := range map[string]*client.Proc{"spawner": old, "follower": follower} {
		select {
		case <-p.Done():
		case <-ctx.Done():
			t.Fatalf("the %s of the replaced process still waits for its exit", name)
		}
		if _, err := p.Wait(ctx); err == nil || !strings.Contains(err.Error(), "replaced on the daemon by a new process with the same id") {
			t.Fatalf("%s: wait error %v", name, err)
		}
	}
	if code, err := repl.Wait(ctx); err != nil || code != 0 {
		t.Fatalf("the new process: %d, %v", code, err)
	}

	// A client replacing its own process: the old one fails as replaced,
	// the new one runs to its exit although its spawn reply and the old
	// one's Gone notification cross on the connection.
	first, err := a.Spawn(ctx, client.SpawnSpec{ID: "own", Command: "sleep", Args: []string{"30"}}, nil)
	if err != nil {
		t.Fatal(err)
	}
	second, err := a.Spawn(ctx, client.SpawnSpec{ID: "own", Command: "true"}, nil)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := first.Wait(ctx); err == nil {
		t.Fatal("the replaced process ended without an error")
	}
	if code, err := second.Wait(ctx); err != nil || code != 0 {
		t.Fatalf("the replacing process: %d, %v", code, err)
	}
}

// Without notifyGone (a claustrum client), the daemon sends nothing that
// claustrum would not: the subscription just ends, as the contract says.
func TestGoneOnlyWhenAsked(t *testing.T) {
	sock := startDaemon(t, daemon.Config{})
	raw := func() (net.Conn, *bufio.Reader) {
		conn, err := net.Dial("unix", sock)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { conn.Close() })
		// A notification that never comes fails the test, not the run.
		conn.SetReadDeadline(time.Now().Add(10 * time.Second))
		return conn, bufio.NewReader(conn)
	}
	call := func(conn net.Conn, r *bufio.Reader, line string) {
		t.Helper()
		if _, err := conn.Write([]byte(line + "\n")); err != nil {
			t.Fatal(err)
		}
	}
	tok := `"auth":"` + testToken + `"`
	plain, plainR := raw()
	asks, asksR := raw()
	call(plain, plainR, `{"jsonrpc":"2.0","id":1,"method":"process.spawn",`+tok+`,"params":{"id":"x","command":"sleep","args":["30"]}}`)
	readUntil(t, plainR, `"id":1`)
	call(asks, asksR, `{"jsonrpc":"2.0","id":1,"method":"process.reattach",`+tok+`,"params":{"id":"x","fromSeq":0,"notifyGone":true}}`)
	readUntil(t, asksR, `"id":1`)
	other, otherR := raw()
	call(other, otherR, `{"jsonrpc":"2.0","id":1,"method":"process.spawn",`+tok+`,"params":{"id":"x","command":"true"}}`)
	readUntil(t, otherR, `"id":1`)

	line := readUntil(t, asksR, `"type":"gone"`)
	for _, want := range []string{`"processId":"x"`, `"reason":"replaced"`, `"pid":`, `"startTime":`} {
		if !strings.Contains(line, want) {
			t.Errorf("gone line %s lacks %s", line, want)
		}
	}
	// The plain connection gets nothing more: a ping's answer is next.
	call(plain, plainR, `{"jsonrpc":"2.0","id":2,"method":"server.ping",`+tok+`}`)
	if got := readUntil(t, plainR, `"id":2`); !strings.Contains(got, `"pong"`) {
		t.Fatalf("plain connection read %s", got)
	}
}

// readUntil reads lines until one contains want, failing on a "gone" line
// that was not asked for, and returns it.
func readUntil(t *testing.T, r *bufio.Reader, want string) string {
	t.Helper()
	for {
		line, err := r.ReadString('\n')
		if err != nil {
			t.Fatalf("reading for %s: %v", want, err)
		}
		if strings.Contains(line, want) {
			if strings.Contains(line, `"error"`) {
				t.Fatalf("reading for %s: %s", want, line)
			}
			return line
		}
		if strings.Contains(line, `"type":"gone"`) {
			t.Fatalf("unexpected %s", line)
		}
	}
}
