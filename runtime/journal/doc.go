// Package journal keeps the journal of a durable run (sous run --journal):
// an append-only file per run of length- and CRC-framed JSON records
// (frame.go), locked by its runner while it runs.
//
// Why an append-only log rather than bbolt or SQLite: a run's journal is
// written in order and only read whole, from the start, when the run is
// resumed; it never needs an index, a query or an update in place. An
// append with one fsync before each effect is the least a crash-safe
// record needs, a torn tail is found by the frame's length and checksum,
// and the file needs no dependency, no page cache of its own, and no
// compaction (daemon/runlog stores the records through a mapped window
// of the file's end rather than a write(2) each: its window.go says
// why). bbolt would rewrite pages (and take the whole file's lock for a
// single writer anyway); SQLite would bring cgo or a large pure-Go port
// for a table that is only ever appended to.
package journal
