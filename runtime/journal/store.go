package journal

import (
	"time"

	"github.com/seed5ad92d46/sous/daemon/client"
)

// Log is one run's journal, open for appending by its runner, who holds
// it (its lock) until Close.
type Log interface {
	// Append adds a record at the end. The file store writes it at once
	// (a runner killed after it returns loses nothing of it); the daemon
	// store sends it with the next Sync or Flush, or a later Append (a
	// reading call's record within a few milliseconds). Sync waits for it
	// either way.
	Append(Record) error
	// Flush returns once everything appended is where the runner's
	// death cannot lose it, as Sync does, but never waits for a disk.
	Flush() error
	// Sync returns once everything appended is where the runner's death
	// cannot lose it (in the kernel of the machine that keeps the
	// journal), and, with SyncAlways, on its disk too. The runtime syncs
	// before every call with an effect.
	Sync() error
	// Close syncs to disk and releases the journal. Closing again does
	// nothing.
	Close() error
}

// Ahead is a Log kept by a daemon that can send its records with the
// caller's next request to that daemon (Daemon's, over a Unix socket).
type Ahead interface {
	// SyncAhead is Sync for an effect whose first request goes over the
	// connection over, the caller's next request there: what waits goes
	// in the same write as that request, and not before it. A runner
	// that dies before the request never made it either. It reports
	// false, having done nothing, when it cannot: the caller syncs.
	SyncAhead(over *client.Client) (bool, error)
}

// Store keeps the journals of durable runs: a directory (Dir) for runs
// on the embedded daemon, or a standalone daemon's state directory
// (Daemon) for the runs that daemon serves.
type Store interface {
	// Create starts the journal of a new run with its KindRun record.
	Create(head Record) (Log, error)
	// Open takes over the journal of a run to continue it: ErrBusy while
	// its runner holds it, ErrNoRun when the store has no such run. The
	// records are the journal's, a torn last one dropped.
	Open(run string) (Log, []Record, error)
	// List summarises the store's journals, oldest first.
	List() ([]Summary, error)
	// String names the store in messages: "no journal in STORE".
	String() string
}

// GroupCommit is how often, at most, a journal is fsynced in the
// background when something was appended, unless the store syncs always
// (sous run --journal-sync): the daemon's run.* extension does the same.
const GroupCommit = 100 * time.Millisecond

// Dir is a Store of one file per run in a directory (Path).
type Dir struct {
	Path string
	// SyncAlways fsyncs the journal at every Sync (before every effect),
	// rather than in the background within GroupCommit.
	SyncAlways bool
	// Fault, when set, crashes the runner at a chosen point of the logs
	// it creates or opens (SOUS_FAULT_JOURNAL, for tests).
	Fault Fault
}

// Fault kills the process with SIGKILL right after the CrashAfter-th
// record a Log appends (0: never); Torn leaves that record half written.
type Fault struct {
	CrashAfter int
	Torn       bool
}

func (d Dir) Create(head Record) (Log, error) {
	w, err := Create(d.Path, head)
	if err != nil {
		return nil, err
	}
	return d.log(w), nil
}

func (d Dir) Open(run string) (Log, []Record, error) {
	w, recs, err := Open(d.Path, run)
	if err != nil {
		return nil, nil, err
	}
	return d.log(w), recs, nil
}

func (d Dir) log(w *Writer) Log {
	w.CrashAfter, w.Torn = d.Fault.CrashAfter, d.Fault.Torn
	if !d.SyncAlways {
		w.SyncEvery(GroupCommit)
	}
	return fileLog{w: w, always: d.SyncAlways}
}

func (d Dir) List() ([]Summary, error) { return List(d.Path) }

func (d Dir) String() string { return d.Path }

// fileLog is a Log on a file this process writes: an append reaches the
// kernel at once, so Sync has only the disk to care for, and only when
// the store syncs always (else the writer's group commit does).
type fileLog struct {
	w      *Writer
	always bool
}

func (l fileLog) Append(r Record) error { return l.w.Append(r) }

func (l fileLog) Flush() error { return nil } // Append wrote it

func (l fileLog) Sync() error {
	if l.always {
		return l.w.Sync()
	}
	return nil
}

func (l fileLog) Close() error { return l.w.Close() }
