package client

import (
	"context"
	"fmt"
	"time"

	"github.com/seed5ad92d46/sous/daemon/wire"
)

// The approval.* extension (wire.FeatureApprovalQueue): permission
// requests that wait for a person, held by the daemon so that any token
// holder can answer them. Check HasFeature before use: a daemon without
// it answers -32601.

// PublishAsk puts a request in the daemon's queue (again, after a
// reconnect: publishing twice is publishing once).
func (c *Client) PublishAsk(ctx context.Context, a wire.Ask) error {
	if err := c.Call(ctx, "approval.publish", a, nil); err != nil {
		return fmt.Errorf("approval.publish %s: %w", a.ID, err)
	}
	return nil
}

// PendingAsks lists the requests waiting for a person, oldest first.
func (c *Client) PendingAsks(ctx context.Context) ([]wire.Ask, error) {
	var r wire.AskListResult
	if err := c.Call(ctx, "approval.list", struct{}{}, &r); err != nil {
		return nil, fmt.Errorf("approval.list: %w", err)
	}
	return r.Approvals, nil
}

// AnswerAsk decides a request. The first answer wins: a request decided
// already gives a *wire.Error with wire.CodeApprovalDecided whose message
// says by whom.
func (c *Client) AnswerAsk(ctx context.Context, a wire.AskAnswer) error {
	return c.Call(ctx, "approval.answer", a, nil)
}

// WaitAsks returns the decided requests among ids, waiting up to timeout
// (the daemon bounds it to 30 s) when none is; nil when none was decided
// meanwhile. Each wait tells the daemon the run still waits for ids.
func (c *Client) WaitAsks(ctx context.Context, ids []string, timeout time.Duration) ([]wire.AskAnswer, error) {
	var r wire.AskWaitResult
	if err := c.Call(ctx, "approval.wait", wire.AskWaitParams{IDs: ids, TimeoutMs: int(timeout / time.Millisecond)}, &r); err != nil {
		return nil, fmt.Errorf("approval.wait: %w", err)
	}
	return r.Decided, nil
}

// WithdrawAsks says the run waits no more for ids: a pending one is
// closed, so a later answer is refused.
func (c *Client) WithdrawAsks(ctx context.Context, ids []string) error {
	if err := c.Call(ctx, "approval.withdraw", wire.AskIDsParams{IDs: ids}, nil); err != nil {
		return fmt.Errorf("approval.withdraw: %w", err)
	}
	return nil
}
