package client_test

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/seed5ad92d46/sous/daemon"
	"github.com/seed5ad92d46/sous/daemon/client"
)

// Over a Unix socket, a process spawned without a frame handler and then
// waited for is read by its waiter: the spawn's answer and the exit frame
// both, with the reader goroutine left parked. Handing it the reading after
// each spawn's answer woke it, and it woke the waiter with the exit frame:
// two hand-overs between goroutines per spawn.
func TestWaiterReadsItsOwnExit(t *testing.T) {
	sock := startDaemon(t, daemon.Config{})
	c := dialProxy(t, sock)
	ctx := context.Background()
	if err := c.Call(ctx, "server.ping", nil, nil); err != nil {
		t.Fatal(err)
	}
	const n = 50
	reads, wakes := client.SelfReads(c), client.ReaderWakes(c)
	for i := range n {
		p, err := c.Spawn(ctx, client.SpawnSpec{ID: fmt.Sprint("w", i), Command: "true"}, nil)
		if err != nil {
			t.Fatal(err)
		}
		if code, err := p.Wait(ctx); err != nil || code != 0 {
			t.Fatalf("wait: %d %v", code, err)
		}
	}
	// The reader goroutine may still hold the reading at the start, from
	// the dial; after that nobody hands it over.
	if got := client.ReaderWakes(c) - wakes; got > 2 {
		t.Errorf("the reader goroutine was handed the reading %d times in %d spawns and waits", got, n)
	}
	if got := client.SelfReads(c) - reads; got < 2*n-4 {
		t.Errorf("callers read %d of %d answers and exit frames themselves", got, 2*n)
	}
}

// A process spawned without a handler whose caller does not Wait but
// watches it otherwise (Done, Exited, Err) still gets its exit: asking
// hands the reading to the reader goroutine, as does a Wait given up.
func TestSilentProcessWatchedWithoutWait(t *testing.T) {
	sock := startDaemon(t, daemon.Config{})
	c := dialProxy(t, sock)
	ctx := context.Background()
	spawn := func(id, script string) *client.Proc {
		t.Helper()
		p, err := c.Spawn(ctx, client.SpawnSpec{ID: id, Command: "sh", Args: []string{"-c", script}}, nil)
		if err != nil {
			t.Fatal(err)
		}
		return p
	}
	within := func(what string, done <-chan struct{}) {
		t.Helper()
		select {
		case <-done:
		case <-time.After(10 * time.Second):
			t.Fatalf("%s: no exit within 10 s", what)
		}
	}

	p := spawn("done", "sleep 0.1")
	within("Done", p.Done())

	p = spawn("exited", "sleep 0.1; exit 3")
	polled := make(chan struct{})
	go func() {
		defer close(polled)
		for {
			if code, ok := p.Exited(); ok {
				if code != 3 {
					t.Errorf("Exited: %d", code)
				}
				return
			}
			time.Sleep(5 * time.Millisecond)
		}
	}()
	within("Exited polled", polled)

	p = spawn("given-up", "sleep 0.3")
	short, cancel := context.WithTimeout(ctx, 50*time.Millisecond)
	if _, err := p.Wait(short); err == nil {
		t.Fatal("Wait returned before the child exited")
	}
	cancel()
	within("Done after a Wait given up", p.Done())
	if code, err := p.Wait(ctx); err != nil || code != 0 {
		t.Fatalf("wait: %d %v", code, err)
	}
}
