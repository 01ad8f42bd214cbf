package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/spf13/cobra"

	"github.com/seed5ad92d46/sous/daemon/client"
	"github.com/seed5ad92d46/sous/daemon/wire"
	"github.com/seed5ad92d46/sous/runtime/view"
)

// ApprovalsOptions are the flags of `sous approvals`: the list of the
// permission requests that wait for a person on a daemon (its approval.*
// extension, docs/PROTOCOL.md §6).
type ApprovalsOptions struct {
	IO     *IO
	Target *Target
	JSON   bool
}

func newCmdApprovals(f *Factory, runF func(*ApprovalsOptions) error) *cobra.Command {
	opts := &ApprovalsOptions{IO: f.IO, Target: f.newTarget()}
	cmd := &cobra.Command{
		Use:   "approvals [allow|deny ID]",
		Short: "List and answer the agents' requests that wait for a person",
		Long: `A run on a standalone daemon publishes the permission requests that no policy,
approvals() or --allow/--deny rule decided to that daemon, while it waits for a
person (on a terminal, or with --ask). Any holder of the daemon's token lists
them with 'sous approvals' and answers them with 'sous approvals allow ID' or
'sous approvals deny ID', from another shell or another machine, over the
socket, ssh or a WebSocket. The first answer wins, wherever it comes from (the
run's own prompt included); a later one is refused, saying who decided.

The target flags name the daemon the run uses; they are required: sous's
embedded daemon, which this command would otherwise start, holds no requests.

WAITING is how long the request has waited. REQUEST is the request in one
line (the command, the path, the URL); one that holds a control or invisible
character is written $'...' with escapes, as 'sous ps' writes commands.
--json prints the requests as the daemon gives them (id, run, recipe, kind,
session, tool, summary, description, input, since), oldest first.`,
		Example: `  sous approvals --socket /run/sous.sock
  sous approvals --remote ssh://build --json | jq -r '.[] | select(.tool == "Bash") | .id'
  sous approvals allow 3f9c2a --socket /run/sous.sock
  sous approvals deny 3f9c2a --message "use the staging database" --remote ws://build:8003`,
		Args:                       unknownSubcommand,
		SuggestionsMinimumDistance: 2,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if err := needStandalone(opts.Target, cmd); err != nil {
				return err
			}
			if runF != nil {
				return runF(opts)
			}
			return approvalsRun(opts)
		},
	}
	cmd.Flags().BoolVar(&opts.JSON, "json", false, "print the requests as JSON for scripts")
	opts.Target.register(cmd)
	cmd.AddCommand(newCmdApprovalsAllow(f, nil), newCmdApprovalsDeny(f, nil))
	return cmd
}

// unknownSubcommand refuses arguments to the list, which takes none: they
// are a mistyped allow or deny.
func unknownSubcommand(cmd *cobra.Command, args []string) error {
	if len(args) == 0 {
		return nil
	}
	msg := fmt.Sprintf("unknown command %q for %q", args[0], cmd.CommandPath())
	if s := cmd.SuggestionsFor(args[0]); len(s) > 0 {
		msg += "\n\nDid you mean this?\n\t" + strings.Join(s, "\n\t")
	}
	return errors.New(msg + "\nRun '" + cmd.CommandPath() + " --help' for usage.")
}

// needStandalone refuses the embedded daemon: a run's requests wait on the
// daemon it uses, and the one sous would start for this command holds
// none (`sous ps` lists an empty table there; an empty list of requests
// would read as "nothing waits").
func needStandalone(t *Target, cmd *cobra.Command) error {
	url, err := t.URL()
	if err != nil {
		return err
	}
	if client.IsEmbedded(url) {
		return usageErrorf("%s: pass --socket PATH or --remote URL (or set SOUS_SOCKET or SOUS_REMOTE): the requests wait on the daemon the run uses, and sous's embedded daemon holds none",
			strings.TrimPrefix(cmd.CommandPath(), "sous "))
	}
	return nil
}

// openApprovals connects to the target and checks that the daemon holds
// approvals. The caller shuts the connection down.
func openApprovals(ctx context.Context, t *Target) (*client.Conn, error) {
	conn, err := t.Open(ctx)
	if err != nil {
		return nil, err
	}
	ok, err := conn.HasFeature(ctx, wire.FeatureApprovalQueue)
	if err == nil && !ok {
		err = fmt.Errorf("the daemon at %s does not hold approvals (no %s feature): upgrade it", conn.Target(), wire.FeatureApprovalQueue)
	}
	if err != nil {
		conn.Shutdown()
		return nil, err
	}
	return conn, nil
}

func approvalsRun(opts *ApprovalsOptions) error {
	ctx := context.Background()
	conn, err := openApprovals(ctx, opts.Target)
	if err != nil {
		return err
	}
	defer conn.Shutdown()
	asks, err := conn.PendingAsks(ctx)
	if err != nil {
		return err
	}
	if opts.JSON {
		if asks == nil {
			asks = []wire.Ask{} // [] for scripts, never null
		}
		return writeJSON(opts.IO.Out, asks)
	}
	if len(asks) == 0 {
		fmt.Fprintf(opts.IO.ErrOut, "no request waits for an answer on %s\n", conn.Target())
		return nil
	}
	return writeAsks(opts.IO.Out, asks, time.Now())
}

// writeAsks prints the requests as a table. REQUEST comes last, as ps's
// COMMAND does: it is the one long cell, and every column after it would
// be pushed right by the longest.
func writeAsks(w io.Writer, asks []wire.Ask, now time.Time) error {
	tw := tabwriter.NewWriter(w, 2, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "ID\tRUN\tSESSION\tTOOL\tWAITING\tREQUEST")
	for _, a := range asks {
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\t%s\n", cell(a.ID), cell(a.Run), orDash(cell(a.Session)), cell(a.Tool),
			view.Elapsed(now.Sub(a.Since)), requestCell(a.Summary))
	}
	return tw.Flush()
}

// requestCell is a request's summary on one line of the table: as it is,
// or $'...' with escapes when it holds a control character (a newline
// would break the row, a carriage return or an escape sequence could paint
// it as something else), an invisible one (a bidirectional override would
// reorder it) or bytes that are not UTF-8.
func requestCell(s string) string {
	if printable(s) {
		return orDash(s)
	}
	return dollarQuote(s)
}

func orDash(s string) string {
	if s == "" {
		return "-"
	}
	return s
}

// completeAskIDs completes an ID argument with the pending requests of the
// daemon the target flags name. Without one, or on any error, it offers
// nothing, quietly.
func completeAskIDs(t *Target) cobra.CompletionFunc {
	return func(_ *cobra.Command, args []string, prefix string) ([]string, cobra.ShellCompDirective) {
		none := cobra.ShellCompDirectiveNoFileComp
		if url, err := t.URL(); len(args) > 0 || err != nil || client.IsEmbedded(url) {
			return nil, none
		}
		ctx, cancel := context.WithTimeout(context.Background(), 3*time.Second)
		defer cancel()
		conn, err := openApprovals(ctx, t)
		if err != nil {
			return nil, none
		}
		defer conn.Shutdown()
		asks, err := conn.PendingAsks(ctx)
		if err != nil {
			return nil, none
		}
		var ids []string
		for _, a := range asks {
			// The description after the tab is shown by zsh and fish; a
			// newline in either part would end the completion's line.
			if strings.HasPrefix(a.ID, prefix) && printable(a.ID) && !strings.ContainsAny(a.ID, " \t") {
				ids = append(ids, a.ID+"\t"+requestCell(a.Tool+": "+a.Summary))
			}
		}
		return ids, none
	}
}
