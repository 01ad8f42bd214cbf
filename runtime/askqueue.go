package runtime

import (
	"context"
	"time"

	"github.com/seed5ad92d46/sous/daemon/approvals"
	"github.com/seed5ad92d46/sous/daemon/wire"
)

// askQueue is where a run's requests wait for a person: the default
// daemon's queue (the approval.* extension), or one in sous against a
// daemon without it. Either is the arbiter of answers: the first wins.
type askQueue interface {
	Publish(ctx context.Context, a wire.Ask) error
	// Answer decides a pending request; a decided one is refused with a
	// *wire.Error of code wire.CodeApprovalDecided, an unknown id with
	// wire.CodeApprovalUnknown.
	Answer(ctx context.Context, a wire.AskAnswer) error
	// Wait returns the decided requests among ids, waiting up to timeout
	// for one when none is (nil then).
	Wait(ctx context.Context, ids []string, timeout time.Duration) ([]wire.AskAnswer, error)
	Withdraw(ctx context.Context, ids []string) error
}

// daemonQueue is a daemon's queue, through the run's connection to it.
// The client resends publish, wait and withdraw after a reconnect.
type daemonQueue struct{ d Daemon }

func (q daemonQueue) Publish(ctx context.Context, a wire.Ask) error {
	return q.d.Call(ctx, "approval.publish", a, nil)
}

func (q daemonQueue) Answer(ctx context.Context, a wire.AskAnswer) error {
	return q.d.Call(ctx, "approval.answer", a, nil)
}

func (q daemonQueue) Wait(ctx context.Context, ids []string, timeout time.Duration) ([]wire.AskAnswer, error) {
	var r wire.AskWaitResult
	err := q.d.Call(ctx, "approval.wait", wire.AskWaitParams{IDs: ids, TimeoutMs: int(timeout / time.Millisecond)}, &r)
	return r.Decided, err
}

func (q daemonQueue) Withdraw(ctx context.Context, ids []string) error {
	return q.d.Call(ctx, "approval.withdraw", wire.AskIDsParams{IDs: ids}, nil)
}

// localQueue is a queue in sous, for a default daemon without the
// extension: the terminal prompt, the timeout and the run's own Steer
// answer through it; nobody else reaches it.
type localQueue struct{ q *approvals.Queue }

func (q localQueue) Publish(_ context.Context, a wire.Ask) error { return q.q.Publish(a) }
func (q localQueue) Answer(_ context.Context, a wire.AskAnswer) error {
	return q.q.Answer(a)
}
func (q localQueue) Wait(ctx context.Context, ids []string, timeout time.Duration) ([]wire.AskAnswer, error) {
	return q.q.Wait(ctx, ids, timeout), nil
}
func (q localQueue) Withdraw(_ context.Context, ids []string) error {
	q.q.Withdraw(ids)
	return nil
}
