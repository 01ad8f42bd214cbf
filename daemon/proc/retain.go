package proc

import (
	"sort"
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
// longest ago lose their spilled replay first (what remains in memory stays;
// reattach reports the new firstSeq), so that retaining many exited
// processes never fills the disk.

const (
	defaultRetainExited    = 1000
	defaultRetainFor       = time.Hour
	defaultReplayDiskTotal = 4 << 30
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

type exitedProc struct {
	p  *Process
	at time.Time
}

// exitedOldestFirst lists the exited processes by exit time. Called with
// r.mu held.
func (r *Registry) exitedOldestFirst() []exitedProc {
	var exited []exitedProc
	for _, p := range r.procs {
		if at, ok := p.exitTime(); ok {
			exited = append(exited, exitedProc{p, at})
		}
	}
	sort.Slice(exited, func(i, j int) bool { return exited[i].at.Before(exited[j].at) })
	return exited
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
		if freed := e.p.Log.DropSpill(); freed > 0 {
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
	exited := r.exitedOldestFirst()
	var forget []*Process
	for i, g := range exited {
		tooMany := len(exited)-i > r.opt.RetainExited
		tooOld := now.Sub(g.at) > r.opt.RetainFor
		if !tooMany && !tooOld {
			break // sorted oldest first: the rest are newer and within the count
		}
		delete(r.procs, g.p.ID)
		forget = append(forget, g.p)
	}
	r.mu.Unlock()
	for _, p := range forget {
		p.Log.Close()
		r.opt.Logger.Debug("forgot exited process", "id", p.ID)
	}
}
