package main

import (
	"fmt"
	"text/tabwriter"
	"time"

	"github.com/spf13/cobra"

	"github.com/seed5ad92d46/sous/runtime/journal"
)

// RunsOptions are the flags of `sous runs`.
type RunsOptions struct {
	IO      *IO
	Journal string
	JSON    bool
}

func newCmdRuns(f *Factory, runF func(*RunsOptions) error) *cobra.Command {
	opts := &RunsOptions{IO: f.IO}
	cmd := &cobra.Command{
		Use:   "runs --journal DIR",
		Short: "List the durable runs journaled in a directory",
		Long: `List the runs that sous run --journal DIR journaled in DIR, oldest first: the
run's id, its recipe, its state, when it started and how many steps (builtin
calls) its journal holds.

STATE is "running" (its runner is alive: it holds the journal's lock),
"finished STATUS" (ok, failed, error or interrupted: nothing to resume),
"resumable" (its runner died: sous resume --journal DIR ID continues it) or
"stopped (...)" (its runner died after a call a resume does not take over yet:
sdk.send, Session.start, Pending.wait or a session control, "stopped (line N
called sdk.send)"). A run with processes and sessions (sdk.session,
Session.send) is resumable: see sous resume --help. A resumable run
may still stop when resumed, with exit code 2, at a point only the replay
finds: a call on a daemon that outlives the runner that the runner died in and
a resume cannot take over, a process of the embedded daemon the run had used,
or a recipe changed since the run.`,
		Example: `  sous runs --journal .sous/runs
  sous runs --journal .sous/runs --json | jq -r '.[] | select(.state == "resumable") | .run'`,
		Args: cobra.NoArgs,
		RunE: func(*cobra.Command, []string) error {
			if opts.Journal == "" {
				return usageErrorf("runs: --journal DIR is required (the runs of a standalone daemon are not listed yet)")
			}
			if runF != nil {
				return runF(opts)
			}
			return runsList(opts)
		},
	}
	cmd.Flags().StringVar(&opts.Journal, "journal", "", "the `DIR` the runs were journaled in (their sous run --journal)")
	cmd.Flags().BoolVar(&opts.JSON, "json", false, "print JSON for scripts")
	return cmd
}

func runsList(opts *RunsOptions) error {
	runs, err := journal.Dir{Path: opts.Journal}.List()
	if err != nil {
		return fmt.Errorf("runs: %w", err)
	}
	if opts.JSON {
		if runs == nil {
			runs = []journal.Summary{}
		}
		return writeJSON(opts.IO.Out, runs)
	}
	tw := tabwriter.NewWriter(opts.IO.Out, 2, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "ID\tRECIPE\tSTATE\tSTARTED\tSTEPS")
	for _, r := range runs {
		state := r.State
		switch {
		case r.State == journal.StateFinished:
			state += " " + r.Status
		case r.Why != "":
			state += " (" + r.Why + ")"
		}
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%d\n", r.Run, cell(r.Recipe), state,
			r.Started.Local().Format(time.DateTime), r.Steps)
	}
	return tw.Flush()
}
