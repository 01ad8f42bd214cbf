package client

import (
	"context"
	"testing"
	"time"

	"github.com/seed5ad92d46/sous/daemon"
	"github.com/seed5ad92d46/sous/daemon/wire"
)

// The replay a follower waits for can begin right after the frames of the
// subscription it replaces, with no seq going back, when the daemon no
// longer has the frames before it. The follower then drops all of it, the
// exit frame too; once the answer says so, it counts those frames lost and
// asks for the end again. Here the other follower's subscription is one the
// daemon has truncated past (it kept 64 KiB of the process's output).
func TestFollowerWhoseReplayNothingToldApart(t *testing.T) {
	srv, err := daemon.New(daemon.Config{ReplayMemLimit: 64 << 10})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { srv.Close() })
	c := Embedded(srv)
	t.Cleanup(func() { c.Close() })
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	p, err := c.Spawn(ctx, SpawnSpec{ID: "big", Command: "sh", Args: []string{"-c", "seq 1 200000; exit 4"}}, nil)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := p.Wait(ctx); err != nil {
		t.Fatal(err)
	}
	// Another follower of the id that has seen up to seq 2, and a
	// reattach from 0: the replay starts far past 2.
	other := newProc(c, "big", nil)
	c.mu.Lock()
	c.procs["big"] = &following{procs: []*Proc{other}, last: 2}
	c.mu.Unlock()
	var got int
	q, res, err := c.Reattach(ctx, "big", 0, func(f *wire.Frame) { got++ })
	if err != nil || !res.Found || res.FirstSeq <= 3 {
		t.Fatalf("reattach: %+v, %v (want a replay truncated past seq 3)", res, err)
	}
	if code, err := q.Wait(ctx); err != nil || code != 4 {
		t.Fatalf("wait: %d, %v", code, err)
	}
	if got != 1 || q.Lost() < res.FirstSeq-1 {
		t.Errorf("%d frames handed on (want only the exit), %d counted lost (firstSeq %d)", got, q.Lost(), res.FirstSeq)
	}
}
