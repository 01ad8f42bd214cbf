package client

import (
	"context"
	"encoding/json"
	"fmt"
	"strconv"

	"github.com/seed5ad92d46/sous/daemon/wire"
)

// The run.* extension (wire.FeatureRunJournal): the daemon keeps the
// journals of durable runs, held by the connection that created or took
// over each one. Every method is safe to resend after a reconnect (the
// lease re-takes the journal; an append names the count it follows), and
// the client resends them. Check HasFeature before use: a daemon without
// it answers -32601. Errors are *wire.Error with wire.CodeRunBusy,
// CodeRunUnknown, CodeRunLeaseLost or CodeRunExists.

// CreateRun starts the journal of a new run, held by this client under
// lease.
func (c *Client) CreateRun(ctx context.Context, lease string, head wire.RunRecord) error {
	return c.Call(ctx, "run.create", wire.RunCreateParams{Lease: lease, Head: head}, nil)
}

// OpenRun takes over the journal of run under a new lease: its records.
func (c *Client) OpenRun(ctx context.Context, run, lease string) ([]wire.RunRecord, error) {
	var r wire.RunOpenResult
	if err := c.Call(ctx, "run.open", wire.RunLeaseParams{Run: run, Lease: lease}, &r); err != nil {
		return nil, err
	}
	return r.Records, nil
}

// SyncRun fsyncs run's journal on the daemon.
func (c *Client) SyncRun(ctx context.Context, run, lease string) error {
	return c.Call(ctx, "run.sync", wire.RunLeaseParams{Run: run, Lease: lease}, nil)
}

// CloseRun releases run's journal (synced first).
func (c *Client) CloseRun(ctx context.Context, run, lease string) error {
	return c.Call(ctx, "run.close", wire.RunLeaseParams{Run: run, Lease: lease}, nil)
}

// ListRuns summarises the daemon's runs, oldest first.
func (c *Client) ListRuns(ctx context.Context) ([]wire.RunSummary, error) {
	var r wire.RunListResult
	if err := c.Call(ctx, "run.list", struct{}{}, &r); err != nil {
		return nil, fmt.Errorf("run.list: %w", err)
	}
	return r.Runs, nil
}

// Append is a run.append sent whose answer may not have come yet.
type Append struct {
	c  *Client
	id uint64
	cl *call
}

// Answered reports whether the daemon's answer came, without waiting.
func (a *Append) Answered() bool {
	select {
	case <-a.cl.done:
		return true
	default:
		return false
	}
}

// Wait waits for the answer: the number of records the journal holds.
func (a *Append) Wait(ctx context.Context) (int, error) {
	res, err := a.c.await(ctx, a.id, a.cl)
	if err != nil {
		return 0, err
	}
	var r wire.RunAppendResult
	if err := decodeResult(res, &r); err != nil {
		return 0, fmt.Errorf("run.append: decode result: %w", err)
	}
	return r.Count, nil
}

// AppendOptions says how AppendRunAsync sends a run.append.
type AppendOptions struct {
	// Sync asks the daemon to fsync the journal before it answers.
	Sync bool
	// Ahead holds the request back, where the connection allows it (a
	// Unix socket, ssh), until the client's next request goes out on the
	// same connection: both go in one write, and the daemon reads them in
	// one wake-up. For records that must reach the daemon before an
	// effect whose request is the caller's next: a runner that dies
	// before that request never made it either. Waiting for any answer,
	// and SendHeld, write it too.
	Ahead bool
}

// AppendRunAsync is a run.append that does not wait for its answer: once
// it returns the request is sent (on a Unix socket: in the daemon's
// kernel; after a reconnect, sent again), or, with Ahead, goes with the
// next request. Answers are read by whoever waits for any call, or by the
// client's reader: Wait for each, in order, or the client keeps the call
// pending.
func (c *Client) AppendRunAsync(ctx context.Context, run, lease string, at int, recs []json.RawMessage, opt AppendOptions) (*Append, error) {
	raw := appendParams(run, lease, at, recs, opt.Sync)
	// Lazy: a runner appends before and after every effect and waits
	// for the answers seldom; a reader woken for each cost more than the
	// journal's own work.
	id, cl, err := c.startCall(ctx, &call{method: "run.append", params: raw, retry: retryable["run.append"], lazy: true, ahead: opt.Ahead,
		done: make(chan struct{})})
	if err != nil {
		return nil, err
	}
	return &Append{c: c, id: id, cl: cl}, nil
}

// SendHeld writes the requests held back for the next one (AppendOptions.Ahead), if any.
func (c *Client) SendHeld() error {
	c.mu.Lock()
	l := c.cur
	c.mu.Unlock()
	if h, ok := l.(holder); ok {
		return h.flushHeld()
	}
	return nil
}

// appendParams encodes run.append's params as json.Marshal of
// wire.RunAppendParams does, but with the records copied as they are:
// they are json.Marshal's output already, and encoding/json checks and
// compacts every json.RawMessage again, on the path of every effect of a
// durable run.
func appendParams(run, lease string, at int, recs []json.RawMessage, sync bool) []byte {
	size := len(run) + len(lease) + 64
	for _, rec := range recs {
		size += len(rec) + 1
	}
	b := make([]byte, 0, size)
	b = append(b, `{"run":`...)
	b = wire.AppendJSONString(b, run)
	b = append(b, `,"lease":`...)
	b = wire.AppendJSONString(b, lease)
	b = append(b, `,"at":`...)
	b = strconv.AppendInt(b, int64(at), 10)
	b = append(b, `,"records":[`...)
	for i, rec := range recs {
		if i > 0 {
			b = append(b, ',')
		}
		b = append(b, rec...)
	}
	b = append(b, ']')
	if sync {
		b = append(b, `,"sync":true`...)
	}
	return append(b, '}')
}
