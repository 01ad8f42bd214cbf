package agent

import "sync"

// queue is an unbounded FIFO with a wake-up channel. Producers never block:
// the client's frame handler and the WebSocket reader must return quickly,
// whatever the consumer is doing. What is queued is bounded by what the CLI
// sends in one turn, which the session holds anyway as the turn's messages.
type queue[T any] struct {
	mu     sync.Mutex
	items  []T
	closed bool
	wake   chan struct{}
}

func newQueue[T any]() *queue[T] { return &queue[T]{wake: make(chan struct{}, 1)} }

func (q *queue[T]) push(v T) bool {
	q.mu.Lock()
	if q.closed {
		q.mu.Unlock()
		return false
	}
	q.items = append(q.items, v)
	q.mu.Unlock()
	select {
	case q.wake <- struct{}{}:
	default:
	}
	return true
}

// close makes pop return ok=false once the queued items are drained.
func (q *queue[T]) close() {
	q.mu.Lock()
	q.closed = true
	q.mu.Unlock()
	select {
	case q.wake <- struct{}{}:
	default:
	}
}

// pop blocks until an item is available or the queue is closed and empty.
func (q *queue[T]) pop() (T, bool) {
	for {
		q.mu.Lock()
		if len(q.items) > 0 {
			v := q.items[0]
			var zero T
			q.items[0] = zero
			q.items = q.items[1:]
			if len(q.items) == 0 {
				q.items = nil // let a burst's backing array go
			}
			q.mu.Unlock()
			return v, true
		}
		if q.closed {
			q.mu.Unlock()
			var zero T
			return zero, false
		}
		q.mu.Unlock()
		<-q.wake
	}
}
