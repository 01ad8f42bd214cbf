package proc

import (
	"context"
	"io"
	"sync"
	"time"

	"github.com/seed5ad92d46/sous/daemon/wire"
)

// stdinQueue accepts stdin data with the exactly-once offset contract and
// feeds it to the child from its own goroutine, so a child that does not read
// its stdin never blocks a request for longer than the queue's bound. That
// goroutine starts with the first data (see deferWriter): most children are
// never written to, and each would have cost a goroutine to start, park and
// wake at its exit, on the path to its exit frame, and a parked stack while
// it ran.
//
// applied is the count of bytes accepted for delivery (the contract's
// high-water mark); it advances when data is queued, not when the child reads
// it.
type stdinQueue struct {
	mu      sync.Mutex
	notify  chan struct{}
	chunks  [][]byte
	queued  int   // bytes in chunks
	applied int64 // high-water mark
	closing bool  // close the pipe once chunks drain
	dead    bool  // the writer has stopped (child gone or pipe closed)
	foreign bool  // the child's stdin was passed by its spawner (mirror.Spec.Stdin): nothing to write to
	limit   int
	w       io.WriteCloser // the pipe, once run has started

	// startWriter starts run on the pipe; letGo closes the pipe instead,
	// when the writer never started. Both are nil once either has run.
	startWriter, letGo func()

	// recycle, when set, takes back each chunk once it is written or
	// dropped (Registry.putStdinBuf): the buffers the requests were decoded
	// into go round instead of being garbage. With them fresh per request,
	// BenchmarkStdin's daemon took 2.1 s of CPU per GiB against 1.4 s
	// (medians of 6 alternated runs, pooled request lines in both).
	recycle func([]byte)
	// grow, when set, enlarges the pipe before the first chunk bigger than
	// a default pipe is written, and reports whether it did; shrink gives
	// the budget back when the writer stops. A 64 KiB pipe takes a 512 KiB
	// request in up to eight turns of the writer sleeping until the child
	// reads.
	grow   func() bool
	shrink func()
}

const defaultStdinQueueLimit = 8 << 20

// MsgStdinClosed is the -32602 message for data sent after stdin was closed
// (the process.stdin.close extension).
const MsgStdinClosed = "Process stdin closed"

// MsgStdinPassed is the -32602 message for data sent to a process whose
// stdin its spawner passed (mirror.Spec.Stdin).
const MsgStdinPassed = "Process stdin is a descriptor its spawner passed: it cannot be written to"

func newStdinQueue(limit int) *stdinQueue {
	if limit <= 0 {
		limit = defaultStdinQueueLimit
	}
	return &stdinQueue{notify: make(chan struct{}), limit: limit}
}

// deferWriter arranges for start to begin feeding the pipe once there is
// data to write, and for letGo to close it if that never happens (stdin
// closed with nothing queued, or the writer stopped).
func (q *stdinQueue) deferWriter(start, letGo func()) {
	q.mu.Lock()
	defer q.mu.Unlock()
	q.startWriter, q.letGo = start, letGo
}

// wakeWriter starts the writer if it has not started. Called with mu held.
func (q *stdinQueue) wakeWriter() {
	if start := q.startWriter; start != nil {
		q.startWriter, q.letGo = nil, nil
		start()
	}
}

// closeIdle closes the pipe of a writer that never started. Called with mu
// held.
func (q *stdinQueue) closeIdle() {
	if letGo := q.letGo; letGo != nil {
		q.startWriter, q.letGo = nil, nil
		q.dead = true
		letGo()
	}
}

func (q *stdinQueue) broadcast() {
	close(q.notify)
	q.notify = make(chan struct{})
}

// Offer applies the offset rules of process.stdin to data and queues the fresh
// part. offset nil means append. It returns the high-water mark after the call
// and whether the data was a duplicate.
func (q *stdinQueue) Offer(ctx context.Context, data []byte, offset *int64) (applied int64, duplicate bool, err error) {
	q.mu.Lock()
	defer q.mu.Unlock()
	if offset != nil {
		off := *offset
		switch {
		case off > q.applied:
			return q.applied, false, &wire.Error{Code: wire.CodeStdinGap, Message: wire.MsgStdinGap}
		case off+int64(len(data)) <= q.applied && (len(data) > 0 || off < q.applied):
			return q.applied, true, nil
		case off < q.applied:
			data = data[q.applied-off:]
		}
	}
	if len(data) == 0 {
		return q.applied, false, nil
	}
	if q.foreign {
		return q.applied, false, wire.InvalidParams(MsgStdinPassed)
	}
	if q.closing {
		// Fresh data after process.stdin {"close":true} could never reach
		// the child: refuse it rather than count it as applied.
		return q.applied, false, wire.InvalidParams(MsgStdinClosed)
	}
	// Wait for room; the mutex is released while waiting so the writer drains.
	for q.queued > 0 && q.queued+len(data) > q.limit && !q.dead {
		wait := q.notify
		q.mu.Unlock()
		select {
		case <-wait:
		case <-ctx.Done():
			q.mu.Lock()
			return q.applied, false, ctx.Err()
		}
		q.mu.Lock()
	}
	q.applied += int64(len(data))
	if !q.dead {
		// The caller's buffer is ours: it was decoded for this request.
		q.chunks = append(q.chunks, data)
		q.queued += len(data)
		q.wakeWriter()
		q.broadcast()
	}
	return q.applied, false, nil
}

// passed marks the child's stdin as its spawner's (mirror.Spec.Stdin): there is
// no pipe to write, and data offered is refused. Closing it is a no-op.
func (q *stdinQueue) passed() {
	q.mu.Lock()
	defer q.mu.Unlock()
	q.foreign, q.dead = true, true
}

// closedAtSpawn marks the child's stdin closed before anything was offered
// (Spec.StdinClosed): the spawn closed the pipe itself, and no writer ever
// starts. Offer and Close then answer as after Close.
func (q *stdinQueue) closedAtSpawn() {
	q.mu.Lock()
	defer q.mu.Unlock()
	q.closing, q.dead = true, true
}

// Close asks for the child's stdin to be closed once queued data is written.
func (q *stdinQueue) Close() {
	q.mu.Lock()
	defer q.mu.Unlock()
	q.closing = true
	if len(q.chunks) == 0 {
		q.closeIdle() // nothing to write: the child sees EOF now
	}
	q.broadcast()
}

// Applied is the high-water mark.
func (q *stdinQueue) Applied() int64 {
	q.mu.Lock()
	defer q.mu.Unlock()
	return q.applied
}

// stop makes the writer exit and drops what is queued (the child is gone).
// A write blocked on a full pipe is interrupted too: a descendant that
// inherited the pipe and never reads it would otherwise hold the writer (and
// the registry's shutdown) forever.
func (q *stdinQueue) stop() {
	q.mu.Lock()
	defer q.mu.Unlock()
	q.dead = true
	q.drop()
	q.closeIdle()
	if d, ok := q.w.(interface{ SetWriteDeadline(time.Time) error }); ok {
		d.SetWriteDeadline(time.Now())
	}
	q.broadcast()
}

// drop forgets the queued chunks. Called with mu held.
func (q *stdinQueue) drop() {
	for _, c := range q.chunks {
		q.give(c)
	}
	q.chunks, q.queued = nil, 0
}

// give hands a chunk nobody uses any more to recycle.
func (q *stdinQueue) give(chunk []byte) {
	if q.recycle != nil {
		q.recycle(chunk)
	}
}

// defaultPipeSize is a pipe's capacity unless grown (Linux: 16 pages).
const defaultPipeSize = 64 << 10

// run writes queued chunks to w until the queue is closed or stopped, then
// closes w.
func (q *stdinQueue) run(w io.WriteCloser) {
	defer w.Close()
	q.mu.Lock()
	q.w = w
	q.mu.Unlock()
	grown := false
	defer func() {
		if grown {
			q.shrink()
		}
	}()
	for {
		q.mu.Lock()
		for len(q.chunks) == 0 && !q.closing && !q.dead {
			wait := q.notify
			q.mu.Unlock()
			<-wait
			q.mu.Lock()
		}
		if q.dead || len(q.chunks) == 0 { // dead, or closing with nothing left
			q.dead = true
			q.mu.Unlock()
			return
		}
		chunk := q.chunks[0]
		q.chunks[0] = nil
		q.chunks = q.chunks[1:]
		q.mu.Unlock()

		if !grown && q.grow != nil && len(chunk) > defaultPipeSize {
			grown = q.grow()
		}
		_, err := w.Write(chunk)
		q.give(chunk)

		q.mu.Lock()
		q.queued -= len(chunk)
		if err != nil {
			// The child closed its stdin or died. Data already accepted stays
			// counted as applied: it was accepted, the reader went away.
			q.dead = true
			q.drop()
			q.broadcast()
			q.mu.Unlock()
			return
		}
		q.broadcast()
		q.mu.Unlock()
	}
}
