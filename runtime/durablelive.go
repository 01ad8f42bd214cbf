package runtime

import (
	"strconv"

	"go.starlark.net/starlark"
)

// Live objects in a durable run (durable.go): a process a run started
// goes on without its runner on a daemon that outlives it, so a resumed
// run rebuilds its handle from the journal (a Recordable value), answers
// the calls on it that the journal holds, and takes the process over at
// the first call the journal does not answer. What the builtins need
// from the journal for that is here: a stable id per call to name what
// it starts, how far a process's output was shown, the key of a handle
// in a call's arguments, and a way to stop a resume that would do again
// what it cannot take over.

// Keyed is a live value whose identity in a journal's call keys is
// JournalKey rather than its String, which shows its state (a process
// "running" when the call was made, "exit_code=0" on resume).
type Keyed interface {
	JournalKey() string
}

// Marked is a live value that keeps a mark with the answer of each call
// on it: how much of its output it had shown when the call started. (The
// output a process echoes is held until the recipe's next builtin call,
// and a line until its end: what it received is not yet shown, what it
// had received when the next call started is.) A resumed run hands each
// replayed mark back, in order.
type Marked interface {
	JournalMark() int64
	ReplayMark(int64)
}

// TakingOver is a live value rebuilt from a journal that must take its
// object over before a call on it the journal does not answer: the
// journal asks it before it records the call, so that a resume that
// cannot take it over stops with the journal as it was. It is asked
// before a replayed call too, where it may replay a step of its own.
type TakingOver interface {
	TakeOver(c *Call) error
}

func takeOver(c *Call) error {
	if t, ok := c.Recv.(TakingOver); ok {
		return t.TakeOver(c)
	}
	return nil
}

func recvKey(v starlark.Value) string {
	if k, ok := v.(Keyed); ok {
		return k.JournalKey()
	}
	return v.String()
}

// markOf is the mark of the live value a call acts on.
func markOf(c *Call) int64 {
	if m, ok := c.Recv.(Marked); ok {
		return m.JournalMark()
	}
	return 0
}

// replayMark hands a replayed answer's mark back to the live value.
func replayMark(c *Call, mark int64) {
	if m, ok := c.Recv.(Marked); ok {
		m.ReplayMark(mark)
	}
}

func journalID(run string, seq int) string { return run + "-" + strconv.Itoa(seq) }

// NewProcessID is the id of the next process the call starts, stable
// across resumes, so that a resume can find it on a daemon that outlives
// the runner: "sous-RUN-SEQ-N". It is "" in a run without a journal.
func (c *Call) NewProcessID() string {
	if c.JournalID == "" {
		return ""
	}
	c.started++
	return "sous-" + c.JournalID + "-" + strconv.Itoa(c.started)
}

// StopResume stops a resumed run that cannot go on without doing again
// what it did (exit code 2, nothing more runs, deferred calls included),
// as a recipe changed since the run does; msg says why. Outside a
// durable run it is an ordinary error.
func (c *Call) StopResume(msg string) error {
	j := c.Env.Journal
	if j == nil {
		return c.Errorf("%s", msg)
	}
	if j.changed == nil {
		j.changed = &ResumeStopped{Msg: "run " + j.run + ": " + msg}
	}
	return j.changed
}

// Outlives reports whether h's daemon outlives the runner (a socket, ssh
// or ws daemon): its processes go on when the runner dies.
func (h *Host) Outlives() bool { return outliving(h) != "" }

// JournalStep journals fn as a call named name on c.Recv with c.Args, as
// a builtin's call is, for what a recipe asks of a live value without
// calling a builtin: the next line of a lines() iteration. Without a
// journal it calls fn.
func JournalStep(c *Call, kind Journaling, fn Func) (starlark.Value, error) {
	if c.Env.Journal == nil {
		return fn(c)
	}
	return c.Env.Journal.call(c, &Entry{Name: c.Name, Journal: kind, Fn: fn})
}

// JournalCall journals c as a call of entry e would be, for a builtin
// that makes another builtin's call on the recipe's behalf (wait_all takes
// each turn as its Pending.wait), so that the journal holds what the
// recipe would have called. Without a journal it calls e.Fn.
func JournalCall(c *Call, e *Entry) (starlark.Value, error) {
	c.Name = e.Name
	if c.Env.Journal == nil || e.Journal == JournalPure {
		return e.Fn(c)
	}
	return c.Env.Journal.call(c, e)
}

// Notice writes a line on stderr about the resume (a process that runs
// again); outside a durable run it does nothing.
func (c *Call) Notice(msg string) {
	if j := c.Env.Journal; j != nil {
		j.notice(msg)
	}
}

// Resuming reports whether the journal still answers calls: a resumed
// run that has not caught up with what its runner did.
func (c *Call) Resuming() bool {
	j := c.Env.Journal
	return j != nil && j.next < len(j.calls)
}

// NextJournaled names the call the journal answers next, as its builtin
// and the rendering of its arguments ("", "" once the journal ended): a
// live value that journals steps of its own (a session's resume) replays
// one only where the journal has it.
func (c *Call) NextJournaled() (fn, show string) {
	j := c.Env.Journal
	if j == nil || j.next >= len(j.calls) {
		return "", ""
	}
	rc := j.calls[j.next].call
	return rc.Fn, rc.Show
}

// within is the call under way that a call made now is made in (0: none):
// a policy, hook or tool of a session runs on the recipe thread while the
// session's send waits. Those calls are journaled as made in it and a
// resume that answers the send from the journal does not make them; one
// that does the send again makes them anew.
func (j *Journal) within() int {
	if len(j.active) == 0 {
		return 0
	}
	return j.active[len(j.active)-1]
}
