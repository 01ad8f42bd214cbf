package main

import (
	"context"
	"fmt"
	"strconv"
	"strings"
	"syscall"
	"text/tabwriter"
	"time"

	"github.com/spf13/cobra"
	"golang.org/x/sys/unix"

	"github.com/seed5ad92d46/sous/daemon/wire"
)

// PsOptions are the flags of `sous ps`.
type PsOptions struct {
	IO     *IO
	Target *Target
	JSON   bool
}

func newCmdPs(f *Factory, runF func(*PsOptions) error) *cobra.Command {
	opts := &PsOptions{IO: f.IO, Target: f.newTarget()}
	cmd := &cobra.Command{
		Use:   "ps",
		Short: "List the processes on a daemon",
		Long: `List the processes a daemon knows: running ones and exited ones whose output
it still keeps for replay. Needs the daemon's process.list extension.

STATUS is "running", "exited N", or "killed (SIGNAME)" for a process a
signal ended (just "killed" where the daemon does not say which). COMMAND is
shell-quoted, so spaces and empty arguments show (printf '%s' 'a b' ''), and
a pipeline lists its stages joined by " | ".`,
		Example: `  sous ps --socket /tmp/sous.sock
  sous ps --remote ssh://build --json | jq '.[] | select(.running)'`,
		Args: cobra.NoArgs,
		RunE: func(*cobra.Command, []string) error {
			if runF != nil {
				return runF(opts)
			}
			return psRun(opts)
		},
	}
	cmd.Flags().BoolVar(&opts.JSON, "json", false, "print JSON for scripts")
	opts.Target.register(cmd)
	return cmd
}

func psRun(opts *PsOptions) error {
	return withConn(context.Background(), opts.Target, func(ctx context.Context, c callConn) error {
		if err := c.RequireFeature(ctx, wire.FeatureProcessList, "listing processes"); err != nil {
			return err
		}
		var res wire.ProcessListResult
		if err := c.Call(ctx, "process.list", map[string]any{}, &res); err != nil {
			return err
		}
		if opts.JSON {
			return writeJSON(opts.IO.Out, res.Processes)
		}
		tw := tabwriter.NewWriter(opts.IO.Out, 2, 4, 2, ' ', 0)
		fmt.Fprintln(tw, "ID\tPID\tSTATUS\tSTARTED\tCOMMAND")
		for _, p := range res.Processes {
			started := time.Unix(0, int64(p.StartTime*1e9)).Format(time.TimeOnly)
			fmt.Fprintf(tw, "%s\t%d\t%s\t%s\t%s\n", cell(p.ID), p.Pid, psStatus(p), started, psCommand(p))
		}
		return tw.Flush()
	})
}

// psStatus is a process's STATUS: running, exited N, or killed (SIGNAME)
// for one a signal ended (exit code -1; plain "killed" from a daemon that
// does not say which signal).
func psStatus(p wire.ProcessInfo) string {
	switch {
	case p.ExitCode == nil:
		return "running"
	case *p.ExitCode != -1:
		return fmt.Sprintf("exited %d", *p.ExitCode)
	case p.Signal > 0:
		return fmt.Sprintf("killed (%s)", unix.SignalName(syscall.Signal(p.Signal)))
	}
	return "killed"
}

// psCommand is a process's COMMAND, shell-quoted as run errors show it;
// a pipeline's stages joined by " | ".
func psCommand(p wire.ProcessInfo) string {
	if len(p.Pipeline) == 0 {
		return shellJoin(append([]string{p.Command}, p.Args...))
	}
	stages := make([]string, len(p.Pipeline))
	for i, argv := range p.Pipeline {
		stages[i] = shellJoin(argv)
	}
	return strings.Join(stages, " | ")
}

// cell keeps one value in its table cell: one with a tab, a newline or
// another control character, C1 ones included, or bytes that are not UTF-8
// (an id may hold anything) is shown quoted.
func cell(s string) string {
	if q := strconv.Quote(s); q[1:len(q)-1] != s {
		return q
	}
	return s
}
