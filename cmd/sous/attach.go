package main

import (
	"context"
	"fmt"
	"strconv"
	"syscall"

	"github.com/spf13/cobra"
	"golang.org/x/sys/unix"

	"github.com/seed5ad92d46/sous/daemon/client"
)

// AttachOptions are the flags and the argument of `sous attach`.
type AttachOptions struct {
	IO              *IO
	Target          *Target
	ID              string
	FromSeq         int64
	KillOnInterrupt bool
}

func newCmdAttach(f *Factory, runF func(*AttachOptions) error) *cobra.Command {
	opts := &AttachOptions{IO: f.IO, Target: f.newTarget()}
	cmd := &cobra.Command{
		Use:   "attach ID",
		Short: "Replay and follow a process until it exits, with its exit code",
		Long: `Reattach to a process on a daemon: replay its output after --from-seq (0 =
everything the daemon retained), then follow it live until it exits, and exit
with its exit code (as 'sous exec' does).

attach only watches. Ctrl-C (SIGINT), SIGTERM and SIGHUP (a closed terminal)
stop the watching and leave the process running: attach prints a line with
the command that follows it again from where this output ended (--from-seq)
and exits 128+n as an interrupted command does (130 for Ctrl-C, 143 for
SIGTERM, 129 for SIGHUP). With --kill-on-interrupt they are forwarded to the
process's group instead, as 'sous exec' forwards them (a second Ctrl-C
within 2 s sends SIGKILL), and attach exits as the process does. When the
reader of attach's output goes away (| head), attach exits 141 and leaves
the process running.`,
		Example: `  sous attach --socket /tmp/sous.sock nightly          # Ctrl-C stops watching
  sous attach --remote ssh://build nightly --from-seq 120
  sous attach --socket /tmp/sous.sock --kill-on-interrupt nightly   # Ctrl-C stops the job`,
		Args:              exactArgs(1, "attach ID"),
		ValidArgsFunction: completeProcessIDs(opts.Target),
		RunE: func(cmd *cobra.Command, args []string) error {
			opts.ID = args[0]
			if opts.FromSeq < 0 {
				return usageErrorf("attach: --from-seq must be 0 or more")
			}
			if runF != nil {
				return runF(opts)
			}
			return attachRun(opts)
		},
	}
	cmd.Flags().Int64Var(&opts.FromSeq, "from-seq", 0, "replay frames after this seq (exclusive)")
	cmd.Flags().BoolVar(&opts.KillOnInterrupt, "kill-on-interrupt", false, "forward Ctrl-C, SIGTERM and SIGHUP to the process instead of detaching from it")
	opts.Target.register(cmd)
	return cmd
}

func attachRun(o *AttachOptions) error {
	ctx, streams, id := context.Background(), o.IO, o.ID
	// Signals are caught from the start: one while attach connects or its
	// replay begins (output may already be on the screen) must not end
	// sous by the signal's default action before it can detach.
	sigs, stopSignals := catchSignals()
	defer stopSignals()
	startCtx, started := cancelOnSignal(ctx, sigs)
	defer started()
	o.Target.Notices = streams.ErrOut
	conn, err := o.Target.Open(startCtx)
	if err != nil {
		if sig := started(); sig != 0 {
			return &exitError{code: 128 + int(sig)}
		}
		return err
	}
	defer conn.Shutdown()
	out, stopSigpipe := newStreamWriter(streams)
	defer stopSigpipe()
	p, res, err := conn.Reattach(startCtx, id, o.FromSeq, out.frame)
	sig := started()
	switch {
	case sig != 0 && err != nil:
		// The reattach was cut short; its replay may be on the screen.
		return interruptedAttach(ctx, conn, o, out.stopAt(), sig)
	case sig != 0 && !res.Found:
		return &exitError{code: 128 + int(sig)} // nothing there to follow
	case err != nil:
		return fmt.Errorf("attach %s: %w", id, err)
	case !res.Found:
		hint := ""
		if client.IsEmbedded(conn.Target()) {
			hint = " (the embedded daemon starts empty: pass --socket or --remote)"
		}
		return fmt.Errorf("attach: no process with id %q on %s%s", id, conn.Target(), hint)
	}
	if res.FirstSeq > o.FromSeq+1 {
		fmt.Fprintf(streams.ErrOut, "sous: attach: output before seq %d is no longer retained by the daemon\n", res.FirstSeq)
	}
	var detach func(syscall.Signal) error
	if !o.KillOnInterrupt {
		detach = func(sig syscall.Signal) error {
			again := o.reattachCommand(out.stopAt())
			if _, exited := p.Exited(); exited || !res.Running {
				// Ctrl-C during the replay of a process that is done.
				fmt.Fprintf(streams.ErrOut, "sous: stopped the replay of %s, which has exited; the rest: %s\n", id, again)
			} else {
				fmt.Fprintf(streams.ErrOut, "sous: detached from %s, which is still running; follow it again with: %s\n", id, again)
			}
			return &exitError{code: 128 + int(sig)}
		}
	}
	if sig != 0 {
		if detach != nil {
			return detach(sig)
		}
		select { // follow forwards it, as any other
		case sigs <- sig:
		default: // four more came meanwhile
		}
	}
	// attach watches: a viewer going away leaves the process be.
	return follower{proc: p, errOut: streams.ErrOut, out: out, sigs: sigs, detach: detach}.follow(ctx)
}

// interruptedAttach handles a signal that came before the reattach was
// answered: attach says how to follow the process again, having printed
// its output up to seq; with --kill-on-interrupt it sends the signal after
// it instead, as it would to a process it follows.
func interruptedAttach(ctx context.Context, conn *client.Conn, o *AttachOptions, seq int64, sig syscall.Signal) error {
	streams, id := o.IO, o.ID
	if !o.KillOnInterrupt {
		fmt.Fprintf(streams.ErrOut, "sous: interrupted while attaching to %s, which was left as it was; follow it with: %s\n", id, o.reattachCommand(seq))
		return &exitError{code: 128 + int(sig)}
	}
	ctx, cancel := context.WithTimeout(ctx, killStuck)
	defer cancel()
	switch err := conn.Call(ctx, "process.kill", map[string]any{"id": id, "signal": signalName(sig)}, nil); {
	case err == nil:
		fmt.Fprintf(streams.ErrOut, "sous: interrupted while attaching to %s, which got %s\n", id, unix.SignalName(sig))
	case !isNotRunning(err):
		fmt.Fprintf(streams.ErrOut, "sous: interrupted while attaching to %s, which could not be signalled (%v); stop it with: sous kill %s\n", id, err, id)
	}
	return &exitError{code: 128 + int(sig)}
}

// reattachCommand is the attach command line that follows the process
// again after frame seq, on the daemon these flags named.
func (o *AttachOptions) reattachCommand(seq int64) string {
	argv := []string{"sous", "attach"}
	for _, f := range []struct{ name, value string }{
		{"--socket", o.Target.Socket}, {"--remote", o.Target.Remote},
		{"--token-file", o.Target.TokenFile}, {"--bridge-cmd", o.Target.BridgeCmd},
	} {
		if f.value != "" {
			argv = append(argv, f.name, f.value)
		}
	}
	argv = append(argv, o.ID)
	if seq > 0 {
		argv = append(argv, "--from-seq", strconv.FormatInt(seq, 10))
	}
	return shellJoin(argv)
}
