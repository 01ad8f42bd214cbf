package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"strconv"
	"strings"
	"syscall"
	"text/tabwriter"
	"time"

	"github.com/spf13/cobra"
	"golang.org/x/sys/unix"

	"github.com/seed5ad92d46/sous/daemon"
	"github.com/seed5ad92d46/sous/daemon/client"
	"github.com/seed5ad92d46/sous/daemon/wire"
)

func init() {
	commandGroups = append(commandGroups, newPsCmd, newKillCmd, newRPCCmd)
}

// withConn opens the target, runs f, and closes the connection (stopping an
// embedded daemon).
func withConn(ctx context.Context, t *targetFlags, f func(ctx context.Context, c callConn) error) error {
	if ctx == nil {
		ctx = context.Background()
	}
	conn, err := t.open(ctx)
	if err != nil {
		return err
	}
	defer conn.Shutdown()
	return f(ctx, conn)
}

// callConn is the part of a client connection the control commands use.
type callConn interface {
	Call(ctx context.Context, method string, params, result any) error
	RequireFeature(ctx context.Context, name, what string) error
	HasFeature(ctx context.Context, name string) (bool, error)
	Target() string
}

func writeJSON(w io.Writer, v any) error {
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	return enc.Encode(v)
}

// completeProcessIDs completes an ID argument with the ids of the processes
// on the daemon the command's target flags name (process.list), running ones
// first. Without a daemon (the embedded one has no processes yet) or on any
// error it offers nothing, quietly: completion must not print errors.
func completeProcessIDs(t *targetFlags) cobra.CompletionFunc {
	return func(cmd *cobra.Command, args []string, prefix string) ([]string, cobra.ShellCompDirective) {
		none := cobra.ShellCompDirectiveNoFileComp
		if len(args) > 0 {
			return nil, none
		}
		if url, err := t.url(); err != nil || url == "embedded" {
			return nil, none
		}
		ctx, cancel := context.WithTimeout(context.Background(), 3*time.Second)
		defer cancel()
		var ids []string
		err := withConn(ctx, t, func(ctx context.Context, c callConn) error {
			var res wire.ProcessListResult
			if err := c.Call(ctx, "process.list", map[string]any{}, &res); err != nil {
				return err
			}
			for _, running := range []bool{true, false} {
				for _, p := range res.Processes {
					if p.Running == running && strings.HasPrefix(p.ID, prefix) {
						ids = append(ids, p.ID)
					}
				}
			}
			return nil
		})
		if err != nil {
			return nil, none
		}
		return ids, none
	}
}

func newPsCmd(streams *IO) *cobra.Command {
	var t targetFlags
	var asJSON bool
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
		RunE: func(cmd *cobra.Command, _ []string) error {
			return withConn(cmd.Context(), &t, func(ctx context.Context, c callConn) error {
				if err := c.RequireFeature(ctx, wire.FeatureProcessList, "listing processes"); err != nil {
					return err
				}
				var res wire.ProcessListResult
				if err := c.Call(ctx, "process.list", map[string]any{}, &res); err != nil {
					return err
				}
				if asJSON {
					return writeJSON(streams.Out, res.Processes)
				}
				tw := tabwriter.NewWriter(streams.Out, 2, 4, 2, ' ', 0)
				fmt.Fprintln(tw, "ID\tPID\tSTATUS\tSTARTED\tCOMMAND")
				for _, p := range res.Processes {
					started := time.Unix(0, int64(p.StartTime*1e9)).Format(time.TimeOnly)
					fmt.Fprintf(tw, "%s\t%d\t%s\t%s\t%s\n", cell(p.ID), p.Pid, psStatus(p), started, psCommand(p))
				}
				return tw.Flush()
			})
		},
	}
	cmd.Flags().BoolVar(&asJSON, "json", false, "print JSON for scripts")
	t.register(cmd)
	return cmd
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

func newKillCmd(streams *IO) *cobra.Command {
	var t targetFlags
	var signal string
	var wait bool
	var grace time.Duration
	var noEscalate bool
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
		ValidArgsFunction: completeProcessIDs(&t),
		RunE: func(cmd *cobra.Command, args []string) error {
			id := args[0]
			if _, err := daemon.ParseSignal(signal); err != nil {
				return usageErrorf("kill: --signal: unknown signal %q (a name such as TERM, INT, HUP or KILL, or a number)", signal)
			}
			return withConn(cmd.Context(), &t, func(ctx context.Context, c callConn) error {
				params := map[string]any{"id": id}
				if signal != "" {
					params["signal"] = signal
				}
				if !wait {
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
				if grace > 0 {
					params["timeoutMs"] = grace.Milliseconds()
				}
				params["escalate"] = !noEscalate
				var res wire.KillAndWaitResult
				if err := c.Call(ctx, "process.killAndWait", params, &res); err != nil {
					return fmt.Errorf("kill %s: %w", id, err)
				}
				switch {
				case !res.Found:
					return fmt.Errorf("kill: no process with id %q on %s", id, c.Target())
				case res.AlreadyExited:
					fmt.Fprintf(streams.Out, "%s had already exited\n", id)
				case res.Died && res.Escalated:
					fmt.Fprintf(streams.Out, "%s killed with SIGKILL after the grace period\n", id)
				case res.Died:
					fmt.Fprintf(streams.Out, "%s exited\n", id)
				default:
					return &exitError{code: 1, err: fmt.Errorf("%s is still running after the grace period", id)}
				}
				return nil
			})
		},
	}
	f := cmd.Flags()
	f.StringVar(&signal, "signal", "", "signal name or number (default TERM)")
	f.BoolVar(&wait, "wait", false, "wait for the process to die (process.killAndWait)")
	durationVar(f, &grace, "grace", 0, "with --wait: how long to wait before escalating (default 3s; 10s, or 10 for seconds)")
	f.BoolVar(&noEscalate, "no-escalate", false, "with --wait: never send SIGKILL")
	t.register(cmd)
	return cmd
}

func newRPCCmd(streams *IO) *cobra.Command {
	var t targetFlags
	cmd := &cobra.Command{
		Use:   "rpc METHOD [JSON|-]",
		Short: "Make one raw JSON-RPC call and print the result",
		Long: `Call a daemon method with params given as JSON (or read from stdin with "-")
and print the result as indented JSON. The token is added for you.

A JSON-RPC error exits 1 with one line on stderr: the method, the daemon's
message as it came and its code. The daemon's "Invalid params" names no
member; sous adds which one did not decode, from the param types it knows:

  sous rpc: files.stat: Invalid params (-32602): path: want string, got number`,
		Example: `  sous rpc server.capabilities
  sous rpc --socket /tmp/sous.sock files.stat '{"path":"/etc/hosts"}'
  sous rpc process.kill '{"id":"nightly","signal":"INT"}'
  echo '{"path":"."}' | sous rpc git.info -`,
		Args: func(cmd *cobra.Command, args []string) error {
			if len(args) < 1 || len(args) > 2 {
				return usageErrorf("rpc: want METHOD and optional JSON params (usage: sous rpc METHOD [JSON|-])")
			}
			return nil
		},
		RunE: func(cmd *cobra.Command, args []string) error {
			var params json.RawMessage
			if len(args) == 2 {
				raw := []byte(args[1])
				if args[1] == "-" {
					b, err := io.ReadAll(streams.In)
					if err != nil {
						return fmt.Errorf("rpc: read params: %w", err)
					}
					raw = b
				}
				raw = bytes.TrimSpace(raw)
				if len(raw) == 0 {
					return usageErrorf("rpc: params are empty: give a JSON value (or omit PARAMS for none)")
				}
				if !json.Valid(raw) {
					return usageErrorf("rpc: params are not valid JSON: %s", truncate(string(raw), 80))
				}
				params = raw
			}
			return withConn(cmd.Context(), &t, func(ctx context.Context, c callConn) error {
				var res json.RawMessage
				err := c.Call(ctx, args[0], params, &res)
				var we *wire.Error
				if errors.As(err, &we) {
					return &exitError{code: 1, err: rpcError(args[0], params, we), plain: true}
				}
				if args[0] == "server.shutdown" && errors.Is(err, client.ErrConnectionLost) {
					return nil // its answer is the connection closing (docs/PROTOCOL.md)
				}
				if err != nil {
					return err
				}
				if err := writeRawJSON(streams.Out, res); err != nil {
					return fmt.Errorf("rpc: %w", err)
				}
				return nil
			})
		},
	}
	t.register(cmd)
	return cmd
}

// rpcError is a JSON-RPC error as rpc prints it: the daemon's message
// verbatim and its code, then, for the bare "Invalid params" the protocol
// prescribes for a mistyped member, which member it was.
func rpcError(method string, params json.RawMessage, we *wire.Error) error {
	msg := fmt.Sprintf("sous rpc: %s: %s (%d)", method, we.Message, we.Code)
	if we.Code == wire.CodeInvalidParams && we.Message == wire.MsgInvalidParams {
		if why := client.ExplainInvalidParams(method, params); why != "" {
			msg += ": " + why
		}
	}
	return errors.New(msg)
}

func truncate(s string, n int) string {
	if len(s) <= n {
		return s
	}
	return s[:n] + "..."
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
