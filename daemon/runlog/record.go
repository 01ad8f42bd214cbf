package runlog

import "github.com/seed5ad92d46/sous/daemon/wire"

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

// Record is one entry of a journal; Kind says which fields it uses. It
// is the protocol's type: the run.* methods carry records as they are.
type Record = wire.RunRecord
