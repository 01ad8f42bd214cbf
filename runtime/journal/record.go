package journal

import (
	"encoding/json"
	"time"
)

// The kinds of record, in the order a run writes them: one KindRun first,
// then a KindCall for each builtin call the run journals, each followed by
// its KindAnswer once the call returned, and a KindEnd when the run ended.
const (
	KindRun    = "run"
	KindCall   = "call"
	KindAnswer = "answer"
	KindEnd    = "end"
	// KindPrint follows each line the recipe printed: a resumed run
	// does not print again as many lines as the journal has of them.
	KindPrint = "print"
)

// What a journaled call is, said in its KindCall record.
const (
	// CallEffect acts on the world (runs a command, writes a file): the
	// journal is synced before it starts, so that every answer before it
	// is on disk before anything else is done.
	CallEffect = "effect"
	// CallAnswer only reads (the clock, the environment, a file): its
	// answer is kept, but nothing is synced for it.
	CallAnswer = "answer"
	// CallLive returns a live object (a Pending turn) or acts on a
	// session in a way this version cannot replay: a journal with one is
	// not resumed.
	CallLive = "live"
)

// Record is one entry of a journal; Kind says which fields it uses.
type Record struct {
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
	// of them for messages, what it is (CallEffect...) and when it
	// started (At). KindAnswer: Seq names the call answered.
	Seq  int    `json:"seq,omitempty"`
	Fn   string `json:"fn,omitempty"`
	File string `json:"file,omitempty"`
	Line int    `json:"line,omitempty"`
	Hash string `json:"hash,omitempty"`
	Show string `json:"show,omitempty"`
	Call string `json:"call,omitempty"`
	// Within is the call a KindCall (or a KindPrint) was made in (its
	// Seq), 0 for a call of the recipe's own: a policy, hook or tool the recipe gave a
	// session runs while that session's send does. A resumed run that
	// answers the send from the journal does not make those calls.
	Within int `json:"within,omitempty"`
	// Host is the daemon the call acted on when that daemon outlives the
	// runner (a socket, ssh or ws target); "" for the embedded daemon.
	Host string `json:"host,omitempty"`

	// KindAnswer: the value returned (see runtime's value codec), or the
	// error's message when Failed.
	Value  json.RawMessage `json:"value,omitempty"`
	Failed bool            `json:"failed,omitempty"`
	Error  string          `json:"error,omitempty"`
	// Unkept says why the value was not kept (a type the journal cannot
	// hold): the call is not replayed, so its run is not resumed.
	Unkept string `json:"unkept,omitempty"`
	// Mark is what a live object (a process) had shown of its output when
	// the call on it returned: a resumed run does not show it again.
	Mark int64 `json:"mark,omitempty"`

	// KindEnd: how the run ended (an end event's status) and its exit code.
	Status string `json:"status,omitempty"`
	Code   int    `json:"code,omitempty"`
}
