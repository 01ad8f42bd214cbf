package wire

import (
	"encoding/json"
	"time"
)

// The run journal extension (docs/PROTOCOL.md §6.24, "run.*"): the daemon
// keeps the journal of a durable run that acts on it, as a file under its
// state directory, so that the run can be resumed from any client of the
// daemon after its runner died. The runner that created (or took over) a
// run's journal holds it for as long as its connection lasts; the lease it
// chose re-takes it after the client's automatic reconnect, unless another
// client took the run over meanwhile (CodeRunLeaseLost).
const FeatureRunJournal = "run.journal"

// RunJournalMethods are the extension's methods, in the order
// server.capabilities lists them.
var RunJournalMethods = []string{"run.create", "run.open", "run.append", "run.sync", "run.close", "run.list"}

// Errors of the run.* methods.
const (
	// CodeRunBusy: another connection holds the run's journal (its runner
	// is alive).
	CodeRunBusy = -32030
	// CodeRunUnknown: the daemon has no journal of that run.
	CodeRunUnknown = -32031
	// CodeRunLeaseLost: the lease presented is not the run's: another
	// client took the run over (run.open) since, or the daemon restarted.
	CodeRunLeaseLost = -32032
	// CodeRunExists: run.create of a run id the daemon has a journal of.
	CodeRunExists = -32033
)

// RunRecord is one entry of a run's journal; Kind says which fields it
// uses (the kinds are runtime/journal's: run, call, answer, print, end).
type RunRecord struct {
	Kind string `json:"k"`

	// KindRun: the run's id, its recipe (an absolute path), args and
	// working directory, and when it started (At).
	Run    string            `json:"run,omitempty"`
	Recipe string            `json:"recipe,omitempty"`
	Args   map[string]string `json:"args,omitempty"`
	Dir    string            `json:"dir,omitempty"`
	At     time.Time         `json:"at,omitzero"`

	// KindCall: the call's number in the run (from 1), the builtin, where
	// the recipe called it, a hash of its arguments and a short rendering
	// of them for messages, what it is (effect, answer, live) and when it
	// started (At). KindAnswer: Seq names the call answered.
	Seq  int    `json:"seq,omitempty"`
	Fn   string `json:"fn,omitempty"`
	File string `json:"file,omitempty"`
	Line int    `json:"line,omitempty"`
	Hash string `json:"hash,omitempty"`
	Show string `json:"show,omitempty"`
	Call string `json:"call,omitempty"`
	// Host is the daemon the call acted on when that daemon outlives the
	// runner (a socket, ssh or ws target); "" for the embedded daemon.
	Host string `json:"host,omitempty"`
	// Within is the call a KindCall (or a KindPrint) was made in (its
	// Seq), 0 for a call of the recipe's own: a policy, hook or tool the
	// recipe gave a session runs while that session's send does. A
	// resumed run that answers the send from the journal does not make
	// those calls.
	Within int `json:"within,omitempty"`

	// KindAnswer: the value returned (see runtime's value codec), or the
	// error's message when Failed.
	Value  json.RawMessage `json:"value,omitempty"`
	Failed bool            `json:"failed,omitempty"`
	Error  string          `json:"error,omitempty"`
	// Unkept says why the value was not kept (a type the journal cannot
	// hold): the call is not replayed, so its run is not resumed.
	Unkept string `json:"unkept,omitempty"`
	// Mark is how far a live object (a process) the call acted on had
	// shown its output when the call started: a resumed run does not
	// show it again.
	Mark int64 `json:"mark,omitempty"`

	// KindEnd: how the run ended (an end event's status) and its exit code.
	Status string `json:"status,omitempty"`
	Code   int    `json:"code,omitempty"`
}

// RunSummary is what `sous runs` says of one journal.
type RunSummary struct {
	Run     string    `json:"run"`
	Recipe  string    `json:"recipe"`
	State   string    `json:"state"`
	Started time.Time `json:"started"`
	// Steps is how many calls the journal holds.
	Steps int `json:"steps"`
	// Status and ExitCode: how a finished run ended.
	Status   string `json:"status,omitempty"`
	ExitCode int    `json:"exit_code,omitempty"`
	// Why says why a stopped run is not resumable.
	Why string `json:"why,omitempty"`
}

// RunCreateParams start the journal of a new run: run.create.
type RunCreateParams struct {
	// Lease is the runner's proof that it holds the journal, chosen by it
	// (random): it re-takes the journal after a reconnect.
	Lease string    `json:"lease"`
	Head  RunRecord `json:"head"` // the run record; Head.Run is the run's id
}

// RunLeaseParams name a run and the lease its runner holds it by:
// run.open, run.sync, run.close.
type RunLeaseParams struct {
	Run   string `json:"run"`
	Lease string `json:"lease"`
}

// RunOpenResult is the journal of the run taken over: its records, a
// torn last one dropped.
type RunOpenResult struct {
	Records []RunRecord `json:"records"`
}

// RunAppendParams append records to a held journal: run.append.
type RunAppendParams struct {
	Run   string `json:"run"`
	Lease string `json:"lease"`
	// At is how many records the journal holds before these: a resend of
	// an append that was applied already is applied once.
	At int `json:"at"`
	// Records are JSON objects, each a RunRecord as the runner encoded
	// it: the daemon writes them as they came, without decoding them
	// into RunRecord and encoding them again (the runner's own fields
	// survive; what it could not read back is its own to find).
	Records []json.RawMessage `json:"records"`
	// Sync asks the daemon to fsync the journal before it answers.
	Sync bool `json:"sync,omitempty"`
}

// RunAppendResult is how many records the journal holds.
type RunAppendResult struct {
	Count int `json:"count"`
}

// RunListResult is run.list's: the daemon's runs, oldest first.
type RunListResult struct {
	Runs []RunSummary `json:"runs"`
}
