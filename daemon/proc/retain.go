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

const (
	defaultRetainExited = 1000
	defaultRetainFor    = time.Hour
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

// prune forgets the exited processes beyond the retention limits.
func (r *Registry) prune(now time.Time) {
	type gone struct {
		p  *Process
		at time.Time
	}
	r.mu.Lock()
	var exited []gone
	for _, p := range r.procs {
		if at, ok := p.exitTime(); ok {
			exited = append(exited, gone{p, at})
		}
	}
	sort.Slice(exited, func(i, j int) bool { return exited[i].at.Before(exited[j].at) })
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
