// Package netlimit bounds how many connections a listener holds before
// they prove themselves. An HTTP listener (the daemon's WebSocket endpoint,
// its metrics) accepts anyone who can reach its port; each connection costs
// a descriptor until it is answered and closed. Peers that connect and say
// nothing, or hold a refused connection open, must not be able to take every
// descriptor the daemon has (and with them its Unix socket, its children's
// pipes and its authenticated users).
//
// Listener counts the connections it has handed out that are pending:
// neither closed nor released. An HTTP server releases a connection when it
// hijacks it (a WebSocket upgrade: from then on the daemon's own connection
// limit counts it) with ConnState. A connection accepted while Max others
// are pending is closed at once: the kernel's accept queue is kept drained,
// so a flood costs the daemon no descriptor for longer than an accept and a
// close, and peers behind it are refused quickly rather than left waiting.
package netlimit

import (
	"net"
	"net/http"
	"sync"
	"sync/atomic"
)

// Counters, when set, are kept up to date by a Listener: Pending, the
// connections pending now (a gauge, shared by every listener given it);
// Shed, the connections closed at once because Max were pending.
type Counters struct {
	Pending *atomic.Int64
	Shed    *atomic.Int64
}

// Listener is a net.Listener that holds at most Max pending connections.
type Listener struct {
	net.Listener
	max      int64
	pending  atomic.Int64
	counters Counters
}

// New wraps ln. max <= 0 means no limit (connections are still counted).
func New(ln net.Listener, max int, c Counters) *Listener {
	return &Listener{Listener: ln, max: int64(max), counters: c}
}

// Pending is how many of l's connections are pending now.
func (l *Listener) Pending() int { return int(l.pending.Load()) }

// Accept returns the next connection while fewer than Max are pending,
// closing those that arrive over the limit in the meantime.
func (l *Listener) Accept() (net.Conn, error) {
	for {
		c, err := l.Listener.Accept()
		if err != nil {
			return nil, err
		}
		if n := l.pending.Add(1); l.max > 0 && n > l.max {
			l.pending.Add(-1)
			// Counted before the close: a peer that sees its connection
			// closed finds the shed already in the metrics.
			if l.counters.Shed != nil {
				l.counters.Shed.Add(1)
			}
			c.Close()
			continue
		}
		if l.counters.Pending != nil {
			l.counters.Pending.Add(1)
		}
		return &Conn{Conn: c, l: l}, nil
	}
}

// Conn is a connection a Listener handed out.
type Conn struct {
	net.Conn
	l        *Listener
	released sync.Once
}

// Release stops counting c as pending; it is idempotent, and Close calls it.
func (c *Conn) Release() {
	c.released.Do(func() {
		c.l.pending.Add(-1)
		if c.l.counters.Pending != nil {
			c.l.counters.Pending.Add(-1)
		}
	})
}

// Close closes the connection and releases it.
func (c *Conn) Close() error {
	c.Release()
	return c.Conn.Close()
}

// CloseWrite half-closes a TCP connection, as net/http does before it
// closes one (so that the peer reads the whole response).
func (c *Conn) CloseWrite() error {
	if cw, ok := c.Conn.(interface{ CloseWrite() error }); ok {
		return cw.CloseWrite()
	}
	return nil
}

// ConnState is an http.Server's ConnState hook: a hijacked connection (an
// upgrade) no longer counts as pending, nor does a closed one.
func ConnState(c net.Conn, state http.ConnState) {
	if state != http.StateHijacked && state != http.StateClosed {
		return
	}
	if lc, ok := c.(*Conn); ok {
		lc.Release()
	}
}
