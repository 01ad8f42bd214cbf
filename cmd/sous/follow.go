package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"syscall"
	"time"

	"golang.org/x/sys/unix"

	"github.com/seed5ad92d46/sous/daemon/client"
	"github.com/seed5ad92d46/sous/daemon/wire"
)

// follower follows a process that exec started or attach reattached to
// until it exits, forwarding the signals sous gets, and turns the exit into
// sous's own exit code (follow).
//
// own says the command is this sous's (exec), as opposed to one it only
// watches (attach). When out.broken closes (the reader of sous's stdout
// went away), sous exits 141; an own command first gets SIGPIPE, as it
// would have writing to that reader itself, then SIGKILL if it ignores
// that (otherwise a command on a socket daemon would run on with nobody
// reading it), while a watched one is left running, as it was before the
// viewer came. When out.brokenErr closes (stderr's reader went away), an
// own command gets SIGPIPE only and its exit status stands: one that
// ignores it goes on (its stdout may still have a reader). Unlike in a
// shell, its later writes to stderr do not fail, since they go to the
// daemon's pipe; they are dropped.
type follower struct {
	proc   *client.Proc
	errOut io.Writer // sous's own lines: a failed forward, leaving early
	// timeout is the spawn's --timeout, which the message of a command
	// that ran out of it names.
	timeout time.Duration
	out     *streamWriter // nil: --tty writes the output itself
	own     bool
	sigs    <-chan os.Signal // caught by the caller (catchSignals)
	// detach, when set, is what a signal does instead of being forwarded:
	// it stops the following, and follow returns its error (attach, which
	// only watches).
	detach func(syscall.Signal) error
}

// follow waits for the process's exit while forwarding the signals on
// sigs, and returns sous's exit for it.
func (fl follower) follow(ctx context.Context) error {
	p, out, errOut := fl.proc, fl.out, fl.errOut
	var broken, brokenErr <-chan struct{} // nil, never ready, without out (a terminal's output)
	if out != nil {
		broken, brokenErr = out.broken, out.brokenErr
	}
	var sent syscall.Signal
	var lastInt time.Time
	// Signals are forwarded on goroutines of their own: while the
	// connection is down, a kill waits for the reconnect, and the user must
	// still be able to leave (killStuck).
	left := make(chan struct{})
	defer close(left)
	killed := make(chan error)
	var unanswered []time.Time // when each kill under way was sent, oldest first
	for {
		select {
		case err := <-killed:
			unanswered = unanswered[1:]
			if err != nil && !isNotRunning(err) {
				fmt.Fprintln(errOut, "sous: forward signal:", err)
			}
		case <-broken:
			if fl.own { // killAndWait returns once the group is gone, SIGKILLed after the grace
				if _, err := p.KillAndWait(ctx, "PIPE", client.TimeoutGrace, true); err != nil && !isNotRunning(err) {
					fmt.Fprintln(errOut, "sous: stop the command after its reader went away:", err)
				}
				<-p.Done() // its last frames are written (or dropped) before SIGPIPE is ours again
			}
			return &exitError{code: 128 + int(syscall.SIGPIPE)}
		case <-brokenErr:
			brokenErr = nil
			if !fl.own {
				continue
			}
			sent = syscall.SIGPIPE
			if err := p.Kill(ctx, "PIPE"); err != nil && !isNotRunning(err) {
				fmt.Fprintln(errOut, "sous: signal the command after its stderr's reader went away:", err)
			}
		case <-p.Done():
			return fl.exit(sent)
		case s := <-fl.sigs:
			sig := s.(syscall.Signal)
			if fl.detach != nil {
				return fl.detach(sig)
			}
			if sig == syscall.SIGINT && time.Since(lastInt) < 2*time.Second {
				sig = syscall.SIGKILL
			}
			if sig == syscall.SIGINT {
				lastInt = time.Now()
			}
			if len(unanswered) > 0 && time.Since(unanswered[0]) > killStuck {
				fmt.Fprintf(errOut, "sous: the daemon has not answered for %s; leaving without waiting for %s, which may still be running\n",
					time.Since(unanswered[0]).Round(100*time.Millisecond), p.ID)
				return &exitError{code: 128 + int(s.(syscall.Signal))}
			}
			sent = sig
			unanswered = append(unanswered, time.Now())
			go func() {
				err := p.Kill(ctx, signalName(sig))
				select {
				case killed <- err:
				case <-left:
				}
			}()
		}
	}
}

// exit is sous's exit for the process, which has ended: its exit code, or
// 128+n for a signal (sent: the last one sous sent it, 0 none), 124 for
// its --timeout, 1 when it could not be followed to the end.
func (fl follower) exit(sent syscall.Signal) error {
	p, out := fl.proc, fl.out
	code, exited := p.Exited()
	if !exited {
		return &exitError{code: 1, err: p.Err()}
	}
	switch {
	case p.TimedOut(): // the spawn's Timeout: the daemon's, or the client's
		return &exitError{code: 124, err: fmt.Errorf("timed out after %s; the process group was stopped", fl.timeout)}
	case code == -1 && sent != 0:
		return &exitError{code: 128 + int(sent)}
	case code == -1 && out != nil && out.readerGone():
		// Writing straight to a pipe whose reader went away
		// (Mirror.Direct), it got SIGPIPE from the kernel before
		// sous saw the reader go.
		return &exitError{code: 128 + int(syscall.SIGPIPE)}
	case code == -1 && p.ExitSignal() > 0:
		// What a shell reports, and a line that names the
		// signal: SIGSEGV is a crash, SIGKILL often the OOM killer.
		sig := syscall.Signal(p.ExitSignal())
		return &exitError{code: 128 + int(sig), err: fmt.Errorf("the command was killed by %s (%v)", unix.SignalName(sig), sig)}
	case code == -1:
		return &exitError{code: 255, err: errors.New("the command was killed by a signal")}
	case code != 0:
		return &exitError{code: code}
	}
	return nil
}

// isNotRunning reports whether err says the process is gone: nothing to
// forward to, and nothing to report.
func isNotRunning(err error) bool {
	if errors.Is(err, client.ErrClosed) {
		// The process exited and sous closed its connection while stdin
		// was still being forwarded: nothing left to report.
		return true
	}
	var we *wire.Error
	return wire.IsNotRunning(err) || errors.As(err, &we) && we.Message == wire.MsgProcessNotFound
}
