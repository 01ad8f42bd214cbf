package runtime

import (
	"context"
	"errors"
	"strings"
	"sync"
	"testing"
	"time"
)

// goroutineID-free check: callbacks must run on the goroutine that waits.
// They append to a slice without a lock; the race detector proves they run
// there and nowhere else.
func TestLoopRunsPostedCallbacksOnTheWaitingGoroutine(t *testing.T) {
	t.Parallel()
	l := NewLoop()
	var ran []int // touched only by callbacks and by this goroutine after Wait
	ready := make(chan struct{})
	var posters sync.WaitGroup
	for i := range 50 {
		posters.Add(1)
		go func() {
			defer posters.Done()
			l.Post(func() { ran = append(ran, i) })
		}()
	}
	go func() {
		posters.Wait()
		l.Post(func() { close(ready) }) // the last callback releases the wait
	}()
	if err := l.Wait(context.Background(), ready); err != nil {
		t.Fatal(err)
	}
	if len(ran) != 50 {
		t.Errorf("%d callbacks ran during the wait, want 50", len(ran))
	}
}

func TestLoopPostNeverBlocks(t *testing.T) {
	t.Parallel()
	l := NewLoop()
	done := make(chan struct{})
	go func() {
		for range 10000 {
			l.Post(func() {})
		}
		close(done)
	}()
	select {
	case <-done:
	case <-time.After(5 * time.Second):
		t.Fatal("Post blocked while nobody waited")
	}
}

func TestLoopWaitEndsWithContext(t *testing.T) {
	t.Parallel()
	l := NewLoop()
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Millisecond)
	defer cancel()
	if err := l.Wait(ctx, nil); !errors.Is(err, context.DeadlineExceeded) {
		t.Errorf("Wait = %v, want the context's error", err)
	}
}

func TestLoopRunsWhatWasPostedBeforeReady(t *testing.T) {
	t.Parallel()
	l := NewLoop()
	ran := false
	l.Post(func() { ran = true })
	ready := make(chan struct{})
	close(ready)
	if err := l.Wait(context.Background(), ready); err != nil {
		t.Fatal(err)
	}
	if !ran {
		t.Error("a callback posted before ready was left queued")
	}
}

// A callback that waits only waits: what is posted meanwhile runs after it,
// so callbacks (recipe policies) never interleave.
func TestLoopCallbacksDoNotNest(t *testing.T) {
	t.Parallel()
	l := NewLoop()
	var order []string
	ready := make(chan struct{})
	l.Post(func() {
		order = append(order, "first begins")
		inner := make(chan struct{})
		l.Post(func() { order = append(order, "second") })
		go func() {
			time.Sleep(20 * time.Millisecond)
			close(inner)
		}()
		if err := l.Wait(context.Background(), inner); err != nil {
			t.Error(err)
		}
		order = append(order, "first ends")
		l.Post(func() { close(ready) })
	})
	if err := l.Wait(context.Background(), ready); err != nil {
		t.Fatal(err)
	}
	if got := strings.Join(order, ", "); got != "first begins, first ends, second" {
		t.Errorf("callbacks ran as: %s", got)
	}
}
