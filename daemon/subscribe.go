package daemon

import (
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
	proc *proc.Process
	cur  *streamlog.Cursor
}

// follow subscribes the session to p from fromSeq (exclusive), replacing any
// earlier subscription of this session to the same id. With replay, the
// frames retained up to now are delivered before follow returns (reattach
// replays, then answers); the rest flows from a background pump.
func (se *Session) follow(p *proc.Process, fromSeq int64, replayUpTo int64) error {
	se.mu.Lock()
	if se.closed {
		se.mu.Unlock()
		return nil
	}
	if old := se.subs[p.ID]; old != nil {
		old.cur.Close()
	}
	sub := &subscription{proc: p, cur: p.Log.NewCursor(fromSeq)}
	se.subs[p.ID] = sub
	se.pumps.Add(1)
	se.mu.Unlock()

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
			se.endSubscription(sub)
			return nil
		}
	}
	go se.pump(sub, quoted, frames[:0])
	return nil
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
			return // the exit frame was delivered, or the session or log closed
		}
		// Let the frames' data go before blocking for more.
		clear(frames)
	}
}

func (se *Session) endSubscription(sub *subscription) {
	sub.cur.Close()
	se.mu.Lock()
	if se.subs != nil && se.subs[sub.proc.ID] == sub {
		delete(se.subs, sub.proc.ID)
	}
	se.mu.Unlock()
	se.pumps.Done()
}
