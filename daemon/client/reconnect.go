package client

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"slices"
	"time"

	"github.com/seed5ad92d46/sous/daemon/wire"
)

// closed implements receiver: the link broke.
func (c *Client) closed(l link, err error) {
	c.mu.Lock()
	if c.cur != l || c.dead != nil {
		// Not the current link (one being resumed): fail what was sent on it
		// so the resume notices and dials again, and remember it broke in
		// case nothing was in flight on it.
		if c.cur == nil && c.dead == nil {
			c.broken = append(c.broken, l)
		}
		var stranded []*call
		for id, cl := range c.pending {
			if cl.via == l {
				stranded = append(stranded, cl)
				delete(c.pending, id)
			}
		}
		c.mu.Unlock()
		for _, cl := range stranded {
			cl.err = fmt.Errorf("%s: %w: %v", cl.method, ErrConnectionLost, err)
			close(cl.done)
		}
		return
	}
	c.cur = nil
	c.ready = make(chan struct{})
	if !c.connected {
		// A connection that never worked once is not a dropped one: fail
		// now, with its own error, as a dial that fails does.
		c.mu.Unlock()
		c.giveUp(&notConnectedError{err})
		return
	}
	if c.carried.Swap(false) || len(c.pending) == 0 || c.outageSince.IsZero() {
		// It got something through, or had nothing to get through (a
		// quiet process for an hour is no outage): a new outage begins.
		c.outageSince = time.Now()
	}
	outageSince := c.outageSince
	c.mu.Unlock()
	if c.opt.ReconnectTimeout < 0 {
		c.giveUp(fmt.Errorf("%w: %v", ErrConnectionLost, err))
		return
	}
	c.opt.Logger.Warn("connection to daemon lost; reconnecting", "err", err)
	go c.reconnect(err, outageSince)
}

// reconnect dials until it succeeds or ReconnectTimeout passes since the
// outage began (see outageSince), then reattaches every followed process
// from its last seq and resends the calls that are safe to resend.
func (c *Client) reconnect(cause error, outageSince time.Time) {
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	go func() {
		select {
		case <-c.closeCh:
			cancel()
		case <-ctx.Done():
		}
	}()
	// The give-up deadline and the backoff restart whenever an attempt made
	// progress (frames arrived while resuming): a flaky link that keeps
	// moving data is worth staying on.
	delay := 20 * time.Millisecond
	deadline := outageSince.Add(c.opt.ReconnectTimeout)
	var lastErr error // the last attempt's own failure, not the deadline's
	for {
		if time.Now().After(deadline) {
			if lastErr == nil {
				lastErr = errors.New("every new connection broke before a request got through")
			}
			c.giveUp(fmt.Errorf("%w (%v); gave up reconnecting after %s: %v", ErrConnectionLost, cause, c.opt.ReconnectTimeout, lastErr))
			return
		}
		before := c.progress()
		actx, acancel := context.WithDeadline(ctx, deadline)
		l, err := c.dial(actx, c)
		if err == nil {
			if err = c.resume(actx, l); err == nil {
				acancel()
				return
			}
			l.close()
		}
		if err != nil && (lastErr == nil || actx.Err() == nil) {
			lastErr = err
		}
		acancel()
		if errors.Is(err, fs.ErrNotExist) {
			// A Unix socket that no longer exists is a daemon that stopped
			// (it removes its socket first) or was never restarted there;
			// what it ran went with it, so there is nothing to wait for.
			c.giveUp(fmt.Errorf("%w (%v); the daemon is gone: %v", ErrConnectionLost, cause, err))
			return
		}
		if c.progress() != before {
			delay = 20 * time.Millisecond
			deadline = time.Now().Add(c.opt.ReconnectTimeout)
			c.mu.Lock()
			c.outageSince = time.Now()
			c.mu.Unlock()
			continue
		}
		if ctx.Err() != nil || time.Now().After(deadline) {
			c.giveUp(fmt.Errorf("%w (%v); gave up reconnecting after %s: %v", ErrConnectionLost, cause, c.opt.ReconnectTimeout, lastErr))
			return
		}
		select {
		case <-ctx.Done():
		case <-time.After(delay):
		}
		delay = min(2*delay, time.Second)
	}
}

// progress sums the last seqs of followed processes; it changes whenever
// frames are delivered.
func (c *Client) progress() int64 {
	var sum int64
	for _, p := range c.allProcs() {
		sum += p.LastSeq()
	}
	return sum
}

// resume brings a fresh link into service.
func (c *Client) resume(ctx context.Context, l link) error {
	c.mu.Lock()
	byID := make(map[string][]*Proc, len(c.procs))
	for id, f := range c.procs {
		byID[id] = f.procs
	}
	c.mu.Unlock()
	// Binary frames first (binframes.go): the replays then come binary.
	c.resumeBinaryFrames(ctx, l)

	// Reattach on the new link before anyone else uses it, so replayed
	// frames are routed and deduplicated by seq: once per id, from the
	// earliest seq any of its followers needs.
	for id, procs := range byID {
		live := slices.DeleteFunc(slices.Clone(procs), (*Proc).finished)
		if len(live) == 0 || len(live) == 1 && live[0].isResending() {
			continue // a keyed spawn is Spawn's to send again (a spawn has its id to itself: register)
		}
		fromSeq := live[0].LastSeq()
		mirrored := false
		for _, p := range live {
			fromSeq = min(fromSeq, p.LastSeq())
			mirrored = mirrored || p.isTeed()
		}
		var res wire.ReattachResult
		// wantPid: which process it is (Proc.resumed).
		params := map[string]any{"id": id, "fromSeq": fromSeq, "wantPid": true, "notifyGone": true}
		if mirrored {
			params["mirrored"] = true // see wire.ProcessParams.Mirrored
		}
		call := func(params map[string]any, res *wire.ReattachResult) error {
			return c.callOn(ctx, l, "process.reattach", params, res)
		}
		if err := call(params, &res); err != nil {
			return err
		}
		if res.Found {
			if err := askForTheEnd(call, params, fromSeq, res); err != nil {
				return err
			}
		}
		for _, p := range live {
			switch {
			case res.Found:
				p.resumed(res)
			case p.isSpawning():
				// its spawn never reached the daemon: Spawn sends it again
			default:
				p.fail(fmt.Errorf("process %s is gone from the daemon after reconnecting (was the daemon restarted?)", p.ID))
			}
		}
	}

	c.mu.Lock()
	if c.dead != nil {
		c.mu.Unlock()
		return c.dead
	}
	if slices.Contains(c.broken, l) {
		// It broke after its last reattach answered: its reader is gone, so
		// as the current link it would leave the client waiting forever.
		c.broken = nil
		c.mu.Unlock()
		return fmt.Errorf("%w: the new connection broke while resuming", ErrConnectionLost)
	}
	c.broken = nil
	c.cur = l
	close(c.ready)
	// New calls wait until the calls in flight are sent again: a run.append
	// or process.stdin sent after the reconnect must not overtake the
	// resent ones it follows (the daemon refused a journal append "at
	// 4871, but the journal holds 2071 records" when it did).
	resent := make(chan struct{})
	c.resending = resent
	var resend []uint64
	var lost []*call
	for id, cl := range c.pending {
		if cl.via == l || cl.via == nil { // nil: not sent yet; transmit will use l
			continue
		}
		if cl.retry {
			resend = append(resend, id)
			cl.via = l
		} else {
			lost = append(lost, cl)
			delete(c.pending, id)
		}
	}
	c.mu.Unlock()
	c.opt.Logger.Info("reconnected to daemon", "processes", len(byID), "resent", len(resend))

	for _, cl := range lost {
		cl.err = fmt.Errorf("%s: %w while the call was in flight; it may or may not have taken effect", cl.method, ErrConnectionLost)
		close(cl.done)
	}
	// In the order they were first sent: process.stdin requests in flight
	// together must reach the daemon in offset order.
	slices.Sort(resend)
	for _, id := range resend {
		c.mu.Lock()
		cl := c.pending[id]
		c.mu.Unlock()
		if cl != nil {
			c.resend(l, id, cl)
		}
	}
	c.mu.Lock()
	if c.resending == resent { // not a later resume's, should this link have broken meanwhile
		c.resending = nil
	}
	c.mu.Unlock()
	close(resent)
	return nil
}

// resend sends a call again on a new link, unless it was answered meanwhile:
// its waiter may then be reusing the params' buffer (await waits for a
// resend under way to finish before it returns).
func (c *Client) resend(l link, id uint64, cl *call) {
	cl.sendMu.Lock()
	defer cl.sendMu.Unlock()
	c.mu.Lock()
	still := c.pending[id] == cl
	c.mu.Unlock()
	if still {
		l.send(id, cl.method, cl.params)
		if r, ok := l.(selfReader); ok {
			r.wakeReader() // the waiter is past readUntil: the reader goroutine must read the answer
		}
	}
}

// callOn makes a call on a specific link (used while resuming, before the
// link is current).
func (c *Client) callOn(ctx context.Context, l link, method string, params, result any) error {
	raw, err := json.Marshal(params)
	if err != nil {
		return err
	}
	cl := &call{method: method, params: raw, via: l, done: make(chan struct{})}
	c.mu.Lock()
	c.nextID++
	id := c.nextID
	c.pending[id] = cl
	c.mu.Unlock()
	defer func() {
		c.mu.Lock()
		delete(c.pending, id)
		c.mu.Unlock()
	}()
	if err := l.send(id, method, raw); err != nil {
		return err
	}
	if r, ok := l.(selfReader); ok {
		r.readUntil(ctx, cl.done, nil)
	}
	select {
	case <-cl.done:
		if cl.err != nil {
			return cl.err
		}
		return decodeResult(cl.result, result)
	case <-ctx.Done():
		return ctx.Err()
	}
}

// giveUp fails the client for good.
func (c *Client) giveUp(err error) {
	c.mu.Lock()
	if c.dead == nil {
		c.dead = err
		close(c.ready)
	}
	c.broken = nil
	c.mu.Unlock()
	c.opt.Logger.Error("daemon connection lost", "err", err)
	c.failAll(err)
}

func (c *Client) failAll(err error) {
	c.mu.Lock()
	calls := c.pending
	c.pending = make(map[uint64]*call)
	c.mu.Unlock()
	procs := c.allProcs()
	for _, cl := range calls {
		cl.err = fmt.Errorf("%s: %w", cl.method, err)
		close(cl.done)
	}
	for _, p := range procs {
		p.fail(err)
	}
}
