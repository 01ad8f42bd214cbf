package client

import "context"

// PassesMirrors reports whether c still passes spawn mirrors to its daemon
// (false once a relay dropped them), for the tests of that fallback.
func PassesMirrors(c *Client) bool { return !c.noPassing.Load() }

// BreakLink closes c's current connection, as a network fault would; the
// client then reconnects and resumes.
func BreakLink(c *Client) {
	c.mu.Lock()
	l := c.cur
	c.mu.Unlock()
	if l != nil {
		l.close()
	}
}

// WithStdinPipelinedAlways is opt with writes keeping several
// process.stdin requests in flight even to a daemon that does not apply
// them in order.
func WithStdinPipelinedAlways(opt Options) Options {
	opt.pipelineStdinAlways = true
	return opt
}

// PipelinesStdin reports whether c's large writes keep several
// process.stdin requests in flight.
func PipelinesStdin(c *Client) bool { return c.pipelinesStdin(context.Background()) }

// currentStreamLink is c's current connection when it is a stream (a
// Unix socket's, an ssh bridge's), else nil.
func currentStreamLink(c *Client) *streamLink {
	c.mu.Lock()
	defer c.mu.Unlock()
	l, _ := c.cur.(*streamLink)
	return l
}

// SelfReads is how many answers on c's current connection their callers
// read themselves instead of being handed them by its reader goroutine.
func SelfReads(c *Client) int64 {
	if l := currentStreamLink(c); l != nil {
		return l.selfReads.Load()
	}
	return 0
}

// ReaderWakes is how many times c's current connection handed the reading
// to its parked reader goroutine.
func ReaderWakes(c *Client) int64 {
	if l := currentStreamLink(c); l != nil {
		return l.readerWakes.Load()
	}
	return 0
}

// WithAnswerLimit is opt with the longest answer the client takes set to n
// bytes (256 MiB otherwise), so that tests need no huge answers.
func WithAnswerLimit(opt Options, n int) Options {
	opt.maxAnswer = n
	return opt
}
