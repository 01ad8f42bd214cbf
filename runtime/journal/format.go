package journal

import (
	"encoding/json"

	"github.com/seed5ad92d46/sous/daemon/runlog"
)

// The file format, its records and its summaries are daemon/runlog's, so
// that a journal sous keeps (Dir) and one a standalone daemon keeps under
// its state directory (Daemon) are the same file.

type (
	// Record is one entry of a journal; Kind says which fields it uses.
	Record = runlog.Record
	// Summary is what `sous runs` says of one journal.
	Summary = runlog.Summary
	// Writer appends to one run's journal file, holding its flock.
	Writer = runlog.Writer
)

// The kinds of record (runlog.KindRun...).
const (
	KindRun    = runlog.KindRun
	KindCall   = runlog.KindCall
	KindAnswer = runlog.KindAnswer
	KindEnd    = runlog.KindEnd
	KindPrint  = runlog.KindPrint
)

// What a journaled call is (runlog.CallEffect...).
const (
	CallEffect = runlog.CallEffect
	CallAnswer = runlog.CallAnswer
	CallLive   = runlog.CallLive
)

// The states of a run (runlog.StateRunning...).
const (
	StateRunning   = runlog.StateRunning
	StateFinished  = runlog.StateFinished
	StateResumable = runlog.StateResumable
	StateStuck     = runlog.StateStuck
)

var (
	// ErrBusy says the run's runner still holds its journal.
	ErrBusy = runlog.ErrBusy
	// ErrNoRun says the store has no journal of that run.
	ErrNoRun = runlog.ErrNoRun
)

// Path is the file of run's journal in dir.
func Path(dir, run string) string { return runlog.Path(dir, run) }

// Create starts the journal of a new run in dir (runlog.Create).
func Create(dir string, head Record) (*Writer, error) { return runlog.Create(dir, head) }

// Open takes over the journal of run in dir (runlog.Open).
func Open(dir, run string) (*Writer, []Record, error) { return runlog.Open(dir, run) }

// List summarises the journals in dir (runlog.List).
func List(dir string) ([]Summary, error) { return runlog.List(dir) }

// Decode reads a journal file's bytes (runlog.Decode).
func Decode(data []byte) ([]Record, int, error) { return runlog.Decode(data) }

// encode is a record as json.Marshal encodes it (Record.AppendJSON).
func encode(r Record) (json.RawMessage, error) {
	return r.AppendJSON(make([]byte, 0, 160+len(r.Value)+len(r.Show)+len(r.File)+len(r.Error)))
}
