package main

import (
	"strconv"
	"strings"

	"github.com/spf13/cobra"

	"github.com/seed5ad92d46/sous/runtime/journal"
)

// newCmdResume is `sous resume RUN_ID`: a durable run continued after its
// runner died, from the journal its daemon keeps (--socket, --remote) or
// from --journal DIR. It takes the flags of sous run that say how the run
// looks and is steered; the recipe and its args are the journal's.
func newCmdResume(f *Factory, runF func(*RunOptions) error) *cobra.Command {
	opts := &RunOptions{IO: f.IO, Environ: f.Environ, Getenv: f.Getenv, Target: f.newTarget(), Color: "auto", JournalSync: journalSyncBatch,
		exits: f.Exits}
	cmd := &cobra.Command{
		Use:   "resume RUN_ID [--journal DIR] [flags]",
		Short: "Continue a durable run whose runner died",
		Long: `Resume continues a durable run whose runner died (killed, crashed, its
machine or its ssh session lost) before the run ended. Every run against a
standalone daemon (--socket, --remote ssh://... or ws://..., or $SOUS_SOCKET,
$SOUS_REMOTE) whose features include run.journal is durable: that daemon keeps
its journal under its state directory, and sous resume RUN_ID with the same
target continues it from any client of the daemon, this machine or another.
On the embedded daemon a run is durable with sous run --journal DIR, and
sous resume --journal DIR RUN_ID continues it. The run's id is on stderr when
it starts (sous: run RUN_ID); sous runs lists them.

Resume runs the recipe again from the top with the run's args, in the
directory it ran in, and answers every builtin call the journal holds from
the journal, without doing it again: commands run, files read, git,
extract_tar, getenv, time.now(), sleep, processes (spawn, reattach and every
call on a Process: write, close_stdin, wait, read_line, output, each line of a
lines() loop, kill...) and agent sessions (sdk.session, Session.send and its
Turn, Session.close). What the run printed is not printed again, nor what its
processes had echoed as the run's last call on them started (a line they
echoed after that may show twice). Once the journal ends the run goes on live,
journaling as before, so it can be resumed again. Calls a session's policies,
hooks and tools made in a send the journal answers are not made again.

Processes: a Process is rebuilt from the journal and taken over at the first
call on it the journal does not answer. On a daemon that outlives the runner
(--socket, --remote, host()) it is reattached from its first frame, so
read_line and lines() go on where the run had read; a stdin write the runner
died in is sent again at its offset, which the daemon applies once. On the
embedded daemon it died with the runner: one the run had only spawned runs
again (with a notice); one whose wait() the journal answered is read from that
Result; one the run had written to or read from stops the resume (below).

A call the runner died in (recorded as started, with no answer) is done
again, with a notice on stderr: on the embedded daemon a command cut off in
the middle runs again from its start; a sleep waits only what was left of it.
On a daemon that outlives the runner, run, sh and spawn follow the process the
call had started if the daemon has it (its id is the call's) rather than start
it twice; extract_tar(keep_archive=True) extracts again; git.worktree_create
takes a worktree it finds on its branch as made.

Sessions: the turns the journal holds are not sent again. At the first send it
does not hold, the session's old CLI is ended and a new one resumes the session
by its id (--resume). A send the runner died in on a daemon that outlives it is
finished by that CLI, whose output the resume reads up to the turn's result;
one whose prompt never reached the CLI is sent then; on the embedded daemon it
is sent again, with a notice. A turn started with Session.start whose Turn the
journal lacks is taken the same way when the recipe waits for it (Pending.wait
or wait_all).

Resume refuses (exit code 2): a run that finished (ok, failed or interrupted:
its deferred calls ran); a run whose runner is still alive (it holds the
journal: a daemon lets go of it when the runner's connection goes); a journal
holding a turn handed to parallel() with fail_fast or hosts=, or a
hosts() pool, which this version does not take over yet
(sdk.send it does: a send the runner died in runs again on the embedded
daemon, and stops the resume on one that outlives the runner). It
stops (exit code 2) once the replay finds: a runner that died in a call on a
daemon that outlives it which it cannot take over (git.commit, git.merge,
git.push, git.worktree_remove, pipeline, extract_tar without keep_archive);
a process of the embedded daemon that the run had used and the recipe uses
again; a process the daemon no longer has; and a recipe that was changed so
that it no longer makes the journal's calls:

  recipe changed since run RUN_ID: line N calls X, the journal has Y

Nothing has run again when it says so, and the journal is left as it was.
A daemon without the run.journal feature (an older sous, claustrum, or one
serving with no state dir) keeps no journals: resume says so and exits 2.
The rules a recipe follows to be resumable: docs/RECIPES.md, "Durable runs".`,
		Example: `  sous run --socket /run/sous.sock release.star -a version=1.2.0
  # sous: run 3f9c2a7b1d0e4c55   (on stderr; then the runner dies)
  sous runs --socket /run/sous.sock
  sous resume 3f9c2a7b1d0e4c55 --socket /run/sous.sock
  sous resume 3f9c2a7b1d0e4c55 --remote ssh://build-host   # from another machine
  sous run --journal .sous/runs release.star -a version=1.2.0   # the embedded daemon
  sous resume --journal .sous/runs 3f9c2a7b1d0e4c55 --json --quiet`,
		Args: exactArgs(1, "resume RUN_ID [--journal DIR] [flags]"),
		RunE: func(cmd *cobra.Command, args []string) error {
			opts.Resume = args[0]
			if opts.Quiet && opts.Verbose {
				return usageErrorf("resume: --quiet and --verbose: choose one")
			}
			if runF != nil {
				return runF(opts)
			}
			return runRecipe(opts)
		},
	}
	fl := cmd.Flags()
	fl.StringVar(&opts.Journal, "journal", "", "the `DIR` the run was journaled in (its sous run --journal); without it, the journal the daemon keeps")
	fl.Var(&opts.JournalSync, "journal-sync", journalSyncUsage)
	registerRunFlags(fl, opts)
	opts.Target.register(cmd)
	return cmd
}

// journalFault reads SOUS_FAULT_JOURNAL, a crash at a chosen point for the
// tests: "N" kills sous with SIGKILL right after the N-th journal record it
// appends, "N:torn" half way through writing it.
func journalFault(spec string) (journal.Fault, error) {
	if spec == "" {
		return journal.Fault{}, nil
	}
	n, torn := strings.CutSuffix(spec, ":torn")
	after, err := strconv.Atoi(n)
	if err != nil || after < 1 {
		return journal.Fault{}, usageErrorf("SOUS_FAULT_JOURNAL=%q: want N or N:torn, N >= 1", spec)
	}
	return journal.Fault{CrashAfter: after, Torn: torn}, nil
}
