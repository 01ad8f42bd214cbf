package proc

import (
	"time"
)

// Retention of exited processes. An exited process stays in the registry so
// that clients can reattach and replay its output, but a long-lived daemon
// that runs thousands of short commands must not keep every one of them:
// beyond Options.RetainExited exited processes, or once one exited more than
// Options.RetainFor ago, it is forgotten (its replay log and spill files
// freed; a reattach then reports found:false).

//
// The disk is bounded too: every process's spilled replay is capped on its
// own (streamlog.Options.DiskLimit), and all of them together by
// Options.ReplayDiskTotal. Past the total, the processes that exited
// longest ago lose the oldest of their spilled replay first, a segment at a
// time as the room is needed (what remains in memory stays; reattach
// reports the new firstSeq), so that retaining many exited processes never
// fills the disk. The dropped segments' files go to the logs' Spares, for
// the spilling stream's next segments to write over.
//
// So is memory: a process keeps up to its log's memory window after it
// exits, and a thousand retained processes with a 4 MiB window each would
// hold 4 GiB. Past Options.ReplayMemTotal across the exited, those that
// exited longest ago shed theirs: to disk where the daemon spills (replay
// stays exact), else dropped but for the exit frame.

const (
	defaultRetainExited    = 1000
	defaultRetainFor       = time.Hour
	defaultReplayDiskTotal = 4 << 30
	defaultReplayMemTotal  = 64 << 20
)

// exited records when the process's exit frame went in.
func (p *Process) markExited(now time.Time) {
	p.mu.Lock()
	p.exitedAt = now
	p.mu.Unlock()
}

func (p *Process) exitTime() (time.Time, bool) {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.exitedAt, !p.exitedAt.IsZero()
}

// exitedProc is an entry of the registry's exit queue.
type exitedProc struct {
	p  *Process
	at time.Time
}

// queueExited appends p to the exit queue, which keeps exited processes in
// exit order so that pruning takes the oldest without sorting them all on
// every exit (with a thousand retained, the sort was a quarter of the cost
// of spawning a short process).
func (r *Registry) queueExited(p *Process, at time.Time) {
	mem := p.Log.Stats().MemBytes // fixed from here on: nothing appends after the exit frame
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.procs[p.ID] != p {
		return // replaced before it finished exiting: already forgotten
	}
	p.queued = true
	p.retainedMem = mem
	r.exitedMem += mem
	r.exited = append(r.exited, exitedProc{p, at})
	r.nexited++
	r.scheduleExpiry()
}

// scheduleExpiry sets a timer for when the oldest retained exited process
// outlives RetainFor, unless one is set: prune runs on every exit, but a
// daemon that goes quiet must still forget what it no longer retains.
// Called with r.mu held.
func (r *Registry) scheduleExpiry() {
	if r.expiry != nil || r.noExpiry {
		return
	}
	for _, e := range r.exited {
		if !e.p.queued {
			continue
		}
		r.expiry = time.AfterFunc(time.Until(e.at.Add(r.opt.RetainFor))+time.Millisecond, func() {
			r.prune(time.Now())
			r.mu.Lock()
			r.expiry = nil
			r.scheduleExpiry()
			r.mu.Unlock()
		})
		return
	}
}

// dequeue forgets p's place in the exit queue, if it has one (it is being
// replaced or forgotten). Called with r.mu held.
func (r *Registry) dequeue(p *Process) {
	if p.queued {
		p.queued = false
		r.nexited--
		r.exitedMem -= p.retainedMem
		p.retainedMem = 0
	}
}

// exitedOldestFirst lists the retained exited processes in exit order.
// Called with r.mu held.
func (r *Registry) exitedOldestFirst() []exitedProc {
	out := make([]exitedProc, 0, r.nexited)
	for _, e := range r.exited {
		if e.p.queued {
			out = append(out, e)
		}
	}
	return out
}

// spilledChanged is every log's streamlog.Options.OnDisk. It runs under that
// log's lock, so the reclaiming (which locks other logs) goes elsewhere.
func (r *Registry) spilledChanged(delta int64) {
	if n := r.spilled.Add(delta); n > r.opt.ReplayDiskTotal && n > r.reclaimFloor.Load() {
		r.startReclaim()
	}
}

func (r *Registry) startReclaim() {
	if r.reclaiming.CompareAndSwap(false, true) {
		go r.reclaimSpill()
	}
}

// reclaimRetry is how much more running processes must spill, after a
// reclaim found nothing more to drop, before the next one is tried (a
// process exiting retries at once).
const reclaimRetry = 64 << 20

// reclaimSpill drops the spilled replay of exited processes, longest exited
// first, until the total is within Options.ReplayDiskTotal. Running
// processes keep theirs: each is bounded by its own limit, and what they
// write is what someone may be waiting to replay.
func (r *Registry) reclaimSpill() {
	defer r.reclaiming.Store(false)
	r.mu.Lock()
	exited := r.exitedOldestFirst()
	r.mu.Unlock()
	for _, e := range exited {
		if r.spilled.Load() <= r.opt.ReplayDiskTotal {
			return
		}
		if freed := e.p.Log.DropSpill(r.spilled.Load() - r.opt.ReplayDiskTotal); freed > 0 {
			r.opt.Logger.Info("dropped the spilled replay of an exited process to stay within the replay disk total",
				"id", e.p.ID, "bytes", freed, "firstSeq", e.p.Log.Stats().FirstSeq)
		}
	}
	// Still over: the running processes hold the rest.
	r.reclaimFloor.Store(r.spilled.Load() + reclaimRetry)
}

// prune forgets the exited processes beyond the retention limits, and
// reclaims spilled replay if a running process left the disk over its total.
func (r *Registry) prune(now time.Time) {
	if r.spilled.Load() > r.opt.ReplayDiskTotal {
		r.reclaimFloor.Store(0)
		r.startReclaim()
	}
	r.mu.Lock()
	var forget []*Process
	for len(r.exited) > 0 {
		e := r.exited[0]
		if e.p.queued {
			tooMany := r.nexited > r.opt.RetainExited
			tooOld := now.Sub(e.at) > r.opt.RetainFor
			if !tooMany && !tooOld {
				break // oldest first: the rest are newer and within the count
			}
			r.dequeue(e.p)
			delete(r.procs, e.p.ID)
			forget = append(forget, e.p)
		}
		// Forgotten now, or earlier (replaced): either way off the queue.
		r.exited[0] = exitedProc{}
		r.exited = r.exited[1:]
	}
	if len(r.exited) == 0 {
		r.exited = nil // let the backing array go
	}
	over := r.exitedMem > r.opt.ReplayMemTotal
	r.mu.Unlock()
	for _, p := range forget {
		p.Log.Close()
		r.opt.Logger.Debug("forgot exited process", "id", p.ID)
	}
	if over {
		r.shedMemory()
	}
}

// minShed is the replay memory below which an exited process is not worth
// shedding: its exit frame, or a few lines. Once the total is over, every
// exit walks the exited oldest first, and those shed before are passed over.
const minShed = 4 << 10

// shedMemory sheds the replay memory of exited processes, longest exited
// first, until the exited together are within Options.ReplayMemTotal.
func (r *Registry) shedMemory() {
	r.mu.Lock()
	exited := r.exitedOldestFirst()
	r.mu.Unlock()
	for _, e := range exited {
		r.mu.Lock()
		done := r.exitedMem <= r.opt.ReplayMemTotal
		little := e.p.retainedMem <= minShed
		r.mu.Unlock()
		if done {
			return
		}
		if little {
			continue // shed already, or never held much: nothing worth a Shed
		}
		freed := e.p.Log.Shed()
		r.mu.Lock()
		if e.p.queued { // not forgotten meanwhile
			freed = min(freed, e.p.retainedMem)
			e.p.retainedMem -= freed
			r.exitedMem -= freed
		}
		r.mu.Unlock()
		if freed > 0 {
			r.opt.Logger.Debug("moved the replay memory of an exited process out", "id", e.p.ID, "bytes", freed, "firstSeq", e.p.Log.Stats().FirstSeq)
		}
	}
}
