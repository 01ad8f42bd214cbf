package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"

	"github.com/spf13/cobra"

	"github.com/seed5ad92d46/sous/daemon/client"
	"github.com/seed5ad92d46/sous/daemon/wire"
)

// QueryOptions are the flags and arguments every git and files command
// has: each makes one daemon call and prints its result for humans, or as
// JSON. Commands with flags of their own embed them.
type QueryOptions struct {
	IO     *IO
	Target *Target
	JSON   bool
	Args   []string
}

func newQueryOptions(f *Factory) *QueryOptions {
	return &QueryOptions{IO: f.IO, Target: f.newTarget()}
}

// queryUsage is how a git or files command is called.
type queryUsage struct {
	use, short, example string
	nargs               [2]int // min, max positional args
}

// newQueryCmd builds a git or files command that checks its arguments'
// count, takes --json and the target flags, and runs run.
func newQueryCmd(opts *QueryOptions, u queryUsage, run func() error) *cobra.Command {
	cmd := &cobra.Command{
		Use:     u.use,
		Short:   u.short,
		Example: u.example,
		Args: func(cmd *cobra.Command, args []string) error {
			if len(args) < u.nargs[0] || len(args) > u.nargs[1] {
				return usageErrorf("%s: wrong number of arguments (usage: %s %s)", cmd.Name(), cmd.Parent().CommandPath(), u.use)
			}
			return nil
		},
		RunE: func(_ *cobra.Command, args []string) error {
			opts.Args = args
			return run()
		},
	}
	cmd.Flags().BoolVar(&opts.JSON, "json", false, "print the daemon's result as JSON for scripts")
	opts.Target.register(cmd)
	return cmd
}

// query is the call a git or files command makes, and how its result is
// shown.
type query struct {
	method string
	params map[string]any
	result any // a pointer to the result's type
	human  func(w io.Writer, res any) error
	// check turns a result that reports failure into an error (exit 1).
	check func(res any) error
	// humanSaysFailure: the human output already tells what check
	// reports (stat's "does not exist"), so only the exit code says it
	// again.
	humanSaysFailure bool
	// before, when set, runs on the connection before the call, with the
	// call's params: it learns what a human line needs to know of the
	// state the call changes (worktree create: whether the branch
	// existed), or refuses a call that would lose the user's work unasked
	// (worktree remove of a dirty worktree): an error is exit 1.
	before func(ctx context.Context, c callConn, params map[string]any) error
	// verify, when set, runs on the connection after the call, before the
	// human output: it refuses a result that would mislead (files read of
	// a binary file).
	verify func(ctx context.Context, c callConn, params map[string]any, res any) error
}

// call makes the query that build gives on the target's daemon, and
// prints its result. build learns whether the daemon runs on this machine
// (local), where paths are made absolute before they are sent (a remote
// daemon resolves relative paths itself).
func (o *QueryOptions) call(build func(local bool) query) error {
	url, err := o.Target.URL()
	if err != nil {
		return err
	}
	q := build(isLocal(url))
	params, res := q.params, q.result
	return withConn(context.Background(), o.Target, func(ctx context.Context, c callConn) error {
		// What a message names: the path, made absolute, else the
		// first argument.
		subject := ""
		if p, ok := params["path"].(string); ok {
			subject = p
		} else if len(o.Args) > 0 {
			subject = o.Args[0]
		}
		if q.before != nil {
			if err := q.before(ctx, c, params); err != nil {
				return &exitError{code: 1, err: fmt.Errorf("%s: %w", subject, err)}
			}
		}
		// --json prints the daemon's result as it came, not res
		// encoded again: a result type may hold fields the daemon
		// left out (git.info outside a repository).
		var raw json.RawMessage
		into := res
		if o.JSON {
			into = &raw
		}
		if err := c.Call(ctx, q.method, params, into); err != nil {
			var we *wire.Error
			if errors.As(err, &we) && we.Code == wire.CodeInternal {
				// The daemon's own failure (an open, a git run):
				// its words say it; the code adds nothing.
				return &exitError{code: 1, err: fmt.Errorf("%s: %s", q.method, we.Message)}
			}
			if errors.Is(err, client.ErrAnswerTooLarge) {
				return fmt.Errorf("%s: %s: %w", q.method, subject, err)
			}
			return fmt.Errorf("%s: %w", q.method, err)
		}
		if o.JSON {
			if err := json.Unmarshal(raw, res); err != nil {
				return fmt.Errorf("%s: decode result: %w", q.method, err)
			}
		}
		if q.verify != nil && !o.JSON {
			if err := q.verify(ctx, c, params, res); err != nil {
				return &exitError{code: 1, err: fmt.Errorf("%s: %w", subject, err)}
			}
		}
		if o.JSON {
			if err := writeRawJSON(o.IO.Out, raw); err != nil {
				return err
			}
		} else if err := q.human(o.IO.Out, res); err != nil {
			return err
		}
		if q.check != nil {
			if err := q.check(res); err != nil {
				if q.humanSaysFailure && !o.JSON {
					return &exitError{code: 1}
				}
				return &exitError{code: 1, err: fmt.Errorf("%s: %w", subject, err)}
			}
		}
		return nil
	})
}

// writeRawJSON prints a daemon's result indented, as writeJSON prints a
// value.
func writeRawJSON(w io.Writer, raw json.RawMessage) error {
	var out bytes.Buffer
	if err := json.Indent(&out, raw, "", "  "); err != nil {
		return fmt.Errorf("the daemon returned invalid JSON: %w", err)
	}
	out.WriteByte('\n')
	_, err := w.Write(out.Bytes())
	return err
}

// pathArg is the optional PATH argument, made absolute when the daemon runs
// on this machine (a remote daemon resolves relative paths itself).
func pathArg(args []string, i int, local bool) string {
	p := "."
	if i < len(args) {
		p = args[i]
	}
	return hostPath(p, local)
}

// hostPath is a path on the daemon's host, as the arguments and path flags
// (--repo) give it: made absolute when that host is this one.
func hostPath(p string, local bool) string {
	if local {
		return absPath(p)
	}
	return p
}
