package client

import (
	"context"
	"fmt"
	"sync"
	"sync/atomic"
	"time"

	"github.com/seed5ad92d46/sous/daemon/wire"
)

// FrameHandler receives a process's frames in seq order, each exactly once,
// on the goroutine reading the connection (its reader goroutine, a call's
// caller reading its own answer, or a Wait's caller reading its process's
// exit); for an embedded daemon, on whichever daemon goroutine produced
// them (the one reading the child's output, or one discarding the
// process), before a spawn's call has returned. It must
// return promptly and must not wait on the client nor stop the daemon; one
// that blocks holds the child back at once, as a full pipe would. f.Data is
// valid only during the call.
type FrameHandler func(f *wire.Frame)

// Proc is a process the client follows.
type Proc struct {
	c         *Client
	ID        string
	Pid       int
	StartTime float64
	handler   FrameHandler
	// silent: spawned or reattached without a FrameHandler, so nothing
	// but its exit is wanted of its frames, and only by a caller that
	// asks (Wait, Done, Exited, ...). Until one asks (heeded), nobody
	// need read the connection for it: see readerHints.unheeded.
	silent bool
	heeded atomic.Bool

	mu         sync.Mutex
	lastSeq    int64
	lost       int64 // frames the daemon no longer had when we (re)attached
	exited     bool
	exitCode   int
	err        error
	done       chan struct{}
	spawning   bool // process.spawn not answered yet
	keyedSpawn bool // the spawn carries a key (process.spawn.key): see isResending
	reattached bool // a reconnect found it on the daemon
	stageCodes []int
	timedOut   bool
	signal     int         // the exit frame's Signal
	tty        bool        // spawned with a terminal by this client
	identified bool        // Pid and StartTime are known
	earlyGone  []wire.Gone // Gone notifications read before the spawn or reattach answer was

	// awaitReplay: p was reattached from before the last frame routed to
	// the other followers of its id (Client.follow), and drops what comes
	// until the replay begins. seen is the highest seq come so far: the
	// replay's first frame is the first at or below it.
	awaitReplay bool
	seen        int64

	stdinPassed  bool // the child's stdin is the file passed as SpawnSpec.Mirror.Stdin
	outputPassed bool // the child writes to the Mirror.Stdout and Stderr passed (Mirror.Direct)
	// teed: this client passed pipes for the daemon to tee output into, so
	// a reattach after a reconnect claims the Mirrored marks: what was
	// teed is in those pipes already. Set before the spawn is sent.
	teed bool

	stdinMu   sync.Mutex
	stdinOff  int64    // the offset of our next stdin byte
	stdinBufs [][]byte // process.stdin requests' params buffers, reused
	stdinID   []byte   // ID as a JSON string
}

func newProc(c *Client, id string, h FrameHandler) *Proc {
	silent := h == nil
	if silent {
		h = func(*wire.Frame) {}
	}
	return &Proc{c: c, ID: id, handler: h, silent: silent, done: make(chan struct{})}
}

// heed says a caller now watches p without reading for it (Done, Exited,
// ...): someone must read the connection from now on while p runs.
func (p *Proc) heed() {
	if p.silent && !p.heeded.Load() && !p.finished() && !p.heeded.Swap(true) {
		p.c.wakeReader()
	}
}

// deliver hands one frame to the handler unless it was seen before, or
// skipped on purpose (a reattach from a later seq). The exit frame always
// gets through until the process is known to have exited: otherwise a
// reattach from a seq at or past it would wait for an end already passed.
func (p *Proc) deliver(f *wire.Frame) {
	p.mu.Lock()
	if p.awaitReplay {
		if f.Seq > p.seen {
			p.seen = f.Seq
			p.mu.Unlock()
			return // the other followers' subscription, before the daemon moved it
		}
		p.awaitReplay = false
	}
	if p.exited || p.err != nil || (f.Seq <= p.lastSeq && f.Stream != wire.Exit) {
		p.mu.Unlock()
		return // a replayed frame we already have, or one the caller skipped
	}
	if f.Seq > p.lastSeq+1 {
		// Frames the daemon no longer had: a replay from before its
		// firstSeq (an honestly truncated replay).
		p.lost += f.Seq - p.lastSeq - 1
	}
	p.lastSeq = max(p.lastSeq, f.Seq)
	p.mu.Unlock()
	p.handler(f)
	if f.Stream == wire.Exit {
		p.mu.Lock()
		p.exited, p.exitCode = true, f.ExitCode
		p.stageCodes = append([]int(nil), f.StageCodes...)
		p.timedOut = p.timedOut || f.TimedOut
		p.signal = f.Signal
		close(p.done)
		p.mu.Unlock()
		p.c.unregister(p)
	}
}

// settleReplay ends p's wait for its replay (Proc.awaitReplay) once the
// reattach is answered: the replay came before the answer. Still waiting,
// p saw no seq go back: the replay began right after the old subscription's
// last frame, which happens only when the daemon no longer had the frames
// before it. p then counts what it dropped as lost and goes on from there,
// and returns that seq (0 when the replay came as it should): the exit
// frame may be among what it dropped, so the caller asks for the end from
// there (askForTheEnd).
func (p *Proc) settleReplay(res wire.ReattachResult) (skippedTo int64) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if !p.awaitReplay {
		return 0
	}
	p.awaitReplay = false
	if skipped := max(p.seen, res.FirstSeq-1) - p.lastSeq; skipped > 0 {
		p.lost += skipped
		p.lastSeq += skipped
	}
	return p.lastSeq
}

// resumed records what a reconnect's reattach found. For a spawn whose
// answer the cut lost, that is the process it started, and p follows it
// as its spawn's answer would have had it: its pid and start time.
func (p *Proc) resumed(res wire.ReattachResult) {
	p.mu.Lock()
	p.reattached = true
	known := p.identified
	p.mu.Unlock()
	if !known {
		p.identify(res.Pid, res.StartTime)
	}
}

func (p *Proc) fail(err error) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.exited || p.err != nil {
		return
	}
	p.err = err
	close(p.done)
}

// identify records which process p follows, from the answer of its spawn
// or reattach, and applies the Gone notifications that were read before
// that answer was.
func (p *Proc) identify(pid int, startTime float64) {
	p.mu.Lock()
	p.Pid, p.StartTime, p.identified = pid, startTime, true
	early := p.earlyGone
	p.earlyGone = nil
	p.mu.Unlock()
	for _, g := range early {
		p.gone(g)
	}
}

// gone fails p when g names the process p follows: not a newer process
// with the same id (this client's own spawn may have replaced the one g
// names).
func (p *Proc) gone(g wire.Gone) {
	p.mu.Lock()
	if !p.identified {
		p.earlyGone = append(p.earlyGone, g)
		p.mu.Unlock()
		return
	}
	same := p.Pid == g.Pid && p.StartTime == g.StartTime
	p.mu.Unlock()
	if !same {
		return
	}
	switch g.Reason {
	case wire.GoneReplaced:
		p.fail(fmt.Errorf("process %s was replaced on the daemon by a new process with the same id before it exited", g.ID))
	default:
		p.fail(fmt.Errorf("process %s is no longer retained by the daemon (%s); its exit was not seen", g.ID, g.Reason))
	}
}

func (p *Proc) isTeed() bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.teed
}

func (p *Proc) isSpawning() bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.spawning
}

// isResending reports whether p is a spawn that Spawn will send again with
// its key, should the connection break before the answer: a reconnect then
// does not look for it. The process under its id may be another, older
// one (a spawn that never reached the daemon would take it for its own);
// the resend tells them apart.
func (p *Proc) isResending() bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.spawning && p.keyedSpawn
}

func (p *Proc) finished() bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.exited || p.err != nil
}

// LastSeq is the seq of the last frame delivered.
func (p *Proc) LastSeq() int64 {
	p.heed()
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.lastSeq
}

// Lost is the number of frames the daemon no longer retained when this
// client attached or reattached (an honestly truncated replay).
func (p *Proc) Lost() int64 {
	p.heed()
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.lost
}

// Done is closed when the exit frame arrived or following failed.
func (p *Proc) Done() <-chan struct{} {
	p.heed()
	return p.done
}

// Exited reports the exit code once the exit frame arrived.
func (p *Proc) Exited() (code int, ok bool) {
	p.heed()
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.exitCode, p.exited
}

// Err is why following failed (the connection was lost for good), or nil.
func (p *Proc) Err() error {
	p.heed()
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.err
}

// Wait blocks until the process exits and returns its exit code (-1 when a
// signal ended it). Over a Unix socket, while the client follows no other
// process, the caller reads the connection itself for the exit frame (as a
// call's caller reads its own answer): the reader goroutine reading it and
// waking the caller cost two hand-overs between goroutines per spawn.
func (p *Proc) Wait(ctx context.Context) (int, error) {
	select {
	case <-p.done:
	default:
		p.c.readFor(ctx, p)
	}
	select {
	case <-p.done:
	case <-ctx.Done():
		return 0, ctx.Err()
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.exited {
		return p.exitCode, nil
	}
	return 0, p.err
}

// OutputPassed reports whether the child writes straight to the files
// passed as SpawnSpec.Mirror.Stdout and Stderr (Mirror.Direct): nothing of
// those streams arrives as frames.
func (p *Proc) OutputPassed() bool { return p.outputPassed }

// Kill signals the process group (default SIGTERM) without waiting.
func (p *Proc) Kill(ctx context.Context, signal string) error {
	params := map[string]any{"id": p.ID}
	if signal != "" {
		params["signal"] = signal
	}
	return p.c.Call(ctx, "process.kill", params, nil)
}

// KillAndWait signals the group and waits up to grace for the process to die,
// escalating to SIGKILL when escalate is set.
func (p *Proc) KillAndWait(ctx context.Context, signal string, grace time.Duration, escalate bool) (wire.KillAndWaitResult, error) {
	params := map[string]any{"id": p.ID, "escalate": escalate}
	if signal != "" {
		params["signal"] = signal
	}
	if grace > 0 {
		params["timeoutMs"] = max(grace.Milliseconds(), 1)
	}
	var res wire.KillAndWaitResult
	err := p.c.Call(ctx, "process.killAndWait", params, &res)
	return res, err
}
