package runtime

import (
	"context"
	"errors"
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
