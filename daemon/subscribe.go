package daemon

import (
	"errors"
	"time"

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
	ownsMirror bool          // the session spawned it with a mirror: it alone sees Frame.Mirrored
	done       chan struct{} // closed once nothing more is delivered for it

	// Used by whoever delivers (sendNext): the replay, then the pump or,
	// for an InlineSink, the one goroutine at a time that the cursor runs
	// its Watch function on (see deliver).
	quoted []byte       // the id as a JSON string
	frames []wire.Frame // the batch buffer, reused
	ended  bool         // endSubscription ran
	pace   bool         // the last batch was a stream's mirrored seqs: see pump
	// pumping: a subscription delivered inline to a socket
	// (deliverTrying) handed the rest to its pump.
	pumping bool
}

// InlineSink is a FrameSink that may be delivered to on whichever goroutine
// changes a process's log (the one reading the child's output), instead of
// on a goroutine of the subscription's own. It suits a sink that writes
// where it is (the in-process client): without a hand-over between two
// goroutines per batch, a GiB of output cost about a fifth less CPU when
// measured (perf stat of head | sous exec | cat: 2.1 s of task-clock
// against 1.65 s). A sink that blocks then holds up
// the reading of the child's pipe at once, rather than after the log's
// memory window: the push-back of a plain pipe.
type InlineSink interface {
	FrameSink
	DeliverInline() bool
}

// follow subscribes the session to p from fromSeq (exclusive), replacing any
// earlier subscription of this session to the same id. With replay, the
// frames retained up to now are delivered before follow returns (reattach
// replays, then answers); the rest flows from a background pump or, for an
// InlineSink, from the goroutines that append them. ownsMirror keeps the
// Mirrored marks for this session (see followCursor).
func (se *Session) follow(p *proc.Process, fromSeq int64, replayUpTo int64, notifyGone, ownsMirror bool) error {
	// The subscription being replaced may be in the middle of a write: wait
	// for it, or its frames would interleave with (and repeat) the replay.
	se.unfollow(p.ID)
	return se.followCursor(p, p.Log.NewCursor(fromSeq), replayUpTo, notifyGone, ownsMirror)
}

// followCursor subscribes the session to p through cur, which it owns from
// now on: see follow. ownsMirror says the session spawned p with a mirror.
func (se *Session) followCursor(p *proc.Process, cur *streamlog.Cursor, replayUpTo int64, notifyGone, ownsMirror bool) error {
	se.mu.Lock()
	if se.closed {
		se.mu.Unlock()
		cur.Close()
		return nil
	}
	old := se.subs[p.ID] // a concurrent follow of the same id won
	if ownsMirror {
		cur.SkipMirroredData() // what it sends of them has none
	}
	sub := &subscription{proc: p, cur: cur, notifyGone: notifyGone, ownsMirror: ownsMirror, done: make(chan struct{})}
	se.subs[p.ID] = sub
	se.pumps.Add(1)
	se.mu.Unlock()
	if old != nil {
		// Outside se.mu: for an InlineSink, closing the cursor ends the
		// subscription right here, and that takes se.mu.
		old.cur.Close()
	}

	sub.quoted = wire.QuoteID(p.ID)
	for sub.cur.Pos() <= replayUpTo {
		if ended, err := se.sendNext(sub, true); ended {
			return err
		}
	}
	if is, ok := se.sink.(InlineSink); ok && is.DeliverInline() {
		// What came in between the replay and Watch, if anything, is
		// delivered on a goroutine of its own: here, on the caller's, a
		// child writing faster than the sink takes it would hold the
		// spawn's or the reattach's answer until it stopped writing (the
		// appenders find this one delivering and leave it to catch up).
		// Nothing came, most often right after a spawn: the appenders
		// deliver it all, and no goroutine is started.
		if sub.cur.Watch(func() { se.deliver(sub) }) {
			go sub.cur.Kick()
		}
		return nil
	}
	if c, ok := se.sink.(*conn); ok && !ownsMirror {
		if tw := c.inlineWriter(); tw != nil {
			// Written by the appenders while they can do it without
			// waiting (inlineframes.go); what came before Watch, here,
			// as that never waits either.
			if sub.cur.Watch(func() { se.deliverTrying(sub, c, tw) }) {
				sub.cur.Kick()
			}
			return nil
		}
	}
	se.s.stats.FramePumps.Add(1)
	go se.pump(sub)
	return nil
}

// deliverTrying is the Watch function of a subscription on a Unix socket
// (inlineframes.go): it writes what the log has for sub while each batch
// goes out without waiting, and hands the rest of the subscription to a
// pump goroutine the first time one would not.
func (se *Session) deliverTrying(sub *subscription, c *conn, tw tryWriter) {
	// pumping first: once it is set, the pump owns the rest of sub.
	for !sub.pumping && !sub.ended {
		frames, err := se.nextBatch(sub, false)
		out, rest, sendErr := sentAll, []byte(nil), error(nil)
		if len(frames) > 0 {
			out, rest, sendErr = c.trySendFrames(tw, sub.quoted, frames)
		}
		// A Gone notice is written waiting, as the pump writes it.
		gone := sendErr == nil && goneDue(sub, err)
		if out != sentAll || gone {
			if out == sentAll {
				clear(frames)
				sub.frames, frames = frames[:0], nil
			}
			sub.pumping = true
			se.s.stats.FramePumps.Add(1)
			go se.pumpAfter(sub, c, frames, err, rest)
			return
		}
		if _, err := se.afterBatch(sub, frames, err, sendErr); err != nil {
			return
		}
	}
}

// pumpAfter sends the batch deliverTrying could not (frames, or the rest of
// their bytes when it wrote them to c in part), then pumps on.
func (se *Session) pumpAfter(sub *subscription, c *conn, frames []wire.Frame, err error, rest []byte) {
	var sendErr error
	switch {
	case rest != nil:
		sendErr = c.finishPart(rest)
	case len(frames) > 0:
		sendErr = se.sink.SendFrames(sub.proc.ID, sub.quoted, frames)
	}
	if ended, _ := se.afterBatch(sub, frames, err, sendErr); ended {
		return
	}
	se.pump(sub)
}

// sendNext sends sub's next batch of frames, waiting for one when wait is
// set. It reports ended once the subscription is over: the exit frame was
// sent, the log or the session closed (a Gone notice first, when due), or
// the sink failed, whose error it returns. Without wait and with nothing
// ready, it returns streamlog.ErrNothingNew.
func (se *Session) sendNext(sub *subscription, wait bool) (ended bool, err error) {
	frames, err := se.nextBatch(sub, wait)
	var sendErr error
	if len(frames) > 0 {
		sendErr = se.sink.SendFrames(sub.proc.ID, sub.quoted, frames)
	}
	return se.afterBatch(sub, frames, err, sendErr)
}

// nextBatch takes sub's next batch of frames from its cursor, waiting for
// one when wait is set, as sendNext sends it.
func (se *Session) nextBatch(sub *subscription, wait bool) (frames []wire.Frame, err error) {
	if wait {
		frames, err = sub.cur.Next(se.ctx, sub.frames[:0], batchBytes)
	} else {
		frames, err = sub.cur.Poll(sub.frames[:0], batchBytes)
	}
	sub.pace = sub.ownsMirror && len(frames) >= paceFrames && allMirrored(frames)
	if !sub.ownsMirror {
		// The mark is the spawner's: to anyone else these are plain
		// frames, data and all. The batch holds copies of the log's.
		for i := range frames {
			frames[i].Mirrored = false
		}
	}
	return frames, err
}

// afterBatch finishes a batch taken by nextBatch, sent with sendErr (nil
// when there were no frames): it reports ended as sendNext does.
func (se *Session) afterBatch(sub *subscription, frames []wire.Frame, err, sendErr error) (ended bool, _ error) {
	clear(frames) // let the frames' data go before waiting for more
	sub.frames = frames[:0]
	switch {
	case sendErr != nil:
	case err == nil || errors.Is(err, streamlog.ErrNothingNew):
		return false, err
	default:
		se.sayGone(sub, err)
	}
	sub.ended = true
	se.endSubscription(sub)
	return true, sendErr
}

// deliver sends what the log has for sub until it has nothing new. It is
// sub's cursor's Watch function, which the cursor runs on one goroutine at
// a time and runs again for a change that came meanwhile, so frames keep
// their seq order and none is left behind.
func (se *Session) deliver(sub *subscription) {
	for !sub.ended {
		if _, err := se.sendNext(sub, false); err != nil {
			return
		}
	}
}

// pump delivers sub's frames from a goroutine of its own, for a sink that
// is not an InlineSink.
//
// While the spawner's mirror carries a stream, the frames it gets are bare
// seqs (the data went down its pipe), and it gets them paced: after a batch
// of paceFrames or more such frames, the pump waits paceFor (or for the
// exit, or until the child waits for room its unread frames hold) before
// taking the next, so one batch carries what came meanwhile.
// Taken as they came, a 1 GiB stream had the client read its socket about
// 3,000 times (strace), each read waking it: 14,000 context switches in the
// client alone (perf stat), on the CPUs the child and the pipe's reader
// need.
func (se *Session) pump(sub *subscription) {
	for {
		if ended, _ := se.sendNext(sub, true); ended {
			return
		}
		if sub.pace {
			se.pause(sub)
		}
	}
}

// pause is the pump's wait between paced batches. Where the log cannot
// spill, frames the cursor has not read hold the child back: the pause ends
// as soon as they do.
func (se *Session) pause(sub *subscription) {
	roomWanted := sub.cur.RoomWanted()
	sub.cur.Release() // the appender may need its frames' room meanwhile
	t := time.NewTimer(paceFor)
	defer t.Stop()
	select {
	case <-t.C:
	case <-roomWanted:
	case <-sub.proc.Done():
	case <-se.ctx.Done():
	}
}

const (
	// paceFrames is the batch of mirrored frames past which the pump paces
	// a spawner's frames: a child's whole output in a few reads (`echo`,
	// a short listing) comes as it is, with no delay before its exit.
	paceFrames = 4
	// paceFor is the pause between paced batches: at 1 GB/s, 60 frames.
	paceFor = 2 * time.Millisecond
)

// allMirrored reports whether every frame is a Mirrored output frame.
func allMirrored(frames []wire.Frame) bool {
	for i := range frames {
		if !frames[i].Mirrored {
			return false
		}
	}
	return true
}

// sayGone tells a client that asked for it (process.gone) that its
// subscription ended without the exit frame because the daemon discarded
// the process: a spawn reused the id, or retention forgot it. Without it,
// the client would wait for an exit that can no longer come.
func (se *Session) sayGone(sub *subscription, err error) {
	if !goneDue(sub, err) {
		return
	}
	reason := wire.GoneForgotten
	if now := se.s.reg.Get(sub.proc.ID); now != nil && now != sub.proc {
		reason = wire.GoneReplaced
	}
	_ = se.sink.SendGone(sub.quoted, wire.Gone{ID: sub.proc.ID, Pid: sub.proc.Pid, StartTime: sub.proc.StartTime, Reason: reason})
}

// goneDue reports whether sub ending with err owes its client a Gone
// notice (sayGone).
func goneDue(sub *subscription, err error) bool {
	return sub.notifyGone && errors.Is(err, streamlog.ErrClosed) && sub.proc.Log.Closed()
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
