package runtime

import "github.com/seed5ad92d46/sous/runtime/event"

// Shard is one part of a run split across a CI matrix: the run does the
// items of a fan-out whose index % Count == Index.
type Shard struct {
	Index, Count int
}

// orWhole is s, or the whole run (index 0 of 1) for the zero value.
func (s Shard) orWhole() Shard {
	if s.Count <= 0 {
		return Shard{Index: 0, Count: 1}
	}
	return s
}

// Mine reports whether the item at index i belongs to this shard.
func (s Shard) Mine(i int) bool {
	s = s.orWhole()
	return i%s.Count == s.Index
}

// ProgressInfo is where one parallel() call stands. Done counts the tasks
// that ended (Failed of them failed), Running those started and not ended,
// Remaining those not started yet; Total is what this shard runs.
// LostHost, when set, says why the counts moved back: a host of the
// call's pool was lost for good and Moved of its tasks wait to start
// again on the others.
type ProgressInfo struct {
	Done, Running, Failed, Remaining, Total int
	LostHost                                *LostHost
}

// LostHost is a host taken out of a parallel() pool: its target, why
// (the connection's last error) and how many of its tasks start again
// elsewhere.
type LostHost struct {
	Target string
	Error  string
	Moved  int
}

// Progress implements Output: a parallel event in --json mode. Human
// output shows nothing of the counts (a line per task ending would drown
// the tasks' own output), only a lost host.
func (o *output) Progress(p ProgressInfo) {
	e := &event.Progress{Done: p.Done, Running: p.Running, Failed: p.Failed, Remaining: p.Remaining, Total: p.Total}
	if l := p.LostHost; l != nil {
		e.LostHost = &event.LostHost{Target: l.Target, Error: l.Error, Moved: l.Moved}
	}
	o.bus.Publish(e)
}
