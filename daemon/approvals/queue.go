// Package approvals is the daemon's queue of permission requests that wait
// for a person (the approval.* extension, docs/PROTOCOL.md §6). Runs publish
// their requests; anyone with the daemon's token lists and answers them; the
// run waits for the answer. The queue is the arbiter: the first answer wins,
// whoever gives it, and every later one is refused saying who decided.
package approvals

import (
	"context"
	"fmt"
	"sort"
	"sync"
	"time"

	"github.com/seed5ad92d46/sous/daemon/wire"
)

// Bounds.
const (
	// DefaultForget is how long a request no run waits for any more (no
	// publish or wait named it) stays pending: then its run is taken to be
	// gone, and the request is closed.
	DefaultForget = time.Minute
	// keepDecided is how long a decided request is remembered after its run
	// withdrew it, so that a late answer hears who decided, not "unknown".
	keepDecided = 10 * time.Minute
	// MaxPending bounds the requests one daemon holds (decided ones
	// included): a run that publishes without end is refused, not the
	// daemon's memory.
	MaxPending = 10000
	// MaxWait bounds one approval.wait.
	MaxWait = 30 * time.Second
)

// Queue holds the requests. The zero value is not usable: call New.
type Queue struct {
	now    func() time.Time
	forget time.Duration

	mu      sync.Mutex
	entries map[string]*entry
	changed chan struct{} // closed and replaced at every change
}

type entry struct {
	ask     wire.Ask
	touched time.Time
	// decided is set once; withdrawn says the run withdrew the request
	// (decided or not) and it stays only to answer late answers.
	decided   *wire.AskAnswer
	withdrawn time.Time
}

// New returns an empty queue. now is its clock (nil: time.Now); forget is
// how long an unattended request lives (0: DefaultForget).
func New(now func() time.Time, forget time.Duration) *Queue {
	if now == nil {
		now = time.Now
	}
	if forget <= 0 {
		forget = DefaultForget
	}
	return &Queue{now: now, forget: forget, entries: make(map[string]*entry), changed: make(chan struct{})}
}

// Changed returns a channel closed at the next change (a request published,
// decided or gone): a watcher reads Pending again then.
func (q *Queue) Changed() <-chan struct{} {
	q.mu.Lock()
	defer q.mu.Unlock()
	return q.changed
}

func (q *Queue) changedLocked() {
	close(q.changed)
	q.changed = make(chan struct{})
}

// Publish adds a pending request, or refreshes one the same run published
// before (a publish resent after a reconnect). An id another run holds is
// refused.
func (q *Queue) Publish(a wire.Ask) error {
	if a.ID == "" || a.Run == "" {
		return wire.InvalidParams("approval.publish: id and run are required")
	}
	q.mu.Lock()
	defer q.mu.Unlock()
	now := q.now()
	q.sweepLocked(now)
	if e, ok := q.entries[a.ID]; ok {
		if e.ask.Run != a.Run {
			return wire.InvalidParams(fmt.Sprintf("approval.publish: id %q is taken by another run", a.ID))
		}
		e.touched = now
		return nil
	}
	if len(q.entries) >= MaxPending {
		return wire.Errorf(wire.CodeInternal, "approval.publish: the daemon holds %d requests already", MaxPending)
	}
	if a.Since.IsZero() {
		a.Since = now
	}
	q.entries[a.ID] = &entry{ask: a, touched: now}
	q.changedLocked()
	return nil
}

// Pending returns the requests that wait for an answer, oldest first.
func (q *Queue) Pending() []wire.Ask {
	q.mu.Lock()
	defer q.mu.Unlock()
	q.sweepLocked(q.now())
	out := make([]wire.Ask, 0, len(q.entries))
	for _, e := range q.entries {
		if e.decided == nil {
			out = append(out, e.ask)
		}
	}
	sort.Slice(out, func(i, j int) bool {
		if !out[i].Since.Equal(out[j].Since) {
			return out[i].Since.Before(out[j].Since)
		}
		return out[i].ID < out[j].ID
	})
	return out
}

// Answer decides a pending request. A request decided already is refused
// with CodeApprovalDecided (the message says how and by whom), an unknown
// id with CodeApprovalUnknown.
func (q *Queue) Answer(ans wire.AskAnswer) error {
	if ans.Decision != wire.DecisionAllow && ans.Decision != wire.DecisionDeny {
		return wire.InvalidParams(fmt.Sprintf("approval.answer: decision must be %q or %q", wire.DecisionAllow, wire.DecisionDeny))
	}
	q.mu.Lock()
	defer q.mu.Unlock()
	q.sweepLocked(q.now())
	e, ok := q.entries[ans.ID]
	if !ok {
		return wire.Errorf(wire.CodeApprovalUnknown, "no pending request %q (answered and gone, or never asked)", ans.ID)
	}
	if e.decided != nil {
		return wire.Errorf(wire.CodeApprovalDecided, "request %s was decided already: %s", ans.ID, Describe(*e.decided))
	}
	d := ans
	e.decided = &d
	q.changedLocked()
	return nil
}

// Describe says how a request was decided, for the answers refused after
// it: "denied by remote", "allowed at the prompt", ...
func Describe(a wire.AskAnswer) string {
	verb := "denied"
	if a.Decision == wire.DecisionAllow {
		verb = "allowed"
	}
	switch a.By {
	case "":
		return verb
	case "prompt":
		return verb + " at the run's terminal prompt"
	case "withdrawn":
		return "withdrawn by its run"
	case "gone":
		return "its run is gone"
	}
	return verb + " by " + a.By
}

// Wait returns the decided requests among ids, waiting up to timeout (at
// most MaxWait) for one when none is. It marks every id as still waited
// for. A wait for no ids returns at once.
func (q *Queue) Wait(ctx context.Context, ids []string, timeout time.Duration) []wire.AskAnswer {
	if len(ids) == 0 {
		return nil // nothing could ever be decided: no reason to hold the call
	}
	if timeout <= 0 || timeout > MaxWait {
		timeout = MaxWait
	}
	timer := time.NewTimer(timeout)
	defer timer.Stop()
	for {
		q.mu.Lock()
		now := q.now()
		q.sweepLocked(now)
		var out []wire.AskAnswer
		for _, id := range ids {
			if e, ok := q.entries[id]; ok {
				e.touched = now
				if e.decided != nil {
					out = append(out, *e.decided)
				}
			}
		}
		changed := q.changed
		q.mu.Unlock()
		if len(out) > 0 {
			return out
		}
		select {
		case <-changed:
		case <-timer.C:
			return nil
		case <-ctx.Done():
			return nil
		}
	}
}

// Withdraw says the run waits no more for ids: a pending one is closed as
// withdrawn (an answer after that is refused), and each is forgotten after
// a while.
func (q *Queue) Withdraw(ids []string) {
	q.mu.Lock()
	defer q.mu.Unlock()
	now := q.now()
	changed := false
	for _, id := range ids {
		e, ok := q.entries[id]
		if !ok || !e.withdrawn.IsZero() {
			continue
		}
		e.withdrawn = now
		if e.decided == nil {
			e.decided = &wire.AskAnswer{ID: id, Decision: wire.DecisionDeny, By: "withdrawn"}
			changed = true
		}
	}
	if changed {
		q.changedLocked()
	}
}

// sweepLocked closes the pending requests no run waits for and forgets
// the withdrawn ones past keepDecided.
func (q *Queue) sweepLocked(now time.Time) {
	changed := false
	for id, e := range q.entries {
		switch {
		case !e.withdrawn.IsZero():
			if now.Sub(e.withdrawn) > keepDecided {
				delete(q.entries, id)
			}
		case now.Sub(e.touched) > q.forget:
			// Nobody waits: the run is gone. Closed, and forgotten like a
			// withdrawn request.
			if e.decided == nil {
				e.decided = &wire.AskAnswer{ID: id, Decision: wire.DecisionDeny, By: "gone"}
				changed = true
			}
			e.withdrawn = now
		}
	}
	if changed {
		q.changedLocked()
	}
}
