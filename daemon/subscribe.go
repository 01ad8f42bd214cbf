package daemon

import (
	"errors"
	"sync"
	"sync/atomic"

	"github.com/seed5ad92d46/sous/daemon/proc"
	"github.com/seed5ad92d46/sous/daemon/streamlog"
	"github.com/seed5ad92d46/sous/daemon/wire"
)

// batchBytes is about how much output one write to a subscriber carries:
// large enough to coalesce small frames into one syscall, small enough to
// keep a subscriber's latency low.
const batchBytes = 256 << 10

// subscription delivers one process's frames to one session.
type subscription struct {
	proc       *proc.Process
	cur        *streamlog.Cursor
	notifyGone bool          // the client asked for a Gone notification (process.gone)
	done       chan struct{} // closed once nothing more is delivered for it

	// For an InlineSink, whoever changes the log delivers (see kick).
	deliverMu sync.Mutex
	pending   atomic.Bool  // a change not yet looked at by a deliverer
	ended     bool         // under deliverMu: endSubscription ran
	frames    []wire.Frame // under deliverMu: the batch buffer, reused
	quoted    []byte
}

// InlineSink is a FrameSink that may be delivered to on whichever goroutine
// changes a process's log (the one reading the child's output), instead of
// on a goroutine of the subscription's own. It suits a sink that writes
// where it is (the in-process client): without a hand-over between two
// goroutines per batch, output streams about a quarter faster. A sink that
// blocks then holds up the reading of the child's pipe at once, rather
// than after the log's memory window: the push-back of a plain pipe.
type InlineSink interface {
	FrameSink
	DeliverInline() bool
}

// follow subscribes the session to p from fromSeq (exclusive), replacing any
// earlier subscription of this session to the same id. With replay, the
// frames retained up to now are delivered before follow returns (reattach
// replays, then answers); the rest flows from a background pump.
func (se *Session) follow(p *proc.Process, fromSeq int64, replayUpTo int64, notifyGone bool) error {
	// The subscription being replaced may be in the middle of a write: wait
	// for it, or its frames would interleave with (and repeat) the replay.
	se.unfollow(p.ID)
	return se.followCursor(p, p.Log.NewCursor(fromSeq), replayUpTo, notifyGone)
}

// followCursor subscribes the session to p through cur, which it owns from
// now on: see follow.
func (se *Session) followCursor(p *proc.Process, cur *streamlog.Cursor, replayUpTo int64, notifyGone bool) error {
	se.mu.Lock()
	if se.closed {
		se.mu.Unlock()
		cur.Close()
		return nil
	}
	old := se.subs[p.ID] // a concurrent follow of the same id won
	sub := &subscription{proc: p, cur: cur, notifyGone: notifyGone, done: make(chan struct{})}
	se.subs[p.ID] = sub
	se.pumps.Add(1)
	se.mu.Unlock()
	if old != nil {
		// Outside se.mu: for an InlineSink, closing the cursor ends the
		// subscription right here, and that takes se.mu.
		old.cur.Close()
	}

	quoted := wire.QuoteID(p.ID)
	var frames []wire.Frame
	for sub.cur.Pos() <= replayUpTo {
		var err error
		frames, err = sub.cur.Next(se.ctx, frames[:0], batchBytes)
		if len(frames) > 0 {
			if werr := se.sink.SendFrames(p.ID, quoted, frames); werr != nil {
				se.endSubscription(sub)
				return werr
			}
		}
		if err != nil {
			se.sayGone(sub, quoted, err)
			se.endSubscription(sub)
			return nil
		}
	}
	if is, ok := se.sink.(InlineSink); ok && is.DeliverInline() {
		sub.frames, sub.quoted = frames[:0], quoted
		sub.cur.Watch(func() { se.kick(sub) })
		se.kick(sub) // what came in between the replay and Watch
		return nil
	}
	go se.pump(sub, quoted, frames[:0])
	return nil
}

// kick delivers what the log has for sub, unless another goroutine is
// doing that already; that one then looks again before it leaves, so no
// change goes unseen. Frames stay in seq order: there is one deliverer at a
// time, and it takes them from the cursor.
func (se *Session) kick(sub *subscription) {
	sub.pending.Store(true)
	for sub.pending.Load() && sub.deliverMu.TryLock() {
		sub.pending.Store(false)
		if !sub.ended {
			se.deliver(sub)
		}
		sub.deliverMu.Unlock()
	}
}

// deliver sends sub everything its cursor has ready. Called with
// sub.deliverMu held.
func (se *Session) deliver(sub *subscription) {
	for {
		frames, err := sub.cur.Poll(sub.frames[:0], batchBytes)
		if len(frames) > 0 {
			if werr := se.sink.SendFrames(sub.proc.ID, sub.quoted, frames); werr != nil {
				err = werr
			}
		}
		clear(frames) // let the frames' data go before waiting for more
		sub.frames = frames[:0]
		switch {
		case errors.Is(err, streamlog.ErrNothingNew):
			return
		case err != nil:
			se.sayGone(sub, sub.quoted, err)
			sub.ended = true
			se.endSubscription(sub)
			return
		}
	}
}

func (se *Session) pump(sub *subscription, quoted []byte, frames []wire.Frame) {
	defer se.endSubscription(sub)
	for {
		var err error
		frames, err = sub.cur.Next(se.ctx, frames[:0], batchBytes)
		if len(frames) > 0 {
			if werr := se.sink.SendFrames(sub.proc.ID, quoted, frames); werr != nil {
				return
			}
		}
		if err != nil {
			// The exit frame was delivered, or the session or log closed.
			se.sayGone(sub, quoted, err)
			return
		}
		// Let the frames' data go before blocking for more.
		clear(frames)
	}
}

// sayGone tells a client that asked for it (process.gone) that its
// subscription ended without the exit frame because the daemon discarded
// the process: a spawn reused the id, or retention forgot it. Without it,
// the client would wait for an exit that can no longer come.
func (se *Session) sayGone(sub *subscription, quoted []byte, err error) {
	if !sub.notifyGone || !errors.Is(err, streamlog.ErrClosed) || !sub.proc.Log.Closed() {
		return
	}
	reason := wire.GoneForgotten
	if now := se.s.reg.Get(sub.proc.ID); now != nil && now != sub.proc {
		reason = wire.GoneReplaced
	}
	_ = se.sink.SendGone(quoted, wire.Gone{ID: sub.proc.ID, Pid: sub.proc.Pid, StartTime: sub.proc.StartTime, Reason: reason})
}

// endSubscription runs on the goroutine that delivered the subscription's
// frames, once it delivers no more: the last batch's buffers go back to the
// log for reuse.
func (se *Session) endSubscription(sub *subscription) {
	sub.cur.Close()
	sub.cur.Release()
	se.mu.Lock()
	if se.subs != nil && se.subs[sub.proc.ID] == sub {
		delete(se.subs, sub.proc.ID)
	}
	se.mu.Unlock()
	close(sub.done)
	se.pumps.Done()
}

// unfollow ends the session's subscription to id, if any, and returns once
// its last frame has been handed to the sink.
func (se *Session) unfollow(id string) {
	se.mu.Lock()
	sub := se.subs[id]
	se.mu.Unlock()
	if sub == nil {
		return
	}
	sub.cur.Close()
	<-sub.done
}

// idle reports whether the session follows no process: nothing is written
// to it then but responses.
func (se *Session) idle() bool {
	se.mu.Lock()
	defer se.mu.Unlock()
	return len(se.subs) == 0
}
