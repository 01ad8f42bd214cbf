package client

import (
	"context"
	"fmt"

	"github.com/seed5ad92d46/sous/daemon/wire"
)

// HasFeature reports whether the daemon advertises an extension in
// server.capabilities.features. The answer is fetched once.
func (c *Client) HasFeature(ctx context.Context, name string) (bool, error) {
	c.mu.Lock()
	f := c.features
	c.mu.Unlock()
	if f == nil {
		var caps wire.CapabilitiesResult
		if err := c.Call(ctx, "server.capabilities", nil, &caps); err != nil {
			return false, err
		}
		f = make(map[string]bool, len(caps.Features))
		for _, name := range caps.Features {
			f[name] = true
		}
		for _, m := range caps.Methods {
			f["method:"+m] = true
		}
		c.mu.Lock()
		c.features = f
		c.mu.Unlock()
	}
	return f[name], nil
}

// RequireFeature fails with a message naming the extension when the daemon
// lacks it.
func (c *Client) RequireFeature(ctx context.Context, name, what string) error {
	ok, err := c.HasFeature(ctx, name)
	if err != nil {
		return err
	}
	if !ok {
		return fmt.Errorf("%s needs the daemon extension %q, which this daemon does not advertise (upgrade it or use the embedded daemon)", what, name)
	}
	return nil
}

// pipelinesStdin reports whether a Write may keep several process.stdin
// requests in flight: over a link with a round trip (not the embedded
// daemon, which answers at once and runs each call on its own goroutine),
// to a daemon that applies them in the order sent.
func (c *Client) pipelinesStdin(ctx context.Context) bool {
	if c.local {
		return false
	}
	if c.opt.pipelineStdinAlways {
		return true
	}
	ok, err := c.HasFeature(ctx, wire.FeatureStdinOrdered)
	return err == nil && ok
}
