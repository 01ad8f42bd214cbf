package main

import (
	"context"
	"errors"
	"fmt"

	"github.com/spf13/cobra"

	"github.com/seed5ad92d46/sous/daemon/wire"
)

// ApprovalAnswerOptions are the flags and the argument of `sous approvals
// allow` and `sous approvals deny`.
type ApprovalAnswerOptions struct {
	IO       *IO
	Target   *Target
	ID       string
	Decision string // wire.DecisionAllow or wire.DecisionDeny: the command's
	Message  string
}

func newCmdApprovalsAllow(f *Factory, runF func(*ApprovalAnswerOptions) error) *cobra.Command {
	return newCmdApprovalAnswer(f, wire.DecisionAllow, runF)
}

func newCmdApprovalsDeny(f *Factory, runF func(*ApprovalAnswerOptions) error) *cobra.Command {
	return newCmdApprovalAnswer(f, wire.DecisionDeny, runF)
}

// newCmdApprovalAnswer builds allow or deny: the same command but for the
// decision it sends.
func newCmdApprovalAnswer(f *Factory, decision string, runF func(*ApprovalAnswerOptions) error) *cobra.Command {
	opts := &ApprovalAnswerOptions{IO: f.IO, Target: f.newTarget(), Decision: decision}
	verb, effect := "Allow", "the agent's tool runs (or the command runs as root)"
	example := `  sous approvals allow 3f9c2a --socket /run/sous.sock
  sous approvals allow 3f9c2a --remote ssh://build --message "fine, once"`
	if decision == wire.DecisionDeny {
		verb, effect = "Deny", "the agent is told no, with the message as the reason"
		example = `  sous approvals deny 3f9c2a --socket /run/sous.sock
  sous approvals deny 3f9c2a --remote ws://build:8003 --token-file ~/.sous-token \
      --message "not on main: open a branch first"`
	}
	cmd := &cobra.Command{
		Use:   decision + " ID",
		Short: verb + " a request that waits for a person",
		Long: verb + ` the pending request ID (an ID 'sous approvals' lists): ` + effect + `.
The answer is given "by remote", as the run's events and summary show it.

The first answer wins, whoever gives it: the run's terminal prompt, another
'sous approvals', the daemon's web page. A request that was decided already
is refused with the daemon's word on who decided (exit 1), for instance:

  sous: request 3f9c2a was decided already: denied by remote

and so is an ID the daemon does not know (answered and gone, or never asked).`,
		Example:           example,
		Args:              exactArgs(1, "approvals "+decision+" ID"),
		ValidArgsFunction: completeAskIDs(opts.Target),
		RunE: func(cmd *cobra.Command, args []string) error {
			if opts.ID = args[0]; opts.ID == "" {
				return usageErrorf("approvals %s: the ID is empty (sous approvals lists the pending ones)", decision)
			}
			if err := needStandalone(opts.Target, cmd); err != nil {
				return err
			}
			if runF != nil {
				return runF(opts)
			}
			return approvalAnswerRun(opts)
		},
	}
	cmd.Flags().StringVarP(&opts.Message, "message", "m", "", "why: recorded with the decision; a denial's message is what the agent is told")
	opts.Target.register(cmd)
	return cmd
}

func approvalAnswerRun(opts *ApprovalAnswerOptions) error {
	ctx := context.Background()
	conn, err := openApprovals(ctx, opts.Target)
	if err != nil {
		return err
	}
	defer conn.Shutdown()
	err = conn.AnswerAsk(ctx, wire.AskAnswer{ID: opts.ID, Decision: opts.Decision, Message: opts.Message, By: "remote"})
	var we *wire.Error
	switch {
	case errors.As(err, &we) && (we.Code == wire.CodeApprovalDecided || we.Code == wire.CodeApprovalUnknown):
		// The daemon's message says it all: who decided, or that no such
		// request waits.
		return errors.New(we.Message)
	case err != nil:
		return fmt.Errorf("approvals %s %s: %w", opts.Decision, opts.ID, err)
	}
	past := "allowed"
	if opts.Decision == wire.DecisionDeny {
		past = "denied"
	}
	fmt.Fprintf(opts.IO.Out, "%s %s\n", opts.ID, past)
	return nil
}
