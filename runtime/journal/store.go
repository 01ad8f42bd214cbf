package journal

// Log is one run's journal, open for appending by its runner, who holds
// it (its lock) until Close.
type Log interface {
	// Append writes a record at the end. Once it returns, a runner
	// killed at any point loses nothing of it; the disk may not have it
	// yet (Sync).
	Append(Record) error
	// Sync makes what was appended durable against the machine's crash.
	Sync() error
	// Close syncs and releases the journal. Closing again does nothing.
	Close() error
}

// Store keeps the journals of durable runs: a directory (Dir) for runs
// on the embedded daemon, or a daemon's state directory for the runs
// that daemon serves.
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

// Dir is a Store of one file per run in a directory (Path).
type Dir struct {
	Path string
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
	w.CrashAfter, w.Torn = d.Fault.CrashAfter, d.Fault.Torn
	return w, nil
}

func (d Dir) Open(run string) (Log, []Record, error) {
	w, recs, err := Open(d.Path, run)
	if err != nil {
		return nil, nil, err
	}
	w.CrashAfter, w.Torn = d.Fault.CrashAfter, d.Fault.Torn
	return w, recs, nil
}

func (d Dir) List() ([]Summary, error) { return List(d.Path) }

func (d Dir) String() string { return d.Path }
