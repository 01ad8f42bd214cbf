package proc

import (
	"context"
	"os/exec"
	"sync"
	"syscall"
	"time"

	"github.com/seed5ad92d46/sous/daemon/streamlog"
	"github.com/seed5ad92d46/sous/daemon/wire"
)

// Process is one child.
type Process struct {
	ID        string
	Command   string
	Args      []string
	Pid       int
	StartTime float64 // the daemon's wall clock at spawn, epoch seconds
	Log       *streamlog.Log

	key     string      // Spec.Key: a spawn with the same key answers with this process (process.spawn.key)
	cmds    []*exec.Cmd // one per pipeline stage, else one; cmds[0] leads the group
	outputs []output    // the daemon's read ends: stdout and stderr, a pipeline's or a terminal's
	outMu   sync.Mutex  // guards outputs[i].f where readable replaces a quiet pipe's file
	ext     extState    // pipeline, terminal and timeout state (ext.go)
	stdin   *stdinQueue
	ctx     context.Context // ends when the process is discarded
	cancel  context.CancelFunc

	mu          sync.Mutex
	reaped      bool
	exitCode    int
	stageCodes  []int         // a pipeline's, set when reaped
	timedOut    bool          // killed because Spec.Timeout passed
	signal      int           // the signal that ended it (its last stage); in the exit frame when Spec.ExitSignal asked
	reapedCh    chan struct{} // closed once reaped
	strays      *strayGroup   // what the leader left of its group, once reaped (strays.go)
	exitedAt    time.Time     // when the exit frame went in (retain.go)
	queued      bool          // in the registry's exit queue; guarded by the registry's mu
	retainedMem int           // its log's memory while queued, in Registry.exitedMem; guarded likewise
	doneCh      chan struct{} // closed once the exit frame is in the log
}

// EndSignal is the signal that ended the process (its last stage), once
// reaped; 0 when it exited or the daemon cannot tell.
func (p *Process) EndSignal() int {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.signal
}

// Running reports whether the child has not been reaped yet.
func (p *Process) Running() bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	return !p.reaped
}

// ExitCode is the child's exit code (-1 when a signal ended it) once reaped.
func (p *Process) ExitCode() (int, bool) {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.exitCode, p.reaped
}

// Reaped is closed once the child has been reaped.
func (p *Process) Reaped() <-chan struct{} { return p.reapedCh }

// Done is closed once the exit frame is in the log.
func (p *Process) Done() <-chan struct{} { return p.doneCh }

// Signal sends sig to the child's process group unless the child has been
// reaped. It reports whether the signal was sent. Once the child has been
// reaped, what it left of its group, if anything, gets sig instead (and
// Signal reports false: the child itself is gone).
func (p *Process) Signal(sig syscall.Signal) bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.reaped {
		if p.strays != nil {
			p.strays.signal(sig)
		}
		return false
	}
	// The leader is at worst a zombie here, which keeps the pgid reserved.
	syscall.Kill(-p.Pid, sig)
	return true
}

// WriteStdin applies process.stdin to the child. The process takes data
// over (it is queued, not copied); a buffer from Registry.StdinBuffer goes
// back to the pool once written.
func (p *Process) WriteStdin(ctx context.Context, data []byte, offset *int64) (applied int64, duplicate bool, err error) {
	return p.stdin.Offer(ctx, data, offset)
}

// CloseStdin closes the child's stdin once the queued data is written.
func (p *Process) CloseStdin() { p.stdin.Close() }

// StdinApplied is the stdin high-water mark.
func (p *Process) StdinApplied() int64 { return p.stdin.Applied() }

// Grace bounds for KillAndWait, from docs/PROTOCOL.md.
const (
	DefaultGrace = 3000 * time.Millisecond
	MaxGrace     = 600000 * time.Millisecond
)

// KillAndWait sends sig to the group and waits up to grace for the child to be
// reaped, escalating to SIGKILL if asked. The kill does not depend on the
// caller staying: if ctx ends first (the client hung up, or half-closed
// and the daemon had to give up on it), the answer comes at once and the
// escalation still happens when the grace runs out.
func (p *Process) KillAndWait(ctx context.Context, sig syscall.Signal, grace time.Duration, escalate bool) wire.KillAndWaitResult {
	if !p.Signal(sig) {
		return wire.KillAndWaitResult{Found: true, Died: true, AlreadyExited: true}
	}
	if grace <= 0 {
		grace = DefaultGrace
	}
	grace = min(grace, MaxGrace)
	deadline := time.Now().Add(grace)
	t := time.NewTimer(grace)
	defer t.Stop()
	select {
	case <-p.reapedCh:
		// What the child left in its group got sig too, and the rest of the
		// grace; past it, SIGKILL, if asked.
		return wire.KillAndWaitResult{Found: true, Died: true, Escalated: escalate && p.escalateStrays(deadline)}
	case <-ctx.Done():
		if escalate {
			go p.escalateAt(deadline)
		}
		return wire.KillAndWaitResult{Found: true, Died: !p.Running()}
	case <-t.C:
	}
	if !escalate {
		return wire.KillAndWaitResult{Found: true, Died: !p.Running()}
	}
	p.Signal(syscall.SIGKILL)
	select {
	case <-p.reapedCh:
		return wire.KillAndWaitResult{Found: true, Died: true, Escalated: true}
	case <-ctx.Done():
		return wire.KillAndWaitResult{Found: true, Died: !p.Running(), Escalated: true}
	}
}

// escalateAt finishes a KillAndWait whose caller left: SIGKILL for the
// group at deadline unless the child is reaped first, and then for what it
// left in its group.
func (p *Process) escalateAt(deadline time.Time) {
	t := time.NewTimer(time.Until(deadline))
	defer t.Stop()
	select {
	case <-p.reapedCh:
		p.escalateStrays(deadline)
	case <-t.C:
		p.Signal(syscall.SIGKILL)
	}
}

// discard tears a replaced process down: its readers are dropped first so no
// stray frame arrives under the reused id, then its group is killed.
func (p *Process) discard() {
	p.release()
	p.Signal(syscall.SIGKILL)
}

// closeHeld closes the child's ends of its output pipes that the daemon
// kept (output.held): once they are closed, a pipe ends when the child and
// its descendants have let go of it.
func (p *Process) closeHeld() {
	for i := range p.outputs {
		if h := p.outputs[i].held; h != nil {
			h.Close() // once: by launch, or by the child poller at the exit
		}
	}
}

// release lets go of the daemon's side of the process: readers of its log are
// dropped, its pipes abandoned, its stdin stopped.
func (p *Process) release() {
	p.Log.Close()
	p.cancel()
	p.outMu.Lock()
	for _, o := range p.outputs {
		o.f.SetReadDeadline(time.Now()) // fails, harmless, on a quiet pipe nothing reads
	}
	p.outMu.Unlock()
	p.stdin.stop()
}

// readable returns output i for a reader, its file moved into the
// runtime's poller first when it is a quiet pipe's end (pollable). Called
// by the one goroutine that starts readers of p (the child poller's, or
// launch). A process released meanwhile gets the deadline release would
// have set on the new file: release sets it under outMu after cancelling.
func (p *Process) readable(i int) output {
	o := &p.outputs[i]
	if !o.quiet {
		return *o
	}
	p.outMu.Lock()
	defer p.outMu.Unlock()
	o.f = pollable(o.f)
	o.quiet = false
	if p.ctx.Err() != nil {
		o.f.SetReadDeadline(time.Now())
	}
	return *o
}
