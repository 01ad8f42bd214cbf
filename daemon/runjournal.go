package daemon

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"sync"
	"time"

	"github.com/seed5ad92d46/sous/daemon/runlog"
	"github.com/seed5ad92d46/sous/daemon/wire"
)

// The run.* extension (docs/PROTOCOL.md §6.24): the daemon keeps the
// journals of the durable runs that act on it, one runlog file per run
// under STATE/runs, so that `sous resume` continues a run from any client
// after its runner died.
//
// Who may write a run's journal: the connection that created it or took
// it over (run.open), for as long as that connection lasts. The daemon
// releases it when the connection goes, however it goes, so a runner
// killed with SIGKILL leaves its run resumable at once: once every request
// that came on the connection was handled (conn.serve), so the records a
// runner wrote just before it died are in the journal, in the order sent
// (run.append takes its turn as process.stdin does). The runner chose
// a lease (a random token) when it took the journal; presenting it again
// on a new connection (the client's automatic reconnect resends run.*
// requests) takes the journal back, unless another client took the run
// over since with a lease of its own: then it is CodeRunLeaseLost, and
// that runner stops. The leases are the daemon's memory: after a daemon
// restart a run is taken over with run.open, never re-taken.

// runJournalSyncEvery is how often, at most, a held journal is fsynced
// in the background when something was appended (group commit): a
// record that reached the daemon survives the runner's death and the
// daemon's at once, and the machine's crash within this time.
const runJournalSyncEvery = 100 * time.Millisecond

// runJournals are the journals of one daemon.
type runJournals struct {
	dir string // Config.RunsDir: STATE/runs

	mu   sync.Mutex
	runs map[string]*heldRun // the runs whose lease the daemon knows
}

// heldRun is a run's journal as the daemon knows it: its lease, and, while
// a connection holds it, that connection and the open file.
type heldRun struct {
	mu     sync.Mutex // one request of the run at a time
	lease  string
	holder *Session       // nil: no connection holds it
	w      *runlog.Writer // open while held
	count  int            // records in the journal
	// closed says the lease's runner closed the run (run.close): a late
	// request under that lease (one a cut connection still carried) is
	// applied, but takes the run no more.
	closed bool
}

func newRunJournals(dir string) *runJournals {
	return &runJournals{dir: dir, runs: make(map[string]*heldRun)}
}

// get returns the run's state, made on first use.
func (rj *runJournals) get(run string) *heldRun {
	rj.mu.Lock()
	defer rj.mu.Unlock()
	hr := rj.runs[run]
	if hr == nil {
		hr = &heldRun{}
		rj.runs[run] = hr
	}
	return hr
}

// release lets go of every journal se holds: its connection is gone.
func (rj *runJournals) release(se *Session) {
	rj.mu.Lock()
	runs := make([]*heldRun, 0, len(rj.runs))
	for _, hr := range rj.runs {
		runs = append(runs, hr)
	}
	rj.mu.Unlock()
	for _, hr := range runs {
		hr.mu.Lock()
		if hr.holder == se {
			hr.letGo()
		}
		hr.mu.Unlock()
	}
}

// closeAll lets go of every journal: the daemon stops.
func (rj *runJournals) closeAll() {
	rj.mu.Lock()
	defer rj.mu.Unlock()
	for _, hr := range rj.runs {
		hr.mu.Lock()
		hr.letGo()
		hr.mu.Unlock()
	}
}

// letGo syncs and closes the journal, which releases its flock. hr.mu held.
func (hr *heldRun) letGo() {
	if hr.w != nil {
		hr.w.Close() // an error has nobody to tell; the next open reads what is there
		hr.w = nil
	}
	hr.holder = nil
}

// take makes se the holder of the run's journal by lease, opening it
// again when it was let go. hr.mu held.
func (rj *runJournals) take(hr *heldRun, se *Session, run, lease string) error {
	if hr.lease == "" || hr.lease != lease {
		return wire.Errorf(wire.CodeRunLeaseLost, "run %s: the lease is not the run's: another client took the run over (or the daemon restarted)", run)
	}
	if hr.holder == se {
		return nil
	}
	// The same lease on another connection: the runner reconnected, maybe
	// before the daemon saw its old connection go. Or a request of a
	// connection that closed (the runner wrote it and died, or reconnected
	// and sent it again): it is applied all the same, but it takes nothing
	// from a live one, and a closed connection never becomes the holder.
	// Once the run was let go (run.close, or the holder's connection
	// went), such a late request opens the journal only for itself (see
	// letGoUnheld): holding it would refuse the next run.open as busy. So
	// does any request of a run its runner closed: it can only be one a
	// cut connection carried, whose end the daemon has not seen yet.
	// Nor does a request of an older connection take the run from a
	// newer one: the runner's reconnect is the newer, and the older one
	// is cut, though its end may not have reached the daemon yet (a late
	// request it carried took the run back, and the runner's run.close
	// was refused as busy).
	if hr.w == nil {
		w, recs, err := runlog.Open(rj.dir, run)
		if err != nil {
			return runError(run, err)
		}
		w.SyncEvery(runJournalSyncEvery)
		hr.w, hr.count = w, len(recs)
	}
	if se.ctx.Err() == nil && !hr.closed && (hr.holder == nil || hr.holder.ctx.Err() != nil || se.seq > hr.holder.seq) {
		hr.holder = se
	}
	return nil
}

// letGoUnheld closes the journal a late request of a closed connection
// opened for itself (take). hr.mu held.
func (hr *heldRun) letGoUnheld() {
	if hr.holder == nil {
		hr.letGo()
	}
}

func runError(run string, err error) error {
	switch {
	case errors.Is(err, runlog.ErrBusy):
		return wire.Errorf(wire.CodeRunBusy, "run %s: %v", run, err)
	case errors.Is(err, runlog.ErrNoRun):
		return wire.Errorf(wire.CodeRunUnknown, "run %s: no journal on this daemon", run)
	}
	return wire.Internal(fmt.Errorf("run %s: %w", run, err))
}

// runMethod checks the feature and decodes params for one of the run.*
// methods.
func runMethod[P any](name string, f func(context.Context, *Session, *runJournals, P) (any, error)) handler {
	return func(ctx context.Context, se *Session, raw json.RawMessage) (any, func(), error) {
		if !se.s.enabled(wire.FeatureRunJournal) {
			return nil, nil, wire.Errorf(wire.CodeMethodNotFound, "Unknown method: run.%s", name)
		}
		var p P
		if _, isNone := any(p).(struct{}); !isNone {
			var err error
			if p, err = decodeRunParams[P](raw); err != nil { // fastrunappend.go
				return nil, nil, err
			}
		}
		r, err := f(ctx, se, se.s.runs, p)
		return r, nil, err
	}
}

func runNamespace() map[string]handler {
	return map[string]handler{
		"create": runMethod("create", func(_ context.Context, se *Session, rj *runJournals, p wire.RunCreateParams) (any, error) {
			run := p.Head.Run
			if p.Lease == "" || p.Head.Kind != runlog.KindRun {
				return nil, wire.InvalidParams("run.create: lease and a head of kind \"run\" are required")
			}
			hr := rj.get(run)
			hr.mu.Lock()
			defer hr.mu.Unlock()
			if hr.lease == p.Lease {
				// A resend: the first one created it.
				err := rj.take(hr, se, run, p.Lease)
				hr.letGoUnheld()
				return okResult{true}, err
			}
			if _, err := os.Stat(runlog.Path(rj.dir, run)); err == nil || hr.lease != "" {
				return nil, wire.Errorf(wire.CodeRunExists, "run %s: the daemon has a journal of that run already", run)
			}
			w, err := runlog.Create(rj.dir, p.Head)
			if err != nil {
				return nil, wire.InvalidParams(err.Error())
			}
			w.SyncEvery(runJournalSyncEvery)
			hr.lease, hr.holder, hr.w, hr.count, hr.closed = p.Lease, se, w, 1, false
			return okResult{true}, nil
		}),
		"open": runMethod("open", func(_ context.Context, se *Session, rj *runJournals, p wire.RunLeaseParams) (any, error) {
			if p.Lease == "" {
				return nil, wire.InvalidParams("run.open: run and lease are required")
			}
			hr := rj.get(p.Run)
			hr.mu.Lock()
			defer hr.mu.Unlock()
			if hr.holder != nil && hr.lease != p.Lease {
				return nil, runError(p.Run, runlog.ErrBusy)
			}
			// Taken over (or a resend of this open): read it afresh, a torn
			// tail cut off.
			hr.letGo()
			w, recs, err := runlog.Open(rj.dir, p.Run)
			if err != nil {
				return nil, runError(p.Run, err)
			}
			w.SyncEvery(runJournalSyncEvery)
			hr.lease, hr.holder, hr.w, hr.count, hr.closed = p.Lease, se, w, len(recs), false
			return wire.RunOpenResult{Records: recs}, nil
		}),
		"append": runMethod("append", func(ctx context.Context, se *Session, rj *runJournals, p wire.RunAppendParams) (any, error) {
			if t := ticketOf(ctx); t != 0 {
				// After the appends the connection sent before this one, even
				// when it closed meanwhile: they wait only on requests being
				// handled, which end.
				se.order.wait(context.WithoutCancel(ctx), t, "\x00run "+p.Run)
			}
			hr := rj.get(p.Run)
			hr.mu.Lock()
			defer hr.mu.Unlock()
			if err := rj.take(hr, se, p.Run, p.Lease); err != nil {
				return nil, err
			}
			defer hr.letGoUnheld()
			switch {
			case p.At < 0 || p.At > hr.count:
				return nil, wire.InvalidParams(fmt.Sprintf("run.append: at %d, but the journal holds %d records", p.At, hr.count))
			case p.At+len(p.Records) > hr.count:
				for i, r := range p.Records {
					if !isObject(r) {
						return nil, wire.InvalidParams(fmt.Sprintf("run.append: record %d is not a JSON object", i+1))
					}
				}
				// What a resend brings again (an append applied before the
				// connection dropped) is not appended twice.
				if err := hr.w.AppendEncoded(p.Records[hr.count-p.At:]); err != nil {
					return nil, wire.Internal(fmt.Errorf("run %s: %w", p.Run, err))
				}
				hr.count = p.At + len(p.Records)
			}
			if p.Sync {
				if err := hr.w.Sync(); err != nil {
					return nil, wire.Internal(fmt.Errorf("run %s: %w", p.Run, err))
				}
			}
			return wire.RunAppendResult{Count: hr.count}, nil
		}),
		"sync": runMethod("sync", func(_ context.Context, se *Session, rj *runJournals, p wire.RunLeaseParams) (any, error) {
			hr := rj.get(p.Run)
			hr.mu.Lock()
			defer hr.mu.Unlock()
			if err := rj.take(hr, se, p.Run, p.Lease); err != nil {
				return nil, err
			}
			defer hr.letGoUnheld()
			if err := hr.w.Sync(); err != nil {
				return nil, wire.Internal(fmt.Errorf("run %s: %w", p.Run, err))
			}
			return okResult{true}, nil
		}),
		"close": runMethod("close", func(_ context.Context, se *Session, rj *runJournals, p wire.RunLeaseParams) (any, error) {
			hr := rj.get(p.Run)
			hr.mu.Lock()
			defer hr.mu.Unlock()
			if hr.lease == "" || hr.lease != p.Lease {
				return nil, wire.Errorf(wire.CodeRunLeaseLost, "run %s: the lease is not the run's: another client took the run over (or the daemon restarted)", p.Run)
			}
			if hr.holder != nil && hr.holder != se && hr.holder.ctx.Err() == nil {
				return nil, runError(p.Run, runlog.ErrBusy)
			}
			hr.letGo() // closing twice (a resend) closes once
			hr.closed = true
			return okResult{true}, nil
		}),
		"list": runMethod("list", func(_ context.Context, _ *Session, rj *runJournals, _ struct{}) (any, error) {
			runs, err := runlog.List(rj.dir)
			if err != nil {
				return nil, wire.Internal(err)
			}
			if runs == nil {
				runs = []runlog.Summary{}
			}
			return wire.RunListResult{Runs: runs}, nil
		}),
	}
}

// isObject reports whether r, valid JSON, is an object.
func isObject(r json.RawMessage) bool {
	r = bytes.TrimLeft(r, " \t\r\n")
	return len(r) > 0 && r[0] == '{'
}
