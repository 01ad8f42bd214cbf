package daemon

import (
	"context"
	"sync"
)

// stdinOrder applies one connection's process.stdin requests to a process
// in the order they arrived. Requests run concurrently (the contract asks
// for it, and a child that stops reading must not hold up the rest), so two
// stdin requests sent back to back could reach the queue in either order,
// and the later one, offset ahead of what was applied, would be refused as
// a gap. A client that keeps several requests in flight (over ssh, one at a
// time is one round trip per 512 KiB) needs them applied as sent.
//
// Every request that may be process.stdin takes a ticket in arrival order.
// A stdin request waits, before it is applied, until every earlier ticket
// is known not to be stdin for the same process, or is done. Waits only ever
// go to earlier tickets, whose handlers are already running, so they end.
type stdinOrder struct {
	mu   sync.Mutex
	next uint64
	open map[uint64]*ticket
	// changed is made when a request waits and closed (and cleared) on the
	// next change: most requests never wait, and then nothing is allocated.
	changed chan struct{}
}

type ticket struct {
	known bool   // whether it is stdin, and for which process, is known
	stdin bool   // it is process.stdin
	id    string // for this process
}

func newStdinOrder() *stdinOrder {
	return &stdinOrder{open: make(map[uint64]*ticket)}
}

// broadcast wakes the waiters. Called with mu held.
func (o *stdinOrder) broadcast() {
	if o.changed != nil {
		close(o.changed)
		o.changed = nil
	}
}

// issue hands out the next ticket, not yet known to be stdin or not.
func (o *stdinOrder) issue() uint64 {
	o.mu.Lock()
	defer o.mu.Unlock()
	o.next++
	o.open[o.next] = &ticket{}
	return o.next
}

// empty reports that no ticket is open: no request that may be stdin (or
// another ordered one) is being handled.
func (o *stdinOrder) empty() bool {
	o.mu.Lock()
	defer o.mu.Unlock()
	return len(o.open) == 0
}

// notStdin says ticket t is no stdin request (or one refused before it
// could be applied): nothing waits for it.
func (o *stdinOrder) notStdin(t uint64) {
	o.mu.Lock()
	defer o.mu.Unlock()
	if tk := o.open[t]; tk != nil && !tk.known {
		tk.known = true
		o.broadcast()
	}
}

// done retires ticket t: its request was handled.
func (o *stdinOrder) done(t uint64) {
	o.mu.Lock()
	defer o.mu.Unlock()
	if _, ok := o.open[t]; ok {
		delete(o.open, t)
		o.broadcast()
	}
}

// wait records ticket t as stdin for process id and returns once no earlier
// ticket can be stdin for it: each is known to be something else, or done.
// It gives up when ctx ends (the connection closed).
func (o *stdinOrder) wait(ctx context.Context, t uint64, id string) error {
	o.mu.Lock()
	if tk := o.open[t]; tk != nil {
		tk.known, tk.stdin, tk.id = true, true, id
		o.broadcast()
	}
	for o.blocked(t, id) {
		if o.changed == nil {
			o.changed = make(chan struct{})
		}
		ch := o.changed
		o.mu.Unlock()
		select {
		case <-ch:
		case <-ctx.Done():
			return ctx.Err()
		}
		o.mu.Lock()
	}
	o.mu.Unlock()
	return nil
}

// blocked reports whether an earlier ticket than t may still be stdin for
// process id. Called with mu held.
func (o *stdinOrder) blocked(t uint64, id string) bool {
	for u, tk := range o.open {
		if u < t && (!tk.known || tk.stdin && tk.id == id) {
			return true
		}
	}
	return false
}

type ticketKey struct{}

// withTicket gives a request's handler its stdinOrder ticket.
func withTicket(ctx context.Context, t uint64) context.Context {
	return context.WithValue(ctx, ticketKey{}, t)
}

// ticketOf is the request's ticket, or 0 when it has none (a request that
// cannot be stdin, or one made in process: the embedded daemon's client
// waits for each answer).
func ticketOf(ctx context.Context) uint64 {
	t, _ := ctx.Value(ticketKey{}).(uint64)
	return t
}
