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
// A Log sends what is appended in the background, one batch of records at
// a time, and Sync waits until the daemon has written all of it (write(2)
// returned there): a runner killed after Sync returned loses nothing, and
// neither does a daemon killed then. The daemon fsyncs within GroupCommit
// (SyncAlways: before Sync returns) and at Close.
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
	l.count, l.acked = 1, 1 // the head, as the file store counts it
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
	case len(recs) == 0 || recs[0].Kind != KindRun:
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
	l := &daemonLog{d: d, run: run, lease: hex.EncodeToString(b[:])}
	l.cond = sync.NewCond(&l.mu)
	return l
}

// daemonLog is one run's journal on a daemon, held under lease.
type daemonLog struct {
	d          Daemon
	run, lease string

	mu       sync.Mutex
	cond     *sync.Cond // signalled when a batch is answered
	queue    []json.RawMessage
	queued   int   // bytes in queue
	count    int   // records the daemon has or will have once queue is sent: what the next batch follows
	acked    int   // records of this log the daemon acknowledged (for Fault)
	sending  bool  // a batch is in flight
	err      error // the first failure: every later call returns it
	closed   bool
	appended int // records this log appended (for Fault)
}

func (l *daemonLog) Append(r Record) error {
	p, err := json.Marshal(r)
	if err != nil {
		return fmt.Errorf("journal: %w", err)
	}
	if len(p) > maxBatch && r.Kind == KindAnswer && !r.Failed {
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
	if l.err != nil {
		defer l.mu.Unlock()
		return l.err
	}
	l.queue = append(l.queue, p)
	l.queued += len(p)
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

// send sends the queue in batches until it is empty, one batch in flight
// at a time: the daemon applies them in order.
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
		_, err := l.d.Client.AppendRun(context.Background(), l.run, l.lease, at, batch, false)
		l.mu.Lock()
		if err != nil {
			l.err = fmt.Errorf("journal on %s: %w", l.d, err)
			break
		}
		l.queue = l.queue[n:]
		l.queued -= size
		l.acked += n
		if f := l.d.Fault.CrashAfter; f > 0 && l.acked >= f {
			syscall.Kill(os.Getpid(), syscall.SIGKILL)
			select {} // SIGKILL is not handled: nothing after this runs
		}
		l.cond.Broadcast()
	}
	l.sending = false
	l.cond.Broadcast()
}

func (l *daemonLog) Sync() error {
	l.mu.Lock()
	for (l.sending || len(l.queue) > 0) && l.err == nil {
		l.cond.Wait()
	}
	err := l.err
	l.mu.Unlock()
	if err == nil && l.d.SyncAlways {
		if err = l.d.Client.SyncRun(context.Background(), l.run, l.lease); err != nil {
			err = fmt.Errorf("journal on %s: %w", l.d, err)
		}
	}
	return err
}

func (l *daemonLog) Close() error {
	l.mu.Lock()
	if l.closed {
		l.mu.Unlock()
		return nil
	}
	l.closed = true
	l.mu.Unlock()
	err := l.Sync()
	if cerr := l.d.Client.CloseRun(context.Background(), l.run, l.lease); err == nil && cerr != nil {
		err = fmt.Errorf("journal on %s: %w", l.d, cerr)
	}
	return err
}
