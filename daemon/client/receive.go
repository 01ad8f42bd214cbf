package client

import (
	"context"
	"encoding/json"

	"github.com/seed5ad92d46/sous/daemon/wire"
)

// wakeReader makes sure someone reads the current link, if it is one a
// caller may read itself (selfReader).
func (c *Client) wakeReader() {
	c.mu.Lock()
	l := c.cur
	c.mu.Unlock()
	if r, ok := l.(selfReader); ok {
		r.wakeReader()
	}
}

// readFor reads the current link on the caller's goroutine until p is done,
// where it can (see streamLink.readUntil): Proc.Wait.
func (c *Client) readFor(ctx context.Context, p *Proc) {
	c.mu.Lock()
	l := c.cur
	c.mu.Unlock()
	if r, ok := l.(selfReader); ok {
		r.readUntil(ctx, p.done, p)
	}
}

// response implements receiver.
func (c *Client) response(l link, id uint64, result json.RawMessage, err error) {
	c.mu.Lock()
	cl := c.pending[id]
	if cl == nil || cl.via != l {
		c.mu.Unlock()
		return // a response to a call already answered or abandoned
	}
	delete(c.pending, id)
	if l == c.cur {
		c.carried.Store(true) // not the answers of a resume: those come before it is current
		c.connected = true
	}
	c.mu.Unlock()
	cl.result, cl.err = result, err
	close(cl.done)
}

// frames implements receiver.
func (c *Client) frames(l link, procID string, frames []wire.Frame) {
	if len(frames) == 0 {
		return
	}
	if !c.carried.Load() {
		c.mu.Lock()
		if l == c.cur {
			c.carried.Store(true)
		}
		c.mu.Unlock()
	}
	// Usually one follower (see following).
	for _, p := range c.followers(procID, frames[len(frames)-1].Seq) {
		for i := range frames {
			p.deliver(&frames[i])
		}
	}
}

// gone implements receiver: the daemon discarded a process this client
// follows (process.gone) before its exit frame.
func (c *Client) gone(_ link, g wire.Gone) {
	c.mu.Lock()
	f := c.procs[g.ID]
	c.mu.Unlock()
	if f != nil {
		for _, p := range f.procs {
			p.gone(g)
		}
	}
}

// quiet implements readerHints.
func (c *Client) quiet(spawning *Proc) bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	if spawning != nil && len(c.procs) == 1 {
		f := c.procs[spawning.ID]
		return f != nil && len(f.procs) == 1 && f.procs[0] == spawning
	}
	return len(c.procs) == 0
}

// idle implements readerHints.
func (c *Client) idle() bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	if len(c.procs) != 0 || c.strayed {
		return false
	}
	return c.noneAwaited()
}

// unwatched implements readerHints.
func (c *Client) unwatched() bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.strayed {
		return false
	}
	for _, f := range c.procs {
		for _, p := range f.procs {
			if !p.silent || p.heeded.Load() {
				return false
			}
		}
	}
	return c.noneAwaited()
}

// noneAwaited reports that no call awaits its answer but lazy ones.
// Called with c.mu held.
func (c *Client) noneAwaited() bool {
	for _, cl := range c.pending {
		if !cl.lazy {
			return false
		}
	}
	return true
}
