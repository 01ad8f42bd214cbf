package client

import (
	"context"
	"encoding/json"
	"fmt"

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

// AppendRun appends recs (wire.RunRecord objects, encoded) after the
// first at records of run's journal, fsynced before it answers when sync
// is set; it returns how many records the journal holds.
func (c *Client) AppendRun(ctx context.Context, run, lease string, at int, recs []json.RawMessage, sync bool) (int, error) {
	var r wire.RunAppendResult
	err := c.Call(ctx, "run.append", runAppendParams{Run: run, Lease: lease, At: at, Records: recs, Sync: sync}, &r)
	return r.Count, err
}

// runAppendParams is wire.RunAppendParams with its records encoded
// already: the caller measured them to fit a request.
type runAppendParams struct {
	Run     string            `json:"run"`
	Lease   string            `json:"lease"`
	At      int               `json:"at"`
	Records []json.RawMessage `json:"records"`
	Sync    bool              `json:"sync,omitempty"`
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

// AppendRunAsync is AppendRun without waiting for the answer: once it
// returns the request is sent (on a Unix socket: in the daemon's kernel;
// after a reconnect, sent again), and wait returns the answer. Answers
// are read in order by whoever waits; wait for each.
func (c *Client) AppendRunAsync(ctx context.Context, run, lease string, at int, recs []json.RawMessage, sync bool) (wait func() (int, error), err error) {
	raw, err := json.Marshal(runAppendParams{Run: run, Lease: lease, At: at, Records: recs, Sync: sync})
	if err != nil {
		return nil, fmt.Errorf("run.append: encode params: %w", err)
	}
	id, cl, err := c.start(ctx, "run.append", raw, nil)
	if err != nil {
		return nil, err
	}
	return func() (int, error) {
		res, err := c.await(ctx, id, cl)
		if err != nil {
			return 0, err
		}
		var r wire.RunAppendResult
		if err := decodeResult(res, &r); err != nil {
			return 0, fmt.Errorf("run.append: decode result: %w", err)
		}
		return r.Count, nil
	}, nil
}
