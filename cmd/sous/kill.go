package main

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/spf13/cobra"

	"github.com/seed5ad92d46/sous/daemon"
	"github.com/seed5ad92d46/sous/daemon/wire"
)

// KillOptions are the flags and the argument of `sous kill`.
type KillOptions struct {
	IO         *IO
	Target     *Target
	ID         string
	Signal     string // "": the daemon's default, TERM
	Wait       bool
	Grace      time.Duration // with Wait; 0: the daemon's default
	NoEscalate bool
}

func newCmdKill(f *Factory, runF func(*KillOptions) error) *cobra.Command {
	opts := &KillOptions{IO: f.IO, Target: f.newTarget()}
	cmd := &cobra.Command{
		Use:   "kill ID",
		Short: "Signal a process's group, optionally waiting for it to die",
		Long: `Send a signal (default TERM) to a process's whole process group. With --wait,
wait up to --grace for it to die, then escalate to SIGKILL (unless
--no-escalate), and print what happened.`,
		Example: `  sous kill --socket /tmp/sous.sock nightly
  sous kill --socket /tmp/sous.sock nightly --signal INT --wait --grace 10s
  sous kill --socket /tmp/sous.sock nightly --wait --grace 0.5 --no-escalate`,
		Args:              exactArgs(1, "kill ID"),
		ValidArgsFunction: completeProcessIDs(opts.Target),
		RunE: func(cmd *cobra.Command, args []string) error {
			opts.ID = args[0]
			if _, err := daemon.ParseSignal(opts.Signal); err != nil {
				return usageErrorf("kill: --signal: unknown signal %q (a name such as TERM, INT, HUP or KILL, or a number)", opts.Signal)
			}
			if runF != nil {
				return runF(opts)
			}
			return killRun(opts)
		},
	}
	fl := cmd.Flags()
	fl.StringVar(&opts.Signal, "signal", "", "signal name or number (default TERM)")
	fl.BoolVar(&opts.Wait, "wait", false, "wait for the process to die (process.killAndWait)")
	durationVar(fl, &opts.Grace, "grace", 0, "with --wait: how long to wait before escalating (default 3s; 10s, or 10 for seconds)")
	fl.BoolVar(&opts.NoEscalate, "no-escalate", false, "with --wait: never send SIGKILL")
	opts.Target.register(cmd)
	return cmd
}

func killRun(opts *KillOptions) error {
	id := opts.ID
	return withConn(context.Background(), opts.Target, func(ctx context.Context, c callConn) error {
		params := map[string]any{"id": id}
		if opts.Signal != "" {
			params["signal"] = opts.Signal
		}
		if !opts.Wait {
			err := c.Call(ctx, "process.kill", params, nil)
			var we *wire.Error
			if errors.As(err, &we) && we.Message == wire.MsgProcessNotFound {
				return fmt.Errorf("kill: no process with id %q on %s", id, c.Target())
			}
			if err != nil {
				return fmt.Errorf("kill %s: %w", id, err)
			}
			return nil
		}
		if opts.Grace > 0 {
			params["timeoutMs"] = opts.Grace.Milliseconds()
		}
		params["escalate"] = !opts.NoEscalate
		var res wire.KillAndWaitResult
		if err := c.Call(ctx, "process.killAndWait", params, &res); err != nil {
			return fmt.Errorf("kill %s: %w", id, err)
		}
		switch {
		case !res.Found:
			return fmt.Errorf("kill: no process with id %q on %s", id, c.Target())
		case res.AlreadyExited:
			fmt.Fprintf(opts.IO.Out, "%s had already exited\n", id)
		case res.Died && res.Escalated:
			fmt.Fprintf(opts.IO.Out, "%s killed with SIGKILL after the grace period\n", id)
		case res.Died:
			fmt.Fprintf(opts.IO.Out, "%s exited\n", id)
		default:
			return &exitError{code: 1, err: fmt.Errorf("%s is still running after the grace period", id)}
		}
		return nil
	})
}
