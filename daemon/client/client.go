// Package client is the Go client of claustrum's protocol, for every target:
// an embedded in-process daemon, a Unix socket, any byte stream that reaches
// a daemon (an ssh bridge), or a daemon's WebSocket endpoint.
//
// It matches responses to requests by id, routes stream frames to the
// process that follows them, and survives a dropped connection: it dials
// again, reattaches every process it follows from the last seq it saw, and
// retries what is safe to retry. Stdin is always written with offsets, so a
// retried write is never applied twice and output is never lost or repeated.
package client

import (
	"context"
	"errors"
	"log/slog"
	"sync"
	"sync/atomic"
	"time"
)

// Options tune a Client.
type Options struct {
	// ReconnectTimeout is how long the client keeps dialing after a
	// connection drops before it gives up (default 30 s). Zero uses the
	// default; a negative value disables reconnecting.
	ReconnectTimeout time.Duration
	// Logger receives reconnect notices.
	Logger *slog.Logger

	// What only the tests set (export_test.go): maxAnswer bounds a
	// response (0: maxResponseLine), smaller so that they need no huge
	// answers; pipelineStdinAlways makes Write pipeline whatever the
	// daemon advertises, for the tests of how it mends gaps; wsHeartbeat,
	// when set, replaces wsPingInterval and wsPingTimeout, shorter so that
	// a hung daemon is noticed at once.
	maxAnswer           int
	pipelineStdinAlways bool
	wsHeartbeat         wsHeartbeat
}

// heartbeat is the WebSocket links' heartbeat.
func (o Options) heartbeat() wsHeartbeat {
	if o.wsHeartbeat != (wsHeartbeat{}) {
		return o.wsHeartbeat
	}
	return wsHeartbeat{interval: wsPingInterval, timeout: wsPingTimeout}
}

// answerLimit is the longest response the client takes.
func (o Options) answerLimit() int {
	if o.maxAnswer > 0 {
		return o.maxAnswer
	}
	return maxResponseLine
}

// Client talks to one daemon. It is safe for concurrent use.
type Client struct {
	dial  func(ctx context.Context, recv receiver) (link, error)
	opt   Options
	local bool
	// noPassing is set once a spawn's passed mirror did not reach the
	// daemon (a relay in between): later spawns do not try again.
	noPassing atomic.Bool

	mu      sync.Mutex
	cur     link          // nil while reconnecting
	ready   chan struct{} // closed when cur is usable again
	nextID  uint64
	pending map[uint64]*call
	procs   map[string]*following
	// reattaching holds, per id, a channel closed when the reattach of it
	// under way ends (lockReattach).
	reattaching map[string]chan struct{}
	features    map[string]bool
	dead        error // set when the client is closed or gave up reconnecting
	// strayed is set once a process stopped being followed before its
	// exit frame (see unregister).
	strayed bool
	closeCh chan struct{}
	// resending is set while a resume sends the calls in flight again on
	// the new link (cur), and closed when it is done: transmit holds new
	// calls back until then, so that they follow them.
	resending chan struct{}
	// broken lists the links that broke while a reconnect was under way
	// (cur nil): the link being resumed may be one of them, and must not
	// become current once its reader is gone.
	broken []link
	// outageSince is when the connection last stopped getting anywhere:
	// the break of a link that had carried something (an answer, frames)
	// since it was resumed, or had nothing in flight. A link that breaks
	// again with calls in flight before carrying anything continues the
	// outage, so ReconnectTimeout bounds a series of reconnects that never
	// get a request through (a 700 KB stdin line on a link that always
	// breaks sooner), not just the dialling.
	outageSince time.Time
	// carried is set when the current link delivers an answer or frames.
	carried atomic.Bool
	// binLink is the link last switched to binary frames (binframes.go);
	// binMu serialises the switches.
	binMu   sync.Mutex
	binLink link
	// connected is set once a link answered a call (the first one's is
	// firstLink's ping): until then a link that breaks is not redialed,
	// as there is nothing to resume and the next dial would only fail the
	// same way (ssh's login or remote command, a bridge without a daemon).
	connected bool
}

// ErrClosed is returned by calls on a closed client.
var ErrClosed = errors.New("client closed")

func newClient(opt Options) *Client {
	if opt.ReconnectTimeout == 0 {
		opt.ReconnectTimeout = 30 * time.Second
	}
	if opt.Logger == nil {
		opt.Logger = slog.New(slog.DiscardHandler)
	}
	return &Client{
		opt:         opt,
		ready:       make(chan struct{}),
		pending:     make(map[uint64]*call),
		procs:       make(map[string]*following),
		reattaching: make(map[string]chan struct{}),
		closeCh:     make(chan struct{}),
	}
}

// Close drops the connection. Processes on the daemon keep running (an
// embedded daemon is stopped by its owner).
func (c *Client) Close() error {
	c.mu.Lock()
	if c.dead != nil {
		c.mu.Unlock()
		return nil
	}
	c.dead = ErrClosed
	l := c.cur
	c.cur = nil
	close(c.closeCh)
	c.mu.Unlock()
	if l != nil {
		l.close()
	}
	c.failAll(ErrClosed)
	return nil
}

// Err is the reason the client stopped working, or nil.
func (c *Client) Err() error {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.dead
}

// Local reports whether the daemon runs in this process.
func (c *Client) Local() bool { return c.local }
