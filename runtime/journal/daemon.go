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

	"github.com/seed5ad92d46/sous/daemon/client"
	"github.com/seed5ad92d46/sous/daemon/wire"
)

// Daemon is a Store kept by a standalone daemon (its run.journal feature):
// the journals are files under the daemon's state directory, so a run
// started from one client is resumed from any other client of the daemon.
//
// A Log sends what is appended in the background, and Sync waits until
// it is where a runner killed after Sync returned loses nothing: written
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
	go l.reap()
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
	go l.reap()
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
	l := &daemonLog{d: d, run: run, lease: hex.EncodeToString(b[:]), written: kind == "unix" && !d.SyncAlways,
		answers: make(chan pendingAppend, 1024)}
	l.cond = sync.NewCond(&l.mu)
	return l
}

// daemonLog is one run's journal on a daemon, held under lease.
//
// A sender goroutine sends what is appended in batches, without waiting
// for the answers (the daemon applies one connection's appends in the
// order they came); a reaper goroutine waits for the answers, in order.
// Sync returns once every record appended is sent (written) on a Unix
// socket, where a request written is in the daemon's kernel and the
// daemon applies it even when the runner is gone by then; else, and with
// SyncAlways, once the daemon answered for every one.
type daemonLog struct {
	d          Daemon
	run, lease string
	written    bool // Sync waits for the sending only, not the answers

	mu       sync.Mutex
	cond     *sync.Cond // signalled when a batch is sent or answered
	queue    []json.RawMessage
	count    int   // records the journal holds once everything queued is applied
	sent     int   // records of this log sent
	acked    int   // records of this log the daemon answered for
	sending  bool  // the sender goroutine runs
	err      error // the first failure: every later call returns it
	closed   bool
	appended int // records this log appended
	answers  chan pendingAppend
}

// pendingAppend is an append sent whose answer the reaper waits for.
type pendingAppend struct {
	n    int
	wait func() (int, error)
}

func (l *daemonLog) Append(r Record) error {
	p, err := json.Marshal(r)
	if err == nil && len(p) > maxBatch && r.Kind == KindAnswer && !r.Failed {
		// Too large for a request: kept as not kept, so the run goes on
		// and a resume refuses this call rather than replay it wrong.
		r.Value, r.Unkept = nil, fmt.Sprintf("%d bytes, more than a daemon takes in one request", len(p))
		p, err = json.Marshal(r)
	}
	if err == nil && len(p) > maxBatch {
		err = fmt.Errorf("a record of %d bytes is more than a daemon takes in one request (%d)", len(p), maxBatch)
	}
	if err != nil {
		return fmt.Errorf("journal on %s: %w", l.d, err)
	}
	l.mu.Lock()
	if l.err == nil && l.closed {
		l.err = fmt.Errorf("journal on %s: run %s: the journal is closed", l.d, l.run)
	}
	if l.err != nil {
		defer l.mu.Unlock()
		return l.err
	}
	l.queue = append(l.queue, p)
	l.count++
	l.appended++
	if !l.sending {
		l.sending = true
		go l.send()
	}
	l.mu.Unlock()
	if l.d.Fault.CrashAfter > 0 {
		return l.Sync()
	}
	return nil
}

// send sends the queue in batches until it is empty.
func (l *daemonLog) send() {
	l.mu.Lock()
	defer l.mu.Unlock()
	for len(l.queue) > 0 && l.err == nil {
		n, size := 0, 0
		for n < len(l.queue) && (n == 0 || size+len(l.queue[n]) <= maxBatch) {
			size += len(l.queue[n])
			n++
		}
		batch, at := l.queue[:n], l.count-len(l.queue)
		l.mu.Unlock()
		wait, err := l.d.Client.AppendRunAsync(context.Background(), l.run, l.lease, at, batch, false)
		if err == nil {
			l.answers <- pendingAppend{n: n, wait: wait}
		}
		l.mu.Lock()
		if err != nil {
			l.fail(err)
			break
		}
		l.queue = l.queue[n:]
		l.sent += n
		if l.written {
			l.crashAt(l.sent)
		}
		l.cond.Broadcast()
	}
	l.sending = false
	l.cond.Broadcast()
}

// reap waits for the answers of the appends sent, in order.
func (l *daemonLog) reap() {
	for p := range l.answers {
		_, err := p.wait()
		l.mu.Lock()
		if err != nil {
			l.fail(err)
		} else {
			l.acked += p.n
			if !l.written {
				l.crashAt(l.acked)
			}
		}
		l.cond.Broadcast()
		l.mu.Unlock()
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

func (l *daemonLog) Sync() error {
	if err := l.wait(!l.written); err != nil || !l.d.SyncAlways {
		return err
	}
	if err := l.d.Client.SyncRun(context.Background(), l.run, l.lease); err != nil {
		return fmt.Errorf("journal on %s: %w", l.d, err)
	}
	return nil
}

// wait returns once everything appended is sent, and answered too when
// answered is set, or the log failed.
func (l *daemonLog) wait(answered bool) error {
	l.mu.Lock()
	defer l.mu.Unlock()
	for l.err == nil && (l.sending || len(l.queue) > 0 || answered && l.acked < l.sent) {
		l.cond.Wait()
	}
	return l.err
}

func (l *daemonLog) Close() error {
	l.mu.Lock()
	if l.closed {
		l.mu.Unlock()
		return nil
	}
	l.closed = true
	l.mu.Unlock()
	err := l.wait(true)
	close(l.answers) // nothing is sent any more: the reaper ends
	if cerr := l.d.Client.CloseRun(context.Background(), l.run, l.lease); err == nil && cerr != nil {
		err = fmt.Errorf("journal on %s: %w", l.d, cerr)
	}
	return err
}
