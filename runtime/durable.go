package runtime

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"time"
	"unicode/utf8"

	"go.starlark.net/starlark"

	"github.com/seed5ad92d46/sous/daemon/client"
	"github.com/seed5ad92d46/sous/runtime/journal"
)

// A durable run (sous run --journal DIR) journals every builtin call that
// acts on the world or answers from outside it, so that `sous resume`
// can run the recipe again from the top and answer those calls from the
// journal, without doing them again, until the journal ends; then the run
// goes on live. The recipe itself is deterministic Starlark: the same
// answers make it call the same builtins with the same arguments.
//
// Exactly once: a call that acts (JournalEffect) is recorded, and the
// journal synced, before it starts, and its answer is appended when it
// returns. The sync before the next effect makes that answer durable too,
// so a call whose effect another effect followed is never done again. A
// call whose answer is missing was under way when the runner died: it may
// or may not have happened, and is done again, with a notice (the
// processes of the embedded daemon died with the runner; a sleep waits
// only what was left).

// Journaling is what a durable run's journal does with a builtin's calls.
type Journaling int

const (
	// JournalLive: the call returns a live object (a host pool) or
	// acts on one in a way a resume cannot take over; it is recorded, but
	// a journal holding it is not resumed. Processes and sessions are
	// taken over: durablelive.go.
	JournalLive Journaling = iota
	// JournalPure: no effect and no answer from outside (struct-like
	// helpers, defer, parallel): not journaled; what it calls is.
	JournalPure
	// JournalEffect: acts on the world (runs a command, commits); the
	// journal is synced before it starts and its answer is replayed.
	JournalEffect
	// JournalAnswer: only reads from outside (the clock, the environment,
	// a file); its answer is replayed, nothing is synced for it.
	JournalAnswer
)

func (k Journaling) record() string {
	switch k {
	case JournalEffect:
		return journal.CallEffect
	case JournalAnswer:
		return journal.CallAnswer
	}
	return journal.CallLive
}

// JournalOptions make a run durable (Options.Journal).
type JournalOptions struct {
	// Store keeps the journal (journal.Dir: a file per run, named by
	// the run's id).
	Store journal.Store
	// Resumed, when set, is the journal of the run to continue
	// (OpenResume); Options.RunID, Recipe, Args and Dir must be its.
	Resumed *Resumed
}

// Resumed is the journal of a run to resume, opened and locked.
type Resumed struct {
	Run, Recipe, Dir string
	Args             map[string]string
	w                journal.Log
	calls            []replayCall
	printed          int // the lines the run printed
	lastSeq          int // the last call's number, nested ones too (durablelive.go)
}

// replayCall is a call of the journal and its answer (nil: none).
type replayCall struct {
	call   journal.Record
	answer *journal.Record
}

// Close releases the journal when the resume does not go ahead.
func (r *Resumed) Close() error { return r.w.Close() }

// Calls is how many calls the journal answers.
func (r *Resumed) Calls() int { return len(r.calls) }

// OpenResume opens the journal of run in store to resume it. It refuses a
// run whose runner is still alive (it holds the journal's lock), a run
// that finished, and one that this version cannot replay (a live call);
// the error says which, for `sous resume` to report with exit code 2.
func OpenResume(store journal.Store, run string) (*Resumed, error) {
	w, recs, err := store.Open(run)
	switch {
	case errors.Is(err, journal.ErrNoRun):
		return nil, fmt.Errorf("run %s: no journal in %s", run, store)
	case err != nil:
		return nil, fmt.Errorf("run %s: %w", run, err)
	}
	head := recs[0]
	res := &Resumed{Run: run, Recipe: head.Recipe, Dir: head.Dir, Args: head.Args, w: w}
	bySeq := make(map[int]int)
	nested := make(map[int]bool)
	refuse := func(format string, args ...any) (*Resumed, error) {
		w.Close()
		return nil, fmt.Errorf("run %s: "+format, append([]any{run}, args...)...)
	}
	for _, r := range recs[1:] {
		switch r.Kind {
		case journal.KindCall:
			if r.Call == journal.CallLive {
				return refuse("cannot be resumed: %s called %s, whose live object (a host pool, "+
					"a turn in a fail_fast or pooled parallel()) a resumed run does not take over yet", place(r), r.Fn)
			}
			res.lastSeq = max(res.lastSeq, r.Seq)
			if r.Within != 0 {
				nested[r.Seq] = true // durablelive.go
				continue
			}
			bySeq[r.Seq] = len(res.calls)
			res.calls = append(res.calls, replayCall{call: r})
		case journal.KindAnswer:
			if nested[r.Seq] {
				continue
			}
			i, ok := bySeq[r.Seq]
			if !ok || res.calls[i].answer != nil {
				return refuse("journal: an answer to call %d, which it does not hold", r.Seq)
			}
			if r.Unkept != "" {
				return refuse("cannot be resumed: %s called %s, whose answer the journal could not keep (%s)",
					place(res.calls[i].call), r.Fn, r.Unkept)
			}
			res.calls[i].answer = &r
		case journal.KindPrint:
			if r.Within == 0 { // a policy's print is not made again with its send
				res.printed++
			}
		case journal.KindEnd:
			return refuse("finished (%s, exit code %d): there is nothing to resume", r.Status, r.Code)
		}
	}
	return res, nil
}

func place(r journal.Record) string {
	if r.Line == 0 {
		return "a deferred call"
	}
	return fmt.Sprintf("line %d", r.Line)
}

// Journal is a durable run's journal, which Table's builtins go through
// (Env.Journal). Recipe thread only.
type Journal struct {
	w     journal.Log
	run   string
	calls []replayCall // the resumed journal's calls, answered in order
	next  int          // the next of calls to answer
	seq   int          // the last call's number
	// changed is the error of a resume whose recipe no longer makes the
	// journal's calls: every call after it fails with it, so that nothing
	// runs (not even a deferred call), and the journal is left as it was.
	changed error
	// notice writes a line on stderr.
	notice func(string)
	// unshown is how many of the lines the recipe prints the run before
	// printed already: they are not printed again.
	unshown int
	// active are the calls under way, innermost last: a call made while
	// one runs (a policy's, during a send) is recorded as made in it, and
	// is never answered from the journal (durablelive.go).
	active []int
}

// startJournal creates the journal of a new run, or takes over a
// resumed one.
func startJournal(opt Options, notice func(string)) (*Journal, error) {
	jo := opt.Journal
	if r := jo.Resumed; r != nil {
		j := &Journal{w: r.w, run: r.Run, calls: r.calls, notice: notice, unshown: r.printed, seq: r.lastSeq}
		return j, nil
	}
	// What a resume needs to run the recipe again as it ran: the
	// recipe's absolute path, its args and the directory it ran in.
	recipe, err := filepath.Abs(opt.Recipe)
	if err != nil {
		return nil, fmt.Errorf("--journal: %w", err)
	}
	dir := opt.Dir
	if dir == "" {
		if dir, err = os.Getwd(); err != nil {
			return nil, fmt.Errorf("--journal: %w", err)
		}
	}
	w, err := jo.Store.Create(journal.Record{Kind: journal.KindRun, Run: opt.RunID, Recipe: recipe,
		Args: opt.Args, Dir: dir, At: time.Now().UTC()})
	if err != nil {
		return nil, fmt.Errorf("--journal: %w", err)
	}
	return &Journal{w: w, run: opt.RunID, notice: notice}, nil
}

// Print shows a line the recipe printed with show, unless the run before
// showed it, and journals that it was shown. A runner that dies between
// the two shows it once more; never less.
func (j *Journal) Print(msg string, show func(string)) {
	if j.unshown > 0 {
		j.unshown--
		return
	}
	show(msg)
	// An error here is the next call's error too: that one fails the run.
	// Flushed, not left to go with the next call's record: the window in
	// which a dead runner's line is shown again stays as short as it can.
	if j.w.Append(journal.Record{Kind: journal.KindPrint, Within: j.within()}) == nil {
		_ = j.w.Flush()
	}
}

// ResumeStopped says a resume cannot go on without doing again what may
// have been done: the recipe made another call than the journal holds,
// or the runner died in a call whose work may still go on elsewhere. The
// resume stops (exit code 2) before anything runs, and leaves the journal
// as it was.
type ResumeStopped struct{ Msg string }

func (e *ResumeStopped) Error() string { return e.Msg }

// call makes or replays one builtin call.
func (j *Journal) call(c *Call, e *Entry) (starlark.Value, error) {
	kind, fn := e.Journal, e.Fn
	if j.changed != nil {
		return nil, j.changed
	}
	file, line := callerPlace(c.Thread)
	hash, show := callKey(c)
	if j.next < len(j.calls) && len(j.active) == 0 {
		// A live value may replay a step of its own first (durablelive.go).
		if err := takeOver(c); err != nil {
			return nil, err
		}
	}
	if j.next < len(j.calls) && len(j.active) == 0 {
		rc := j.calls[j.next]
		if rc.call.Fn != c.Name || rc.call.Hash != hash {
			got, had := c.Name+"("+show+")", rc.call.Fn+"("+rc.call.Show+")"
			if rc.call.Fn == c.Name {
				got, had = c.Name+" with other arguments ("+show+")", rc.call.Fn+"("+rc.call.Show+")"
			}
			j.changed = &ResumeStopped{Msg: fmt.Sprintf("recipe changed since run %s: line %d calls %s, the journal has %s",
				j.run, line, got, had)}
			return nil, j.changed
		}
		j.next++
		if rc.answer != nil {
			return j.replay(c, e, rc)
		}
		// The runner died in this call: it runs again, unless it acted on
		// a daemon that outlives the runner, where its process (or its
		// git or files call) may still be going on.
		c.Since, c.JournalID = rc.call.At, journalID(j.run, rc.call.Seq)
		if kind == JournalEffect && rc.call.Host != "" {
			if !e.Rejoin {
				j.changed = &ResumeStopped{Msg: fmt.Sprintf("run %s died in %s at line %d on %s, which may still be doing it: "+
					"a resume does not take it over", j.run, c.Name, line, rc.call.Host)}
				return nil, j.changed
			}
			c.Rejoining = true // durablelive.go
			j.notice(fmt.Sprintf("sous: %s at line %d was under way when run %s's runner died: taking over what it started on %s",
				c.Name, line, j.run, rc.call.Host))
		} else if kind == JournalEffect {
			j.notice(fmt.Sprintf("sous: %s at line %d was under way when run %s's runner died: it runs again",
				c.Name, line, j.run))
		}
		return j.finish(c, rc.call.Seq, kind, fn)
	}
	c.JournalID = journalID(j.run, j.seq+1)
	if err := takeOver(c); err != nil { // durablelive.go
		return nil, err
	}
	j.seq++
	rec := journal.Record{Kind: journal.KindCall, Seq: j.seq, Fn: c.Name, File: file, Line: line, Hash: hash,
		Show: show, Call: kind.record(), Host: outliving(c.Host), At: time.Now().UTC(), Within: j.within()}
	if err := j.w.Append(rec); err != nil {
		return nil, c.Errorf("%v", err)
	}
	if kind == JournalEffect || kind == JournalLive {
		// Before the effect: its record, and every answer before it.
		if err := j.syncBefore(c, e); err != nil {
			return nil, c.Errorf("%v", err)
		}
	}
	return j.finish(c, j.seq, kind, fn)
}

// syncBefore syncs the journal before call c's effect. When the daemon
// that keeps the journal is the one the effect acts on, over the same
// connection, the records go in the same write as the effect's first
// request (journal.Ahead): a host-bound builtin's first request is on its
// host's connection.
func (j *Journal) syncBefore(c *Call, e *Entry) error {
	if a, ok := j.w.(journal.Ahead); ok && e.Host && c.Host != nil {
		if d, err := c.Host.Connect(c.Env.Ctx); err == nil {
			if cd, ok := d.(clientDaemon); ok {
				if done, err := a.SyncAhead(cd.c); done || err != nil {
					return err
				}
			}
		}
	}
	return j.w.Sync()
}

// finish does call seq and appends its answer.
func (j *Journal) finish(c *Call, seq int, kind Journaling, fn Func) (starlark.Value, error) {
	mark := markOf(c) // durablelive.go: what the call's live value had shown as it started
	j.active = append(j.active, seq)
	v, err := fn(c)
	j.active = j.active[:len(j.active)-1]
	var stopped *ResumeStopped
	if kind == JournalLive || c.Env.Ctx.Err() != nil || errors.As(err, &stopped) {
		// A live object is not replayed; an interrupted call did not
		// finish; a resume that stopped did not: none has an answer to
		// keep.
		return v, err
	}
	ans := journal.Record{Kind: journal.KindAnswer, Seq: seq}
	if err != nil {
		ans.Failed, ans.Error = true, err.Error()
	} else if kv, kerr := keepValue(v); kerr != nil {
		ans.Unkept = fmt.Sprintf("%s returned %v", c.Name, kerr)
	} else {
		ans.Value, ans.Mark = kv.appendJSON(nil), mark // journalvalue_json.go
	}
	if aerr := j.w.Append(ans); aerr != nil && err == nil {
		return nil, c.Errorf("%v", aerr)
	}
	if kind == JournalEffect && outliving(c.Host) == "" {
		// Lost with the runner, this answer would have the effect done
		// again by a resume: it goes now. An effect on a daemon that
		// outlives the runner is taken over instead, so its answer may
		// wait to go with the next call's record (journal.Log.Append).
		if serr := j.w.Flush(); serr != nil && err == nil {
			return nil, c.Errorf("%v", serr)
		}
	}
	return v, err
}

// replay answers a call from the journal.
func (j *Journal) replay(c *Call, e *Entry, rc replayCall) (starlark.Value, error) {
	a := rc.answer
	if a.Failed {
		return nil, errors.New(a.Error)
	}
	var kv keptValue
	if err := json.Unmarshal(a.Value, &kv); err != nil {
		return nil, c.Errorf("journal: the answer of call %d: %v", a.Seq, err)
	}
	v, err := kv.value(c.Env)
	if err != nil {
		return nil, c.Errorf("journal: the answer of call %d: %v", a.Seq, err)
	}
	replayMark(c, a.Mark) // durablelive.go
	if e.Replayed != nil {
		e.Replayed(c, v)
	}
	return v, nil
}

// changedErr is the error of a resume whose recipe changed, nil if it
// did not: it stops the run whatever the recipe made of it (a retry() or
// parallel() that caught it).
func (j *Journal) changedErr() error {
	var rc *ResumeStopped
	if j != nil && errors.As(j.changed, &rc) {
		return rc
	}
	return nil
}

// end closes the journal with how the run ended, unless the recipe
// changed (then the journal stays as it was, to resume with the recipe
// it was made by).
func (j *Journal) end(status string, code int) error {
	if j.changed == nil {
		if err := j.w.Append(journal.Record{Kind: journal.KindEnd, Status: status, Code: code}); err != nil {
			j.w.Close()
			return err
		}
	}
	return j.w.Close()
}

// Journaled makes a builtin of a value that is not a Table entry (a
// member of a Starlark library module, such as time.now) that a durable
// run journals as e says.
func Journaled(env *Env, e *Entry) *starlark.Builtin {
	return starlark.NewBuiltin(e.Name, func(thread *starlark.Thread, _ *starlark.Builtin, args starlark.Tuple, kwargs []starlark.Tuple) (starlark.Value, error) {
		c := &Call{Env: env, Thread: thread, Name: e.Name, Args: args, Kwargs: kwargs}
		env.settle()
		if env.Journal != nil && e.Journal != JournalPure {
			return env.Journal.call(c, e)
		}
		return e.Fn(c)
	})
}

// callerPlace is where the recipe called the builtin running on thread
// (0 for a call with no recipe frame: a builtin deferred directly).
func callerPlace(thread *starlark.Thread) (string, int) {
	if thread.CallStackDepth() < 2 {
		return "", 0
	}
	pos := thread.CallFrame(1).Pos
	return pos.Filename(), int(pos.Line)
}

// outliving is the target of h when its daemon outlives the runner (a
// socket, ssh or ws daemon), "" for the embedded daemon, whose processes
// die with the runner, and for no host.
func outliving(h *Host) string {
	if h == nil {
		return ""
	}
	if client.IsEmbedded(h.target) { // not client.Kind: no URL parsed per call
		return ""
	}
	return h.target
}

// maxShow bounds the rendering of a call's arguments in a journal.
const maxShow = 100

// callKey is what identifies a call's arguments in the journal: a hash of
// them, and a short rendering for messages.
func callKey(c *Call) (hash, show string) {
	var b strings.Builder
	for i, a := range c.Args {
		if i > 0 {
			b.WriteString(", ")
		}
		b.WriteString(a.String())
	}
	for _, kw := range c.Kwargs {
		if b.Len() > 0 {
			b.WriteString(", ")
		}
		b.WriteString(string(kw[0].(starlark.String)))
		b.WriteByte('=')
		b.WriteString(kw[1].String())
	}
	if c.Recv != nil {
		b.WriteString("; on ")
		b.WriteString(recvKey(c.Recv)) // durablelive.go
	}
	if c.Host != nil && c.Host.target != c.Env.Hosts.DefaultTarget() {
		// h.run(...) on a host the recipe named: another host is
		// another call. (The default host is left out: a resume may
		// reach the same daemon by another flag.)
		b.WriteString("; host ")
		b.WriteString(c.Host.target)
	}
	sum := sha256.Sum256([]byte(c.Name + "\x00" + b.String()))
	show = b.String()
	if len(show) > maxShow {
		cut := maxShow
		for cut > 0 && !utf8.RuneStart(show[cut]) {
			cut--
		}
		show = show[:cut] + "..."
	}
	return hex.EncodeToString(sum[:16]), show
}
