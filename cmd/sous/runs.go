package main

import (
	"fmt"
	"text/tabwriter"
	"time"

	"github.com/spf13/cobra"

	"github.com/seed5ad92d46/sous/daemon/client"
	"github.com/seed5ad92d46/sous/runtime/journal"
)

// RunsOptions are the flags of `sous runs`.
type RunsOptions struct {
	IO      *IO
	Target  *Target
	Journal string
	JSON    bool
}

func newCmdRuns(f *Factory, runF func(*RunsOptions) error) *cobra.Command {
	opts := &RunsOptions{IO: f.IO, Target: f.newTarget()}
	cmd := &cobra.Command{
		Use:   "runs [--journal DIR] [flags]",
		Short: "List the durable runs of a daemon or a journal directory",
		Long: `List the durable runs the daemon named by --socket or --remote (or
$SOUS_SOCKET, $SOUS_REMOTE) keeps journals of, or, with --journal DIR, those
sous run --journal DIR journaled in DIR, oldest first: the run's id, its
recipe, its state, when it started and how many steps (builtin calls) its
journal holds.

STATE is "running" (its runner is alive: it holds the journal), "finished
STATUS" (ok, failed, error or interrupted: nothing to resume), "resumable"
(its runner died: sous resume ID continues it, with the same target or
--journal) or "stopped (...)" (its runner died after a call a resume does not
take over yet: a turn in parallel() with fail_fast or hosts=, or hosts(),
"stopped (line N called hosts)"). A run with processes and sessions
(sdk.session, Session.send, Session.start, Pending.wait, wait_all and
parallel() of turns, interrupt, set_model,
set_permission_mode, control, rewind_files, sdk.send) is resumable: see sous resume --help. A resumable
run may still stop when resumed, with exit code 2, at a point only the replay
finds: a call on a daemon that outlives the runner that the runner died in and
a resume cannot take over, a process of the embedded daemon the run had used,
or a recipe changed since the run.

A daemon without the run.journal feature (an older sous, claustrum, or one
serving with no state dir) keeps no journals: runs says so and exits 2. A
daemon serving with its default state dir (a temporary one) loses its
journals when it stops: give it --state-dir to keep them.`,
		Example: `  sous runs --socket /run/sous.sock
  sous runs --remote ssh://build-host --json | jq -r '.[] | select(.state == "resumable") | .run'
  sous runs --journal .sous/runs`,
		Args: cobra.NoArgs,
		RunE: func(*cobra.Command, []string) error {
			if runF != nil {
				return runF(opts)
			}
			return runsList(opts)
		},
	}
	cmd.Flags().StringVar(&opts.Journal, "journal", "", "list the runs journaled in `DIR` (their sous run --journal) instead of a daemon's")
	cmd.Flags().BoolVar(&opts.JSON, "json", false, "print JSON for scripts")
	opts.Target.register(cmd)
	return cmd
}

func runsList(opts *RunsOptions) error {
	var store journal.Store = journal.Dir{Path: opts.Journal}
	if opts.Journal == "" {
		tg, err := opts.Target.Client()
		if err != nil {
			return err
		}
		if client.IsEmbedded(tg.URL) {
			return usageErrorf("runs: which runs? --journal DIR for runs on the embedded daemon, or the daemon that keeps them: --socket PATH or --remote URL")
		}
		dj, err := openDaemonJournal(tg, journalSyncBatch, journal.Fault{}, "runs")
		if err != nil {
			return err
		}
		defer dj.close()
		store = dj.store
	}
	runs, err := store.List()
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
