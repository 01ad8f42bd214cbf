package runtime

import (
	"context"
	"sync"
)

// Loop is a run's event loop. Starlark runs on one goroutine, the recipe
// thread; work that must happen on it (an agent's permission callback
// calling a recipe policy) is posted from other goroutines and runs
// whenever the recipe thread waits, which every blocking builtin does
// through Wait. Nothing posted ever waits for the recipe thread to reach a
// wait: Post never blocks, so a frame reader goroutine can post safely.
//
// Callbacks run one at a time, never nested: a callback that waits (a
// policy that runs a command, sleeps or prompts) only waits, and the
// callbacks posted meanwhile run after it returns. So a recipe's policy
// never sees another policy start halfway through it, and its state is
// never half-updated when the next one reads it.
type Loop struct {
	mu    sync.Mutex
	queue []func()
	wake  chan struct{} // holds a signal while queue is non-empty
	// inCallback is set while a callback runs. Only the recipe thread
	// touches it: Wait is only called there.
	inCallback bool
}

// NewLoop returns an empty loop.
func NewLoop() *Loop {
	return &Loop{wake: make(chan struct{}, 1)}
}

// Post queues f to run on the recipe thread during its next wait. It is
// safe from any goroutine and never blocks.
func (l *Loop) Post(f func()) {
	l.mu.Lock()
	l.queue = append(l.queue, f)
	l.mu.Unlock()
	select {
	case l.wake <- struct{}{}:
	default: // a signal is pending already
	}
}

// Wait runs posted callbacks on the calling goroutine (the recipe thread)
// until a receive from ready succeeds, or returns ctx's error when ctx ends
// first. A nil ready waits for ctx alone. Callbacks posted before ready
// delivered run before Wait returns.
func (l *Loop) Wait(ctx context.Context, ready <-chan struct{}) error {
	if l.inCallback {
		select {
		case <-ready:
			return nil
		case <-ctx.Done():
			return ctx.Err()
		}
	}
	for {
		l.runQueued()
		select {
		case <-ready:
			l.runQueued() // what was posted before ready delivered comes first
			return nil
		case <-ctx.Done():
			return ctx.Err()
		case <-l.wake:
			// Something was posted: run it and look again.
		}
	}
}

func (l *Loop) runQueued() {
	for {
		l.mu.Lock()
		q := l.queue
		l.queue = nil
		l.mu.Unlock()
		if len(q) == 0 {
			return
		}
		for _, f := range q {
			l.inCallback = true
			f()
			l.inCallback = false
		}
	}
}
