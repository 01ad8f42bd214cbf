package daemon

import (
	"context"
	"encoding/json"
	"time"

	"github.com/seed5ad92d46/sous/daemon/approvals"
	"github.com/seed5ad92d46/sous/daemon/wire"
)

// The approval.* extension (docs/PROTOCOL.md §6): the daemon holds the
// permission requests its runs wait on a person for, in one
// approvals.Queue, so that any token holder lists and answers them. The
// methods are a thin skin over the queue, which arbitrates.

// Approvals is the daemon's queue of requests waiting for a person: its
// web page reads and answers it in-process.
func (s *Server) Approvals() *approvals.Queue { return s.approvals }

// approvalMethod checks the feature and decodes params for one of the
// approval.* methods.
func approvalMethod[P any](name string, f func(context.Context, *Session, P) (any, error)) handler {
	return func(ctx context.Context, se *Session, raw json.RawMessage) (any, func(), error) {
		if !se.s.enabled(wire.FeatureApprovalQueue) {
			return nil, nil, wire.Errorf(wire.CodeMethodNotFound, "Unknown method: approval.%s", name)
		}
		var p P
		if _, isNone := any(p).(struct{}); !isNone {
			var err error
			if p, err = decodeParams[P](raw); err != nil {
				return nil, nil, err
			}
		}
		r, err := f(ctx, se, p)
		return r, nil, err
	}
}

// ok is the result of the approval.* methods that return nothing else.
type okResult struct {
	Success bool `json:"success"`
}

func approvalNamespace() map[string]handler {
	return map[string]handler{
		"publish": approvalMethod("publish", func(_ context.Context, se *Session, p wire.Ask) (any, error) {
			if err := se.s.approvals.Publish(p); err != nil {
				return nil, err
			}
			return okResult{true}, nil
		}),
		"list": approvalMethod("list", func(_ context.Context, se *Session, _ struct{}) (any, error) {
			return wire.AskListResult{Approvals: se.s.approvals.Pending()}, nil
		}),
		"answer": approvalMethod("answer", func(_ context.Context, se *Session, p wire.AskAnswer) (any, error) {
			if p.By == "" {
				p.By = "remote"
			}
			if err := se.s.approvals.Answer(p); err != nil {
				return nil, err
			}
			return okResult{true}, nil
		}),
		"wait": approvalMethod("wait", func(ctx context.Context, se *Session, p wire.AskWaitParams) (any, error) {
			d := se.s.approvals.Wait(ctx, p.IDs, time.Duration(p.TimeoutMs)*time.Millisecond)
			if d == nil {
				d = []wire.AskAnswer{}
			}
			return wire.AskWaitResult{Decided: d}, nil
		}),
		"withdraw": approvalMethod("withdraw", func(_ context.Context, se *Session, p wire.AskIDsParams) (any, error) {
			se.s.approvals.Withdraw(p.IDs)
			return okResult{true}, nil
		}),
	}
}
