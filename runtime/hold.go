package runtime

import (
	"sync/atomic"
	"time"

	"github.com/seed5ad92d46/sous/runtime/event"
)

// A process started by spawn runs beside the recipe, which goes on at
// once, often to spawn the next. The human output holds such a process's
// echo (event.EchoStart.Held) until the recipe settles: its next builtin
// call that is not spawn, its end, or the time limits below. Then the bus
// publishes event.Settle and whether the held lines carry "[id] " is
// decided for all of them at once (event.State), so processes spawned
// together are prefixed together, whichever printed first.
//
// The limits count the recipe's own time, not the spawns': a spawn is a
// fork and an exec on the daemon, a call to it, some milliseconds, far
// more on a loaded machine, where counting them let the limit settle
// between two spawns of one statement.
const (
	// HoldLimit is the longest the recipe may compute after a spawn
	// returned, calling no builtin, before the held lines go out.
	HoldLimit = 100 * time.Millisecond
	// MaxHold bounds a hold whatever the recipe does: a loop that does
	// nothing but spawn, for long, still shows its processes' lines.
	MaxHold = time.Second
)

// hold is the output's side of the hold: its time limit. The fields but
// holding are guarded by the bus's lock.
type hold struct {
	// holding is set while a hold is open (event.State.Holding): Settle,
	// called before every builtin call, reads it without the lock.
	holding  atomic.Bool
	began    time.Time   // when the open hold began
	spawning bool        // a spawn call runs: HoldLimit waits for its end
	timer    *time.Timer // the limit
	armed    uint64      // counts the arms, so a stale timer does nothing
}

// EchoBeside implements Output: the echo of a process that runs beside
// the recipe, held until the recipe settles.
func (o *output) EchoBeside(id string) Echo {
	e := &echo{bus: o.bus, id: id}
	e.ev.ID = id
	o.bus.Lock()
	defer o.bus.Unlock()
	if !o.bus.State().Holding {
		o.hold.began = time.Now()
	}
	o.bus.PublishLocked(&event.EchoStart{ID: id, Held: true})
	o.hold.holding.Store(true)
	o.armLocked()
	return e
}

// Settle implements Output. Without a hold open it costs one atomic load:
// it runs before every builtin call.
func (o *output) Settle() {
	if !o.hold.holding.Load() {
		return
	}
	o.bus.Lock()
	defer o.bus.Unlock()
	o.settleLocked()
}

// SpawnStarts implements Output: while the spawn runs, only MaxHold
// limits the hold.
func (o *output) SpawnStarts() {
	o.bus.Lock()
	defer o.bus.Unlock()
	o.hold.spawning = true
	o.armLocked()
}

// SpawnEnds implements Output: the recipe computes again, so the limit
// of an open hold runs again, from now.
func (o *output) SpawnEnds() {
	o.bus.Lock()
	defer o.bus.Unlock()
	o.hold.spawning = false
	o.armLocked()
}

// settleLocked publishes a Settle if a hold is open (lock held). The bus
// also settles on its own (before End, past event.MaxHeld): then there is
// nothing left to do here.
func (o *output) settleLocked() {
	if o.bus.State().Holding {
		o.bus.PublishLocked(&event.Settle{})
	}
	o.hold.holding.Store(false)
	o.stopLocked()
}

// armLocked starts the open hold's limit: HoldLimit from now (not while
// a spawn runs), at most MaxHold from its beginning. Past MaxHold it
// settles at once.
func (o *output) armLocked() {
	if !o.bus.State().Holding {
		return
	}
	d := time.Until(o.hold.began.Add(MaxHold))
	if !o.hold.spawning {
		d = min(d, HoldLimit)
	}
	if d <= 0 {
		o.settleLocked()
		return
	}
	o.stopLocked()
	armed := o.hold.armed
	o.hold.timer = time.AfterFunc(d, func() {
		o.bus.Lock()
		defer o.bus.Unlock()
		if o.hold.armed == armed {
			o.settleLocked()
		}
	})
}

// stopLocked stops the limit's timer; one that fired already and waits for
// the lock finds itself stale.
func (o *output) stopLocked() {
	o.hold.armed++
	if o.hold.timer != nil {
		o.hold.timer.Stop()
		o.hold.timer = nil
	}
}
