// Package runlog is the file format of a durable run's journal: an
// append-only file per run of length- and CRC-32C-framed JSON records
// (frame.go), a torn tail dropped and cut off before anything is appended
// again, the writer's flock, and the summaries `sous runs` lists. It is
// the byte layer under runtime/journal (the journals sous keeps itself,
// sous run --journal DIR) and the daemon's run.* extension (the journals
// a standalone daemon keeps under its state directory), so both read and
// write the same files. It imports only daemon/wire, whose RunRecord and
// RunSummary its Record and Summary are.
package runlog
