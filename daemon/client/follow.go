package client

import (
	"context"
	"fmt"
)

// following is what the client follows of one process id: the Procs that
// receive its frames, and the seq of the last frame routed to them.
//
// Usually one Proc. More when a process the client follows is reattached
// again through the same client (a recipe's reattach of a process it
// spawned): the daemon keeps one subscription per id and connection, so
// the reattach moves that subscription to a replay from the new Proc's
// seq, and every Proc of the id takes from the one stream what it has not
// seen (see Client.follow).
type following struct {
	// procs is copied on write: the frame router delivers to a snapshot
	// taken under c.mu without copying it.
	procs []*Proc
	last  int64 // the seq of the last frame routed to procs
}

// register makes p, a process being spawned, the only follower of its id.
// Previous followers of the id on this client stop following: the daemon
// replaces a process whose id is spawned again.
func (c *Client) register(p *Proc) {
	c.mu.Lock()
	old := c.procs[p.ID]
	c.procs[p.ID] = &following{procs: []*Proc{p}}
	c.mu.Unlock()
	if old != nil {
		for _, o := range old.procs {
			o.fail(fmt.Errorf("process %s was replaced by a new process with the same id", p.ID))
		}
	}
}

// follow adds p, a process being reattached from fromSeq, to the followers
// of its id, and returns the fromSeq to ask the daemon for. The caller
// holds lockReattach for the id.
//
// With nobody else following the id, that is fromSeq itself. Otherwise the
// daemon's reattach moves the subscription the others are reading, so that
// the connection carries what the old subscription had sent until then,
// then the replay:
//   - from past the last frame routed (last), the others would miss the
//     frames in between: the replay starts at last instead, and p skips to
//     fromSeq as any Proc skips frames it has;
//   - from before last, p drops what arrives until the replay begins, which
//     the seqs tell: the old subscription's frames all come after last,
//     and the replay's first frame is at or before the highest seq seen so
//     far (Proc.awaitReplay).
//
// A process this client spawned with a mirror is refused: its spawner
// needs the daemon to keep marking what it tees, and another follower on
// the same connection would then get those frames without their data.
func (c *Client) follow(p *Proc, fromSeq int64) (askFrom int64, err error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	f := c.procs[p.ID]
	var live []*Proc
	if f != nil {
		for _, o := range f.procs {
			if o.finished() {
				continue
			}
			if o.isTeed() {
				return 0, fmt.Errorf("reattach %s: this client spawned it with its output mirrored, and follows it already; "+
					"reattach it through another client", p.ID)
			}
			live = append(live, o)
		}
	}
	if len(live) == 0 {
		c.procs[p.ID] = &following{procs: []*Proc{p}}
		return fromSeq, nil
	}
	if fromSeq < f.last {
		p.mu.Lock()
		p.awaitReplay, p.seen = true, f.last
		p.mu.Unlock()
	}
	c.procs[p.ID] = &following{procs: append(live, p), last: f.last}
	return min(fromSeq, f.last), nil
}

// lockReattach waits until no other reattach of id is under way on this
// client, and returns what ends this one's turn.
func (c *Client) lockReattach(ctx context.Context, id string) (unlock func(), err error) {
	for {
		c.mu.Lock()
		busy, ok := c.reattaching[id]
		if !ok {
			done := make(chan struct{})
			c.reattaching[id] = done
			c.mu.Unlock()
			return func() {
				c.mu.Lock()
				delete(c.reattaching, id)
				c.mu.Unlock()
				close(done)
			}, nil
		}
		c.mu.Unlock()
		select {
		case <-busy:
		case <-ctx.Done():
			return nil, fmt.Errorf("reattach %s: %w", id, ctx.Err())
		}
	}
}

// followers returns the Procs that frames of id go to, noting last as the
// seq of the last of them. The slice is not to be modified.
func (c *Client) followers(id string, last int64) []*Proc {
	c.mu.Lock()
	defer c.mu.Unlock()
	f := c.procs[id]
	if f == nil {
		return nil
	}
	f.last = last
	return f.procs
}

// unregister stops routing frames to p. Unless p has exited, the daemon may
// still stream it to this client (a spawn or reattach given up on), so the
// reader goroutine no longer parks: frames nobody reads would hold the
// process back once the daemon's replay log is full.
func (c *Client) unregister(p *Proc) {
	p.mu.Lock()
	exited := p.exited
	p.mu.Unlock()
	c.mu.Lock()
	defer c.mu.Unlock()
	c.strayed = c.strayed || !exited
	c.dropProc(p)
}

// forgetProc stops routing frames to p, which the daemon does not stream
// (a reattach found no such process). Called without c.mu.
func (c *Client) forgetProc(p *Proc) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.dropProc(p)
}

// dropProc removes p from the followers of its id. Called with c.mu held.
func (c *Client) dropProc(p *Proc) {
	f := c.procs[p.ID]
	if f == nil {
		return
	}
	rest := make([]*Proc, 0, len(f.procs))
	for _, o := range f.procs {
		if o != p {
			rest = append(rest, o)
		}
	}
	switch {
	case len(rest) == len(f.procs):
	case len(rest) == 0:
		delete(c.procs, p.ID)
	default:
		c.procs[p.ID] = &following{procs: rest, last: f.last}
	}
}

// allProcs lists every Proc the client follows. Called without c.mu.
func (c *Client) allProcs() []*Proc {
	c.mu.Lock()
	defer c.mu.Unlock()
	var procs []*Proc
	for _, f := range c.procs {
		procs = append(procs, f.procs...)
	}
	return procs
}
