package journal

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"sync"
	"syscall"
	"time"

	"github.com/seed5ad92d46/sous/daemon/client"
	"github.com/seed5ad92d46/sous/daemon/wire"
)

// Daemon is a Store kept by a standalone daemon (its run.journal feature):
// the journals are files under the daemon's state directory, so a run
// started from one client is resumed from any other client of the daemon.
//
// A Log sends what is appended with the next Flush or Sync (a reading
// call's record within a few milliseconds: daemonLog), and Sync waits
// until it is where a runner killed
// after Sync returned loses nothing: written
// to a Unix socket (the daemon's kernel has it, and the daemon applies
// it even if the runner is gone by then), or, over ssh and WebSocket,
// answered by the daemon (written to its file). The daemon fsyncs within
// GroupCommit and at Close; with SyncAlways, Sync waits for the daemon's
// answers and then for its fsync.
type Daemon struct {
	Client *client.Client
	// Target names the daemon in messages (its URL).
	Target     string
	SyncAlways bool
	// Fault kills the runner right after the daemon acknowledged the
	// CrashAfter-th record the Log appended (Torn is not possible here:
	// the daemon writes whole records). With a fault, every Append waits
	// for its acknowledgement, so the point is exact.
	Fault Fault
}

// maxBatch bounds the records of one run.append request, below the
// protocol's 1 MiB line.
const maxBatch = 768 << 10

func (d Daemon) Create(head Record) (Log, error) {
	l := d.newLog(head.Run)
	if err := d.Client.CreateRun(context.Background(), l.lease, head); err != nil {
		return nil, fmt.Errorf("journal on %s: %w", d, err)
	}
	l.count, l.sent, l.acked = 1, 1, 1 // the head, as the file store counts it
	return l, nil
}

func (d Daemon) Open(run string) (Log, []Record, error) {
	l := d.newLog(run)
	recs, err := d.Client.OpenRun(context.Background(), run, l.lease)
	var we *wire.Error
	switch {
	case errors.As(err, &we) && we.Code == wire.CodeRunBusy:
		return nil, nil, ErrBusy
	case errors.As(err, &we) && we.Code == wire.CodeRunUnknown:
		return nil, nil, ErrNoRun
	case err != nil:
		return nil, nil, fmt.Errorf("journal on %s: %w", d, err)
	}
	if len(recs) == 0 || recs[0].Kind != KindRun {
		l.Close()
		return nil, nil, errors.New("journal: no run record (its run never started)")
	}
	l.count = len(recs)
	return l, recs, nil
}

func (d Daemon) List() ([]Summary, error) { return d.Client.ListRuns(context.Background()) }

func (d Daemon) String() string { return "the daemon at " + d.Target }

func (d Daemon) newLog(run string) *daemonLog {
	var b [16]byte
	rand.Read(b[:])
	kind, _, _ := client.Kind(d.Target)
	l := &daemonLog{d: d, run: run, lease: hex.EncodeToString(b[:]), written: kind == "unix" && !d.SyncAlways, sendWithin: sendWithin}
	l.cond = sync.NewCond(&l.mu)
	return l
}

// daemonLog is one run's journal on a daemon, held under lease.
//
// An Append waits to be sent by the next Flush or Sync, or, for the
// record of a call that only reads from outside, by a timer within
// sendWithin; whoever sends does it on its own goroutine and takes along
// what others appended meanwhile, batched.
// Nobody waits for the daemon's answers until they are needed (the daemon
// applies one connection's appends in the order they came). Sync returns
// once every record appended is sent (written) on a Unix socket, where a
// request written is in the daemon's kernel and the daemon applies it
// even when the runner is gone by then; else, and with SyncAlways, once
// the daemon answered for every one.
//
// No goroutine of its own: a hand-off per effect to a sender (and
// another to a reader of answers) cost more than the journal's own work
// on a socket daemon, where an effect's whole round trip is a
// millisecond.
type daemonLog struct {
	d          Daemon
	run, lease string
	written    bool // Sync waits for the sending only, not the answers

	mu      sync.Mutex
	cond    *sync.Cond // signalled when a sender stops
	queue   []json.RawMessage
	count   int             // records the journal holds once everything queued is applied
	sent    int             // records of this log sent
	acked   int             // records of this log the daemon answered for
	pending []pendingAppend // appends sent whose answers were not taken yet, in order
	sending bool            // a goroutine sends the queue
	held    bool            // appends were sent ahead (SyncAhead) since the last Flush
	timer   *time.Timer     // runs flush
	armed   bool            // timer runs flush, sendWithin after a call's record
	// sendWithin is the const of that name; a test lengthens it to see
	// what Flush sends without an Append's help.
	sendWithin time.Duration
	err        error // the first failure: every later call returns it
	closed     bool
}

// pendingAppend is an append sent, n records, whose answer is not taken.
type pendingAppend struct {
	n   int
	ans *client.Append
}

// maxPending bounds the appends whose answers are not taken: past it the
// oldest are waited for, so a run that only appends never lets answers
// pile up unread.
const maxPending = 64

func (l *daemonLog) Append(r Record) error {
	p, err := encode(r)
	if err == nil && len(p) > maxBatch && r.Kind == KindAnswer && !r.Failed {
		// Too large for a request: kept as not kept, so the run goes on
		// and a resume refuses this call rather than replay it wrong.
		r.Value, r.Unkept = nil, fmt.Sprintf("%d bytes, more than a daemon takes in one request", len(p))
		p, err = encode(r)
	}
	if err == nil && len(p) > maxBatch {
		err = fmt.Errorf("a record of %d bytes is more than a daemon takes in one request (%d)", len(p), maxBatch)
	}
	if err != nil {
		return fmt.Errorf("journal on %s: %w", l.d, err)
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.err == nil && l.closed {
		l.err = fmt.Errorf("journal on %s: run %s: the journal is closed", l.d, l.run)
	}
	if l.err != nil {
		return l.err
	}
	l.queue = append(l.queue, p)
	l.count++
	if l.d.Fault.CrashAfter > 0 {
		l.settle(true, false) // the fault's point is exact: each record safe first
		return l.err
	}
	// Sent with the next Sync: a runtime appends a call's record and
	// syncs before its effect, so the answer of the call before goes in
	// the same request. A call that only reads from outside is not synced
	// for, and may block long (sleep, Process.wait, read_line): its record
	// goes within sendWithin all the same, so that a resume knows it
	// started (a sleep the runner died in waits only what was left).
	if r.Kind == KindCall && r.Call == CallAnswer && !l.armed {
		l.armed = true
		if l.timer == nil {
			l.timer = time.AfterFunc(l.sendWithin, l.flush)
		} else {
			l.timer.Reset(l.sendWithin)
		}
	}
	return l.err
}

// flush sends what waits, at sendWithin after a call's record.
func (l *daemonLog) flush() {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.armed = false
	if !l.sending && l.err == nil {
		l.send()
	}
}

// sendWithin is how long the record of a reading call may wait for a
// Sync to take it along: one run.append, a write on each side and a
// wake-up of the daemon, was the journal's largest cost on a socket
// daemon, and two per effect made it twice that.
//
// An effect's answer has no timer: it waits for the next call, whose
// record is synced (an effect's) or has the timer (a reading call's),
// however long the run computes in Starlark meanwhile. A timer reset after
// every effect's answer and stopped by the next effect's send cost the
// runner about one context switch per effect (the runtime wakes its
// poller's thread to wait for the sooner timer), most of what the journal
// still cost a run of short commands on a socket daemon. What waits is
// harmless to lose with the runner: the answer of an effect on a daemon
// that outlives the runner (a resume takes that call over from the
// daemon), or a reading call's (done again by a resume, as nothing shown
// or done depended on it: a print and every effect sync first). The
// answer of an effect on no such daemon, and a print, are flushed at once
// (runtime/durable.go).
const sendWithin = 2 * time.Millisecond

// send sends the queue in batches until it is empty, taking the answers
// that came meanwhile. l.mu held; it is let go while a batch is written.
func (l *daemonLog) send() { l.sendAhead(false) }

// sendAhead is send, holding the batches back for the client's next
// request when ahead is set (client.AppendOptions).
func (l *daemonLog) sendAhead(ahead bool) {
	l.sending = true
	for len(l.queue) > 0 && l.err == nil {
		n, size := 0, 0
		for n < len(l.queue) && (n == 0 || size+len(l.queue[n]) <= maxBatch) {
			size += len(l.queue[n])
			n++
		}
		batch, at := l.queue[:n], l.count-len(l.queue)
		l.mu.Unlock()
		ans, err := l.d.Client.AppendRunAsync(context.Background(), l.run, l.lease, at, batch, client.AppendOptions{Ahead: ahead})
		l.mu.Lock()
		if err != nil {
			l.fail(err)
			break
		}
		l.queue = l.queue[n:]
		l.sent += n
		l.pending = append(l.pending, pendingAppend{n: n, ans: ans})
		l.held = l.held || ahead
		if l.written {
			l.crashAt(l.sent)
		}
	}
	l.sending = false
	if l.armed && len(l.queue) == 0 {
		l.timer.Stop()
		l.armed = false
	}
	l.cond.Broadcast()
	l.reap(false)
}

// reap takes the answers that came, in order, and with all set waits for
// every one; past maxPending it waits for the oldest. l.mu held; it is
// let go while an answer is waited for.
func (l *daemonLog) reap(all bool) {
	for len(l.pending) > 0 && l.err == nil {
		p := l.pending[0]
		if !all && len(l.pending) <= maxPending && !p.ans.Answered() {
			return
		}
		l.pending = l.pending[1:]
		l.mu.Unlock()
		_, err := p.ans.Wait(context.Background())
		l.mu.Lock()
		if err != nil {
			l.fail(err)
			return
		}
		l.acked += p.n
		if !l.written {
			l.crashAt(l.acked)
		}
	}
}

// settle returns once nothing queued is left unsent (held for the next
// request with ahead: SyncAhead), and with answered set once every append
// sent is answered too, or the log failed. l.mu held.
func (l *daemonLog) settle(answered, ahead bool) {
	for l.err == nil && (l.sending || len(l.queue) > 0) {
		if !l.sending {
			l.sendAhead(ahead)
			continue
		}
		l.cond.Wait()
	}
	if answered {
		l.reap(true)
	}
}

// fail keeps the log's first error. l.mu held.
func (l *daemonLog) fail(err error) {
	if l.err == nil {
		l.err = fmt.Errorf("journal on %s: %w", l.d, err)
	}
}

// crashAt kills the runner once n records are safe, when the test fault
// asks for it. l.mu held.
func (l *daemonLog) crashAt(n int) {
	if f := l.d.Fault.CrashAfter; f > 0 && n >= f {
		syscall.Kill(os.Getpid(), syscall.SIGKILL)
		select {} // SIGKILL is not handled: nothing after this runs
	}
}

func (l *daemonLog) Flush() error {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.settle(!l.written, false)
	if l.held && l.err == nil {
		// Sent ahead of an effect's request that may never have gone.
		if err := l.d.Client.SendHeld(); err != nil {
			l.fail(err)
		}
	}
	l.held = false
	return l.err
}

// SyncAhead implements journal.Ahead: to the daemon the journal is kept
// by and over the same connection, what waits is held back to go in the
// same write as the effect's request, the caller's next on over. Two
// writes and two wake-ups of the daemon, one for the records and one for
// the request, were most of what a journal cost a run on a socket daemon.
//
// Any transport will do, not only a Unix socket, whose kernel holds what
// was written: the daemon applies a connection's run.append before it
// reads the request after it, and a reconnect sends both again in that
// order, so the effect never happens without its records, whether or
// not the runner lives to see the answers. Over ssh and WebSocket, where
// Sync waits for the daemon's answer, that saves a round trip per effect
// (a WebSocket link sends the records in a message of their own just
// before the request's, as it cannot hold them).
func (l *daemonLog) SyncAhead(over *client.Client) (bool, error) {
	if over != l.d.Client || l.d.SyncAlways || l.d.Fault.CrashAfter > 0 {
		return false, nil
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	l.settle(false, true)
	return true, l.err
}

func (l *daemonLog) Sync() error {
	if err := l.Flush(); err != nil || !l.d.SyncAlways {
		return err
	}
	if err := l.d.Client.SyncRun(context.Background(), l.run, l.lease); err != nil {
		return fmt.Errorf("journal on %s: %w", l.d, err)
	}
	return nil
}

func (l *daemonLog) Close() error {
	l.mu.Lock()
	if l.closed {
		l.mu.Unlock()
		return nil
	}
	l.closed = true
	l.settle(true, false)
	if l.timer != nil {
		l.timer.Stop()
		l.armed = false
	}
	err := l.err
	l.mu.Unlock()
	if cerr := l.d.Client.CloseRun(context.Background(), l.run, l.lease); err == nil && cerr != nil {
		err = fmt.Errorf("journal on %s: %w", l.d, cerr)
	}
	return err
}
