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

// RPCOptions are the arguments of `sous rpc`.
type RPCOptions struct {
	IO        *IO
	Target    *Target
	Method    string
	HasParams bool   // JSON|- was given
	Params    string // the JSON, or "-" to read it from stdin
}

func newCmdRPC(f *Factory, runF func(*RPCOptions) error) *cobra.Command {
	opts := &RPCOptions{IO: f.IO, Target: f.newTarget()}
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
			opts.Method = args[0]
			if opts.HasParams = len(args) == 2; opts.HasParams {
				opts.Params = args[1]
			}
			if runF != nil {
				return runF(opts)
			}
			return rpcRun(opts)
		},
	}
	opts.Target.register(cmd)
	return cmd
}

func rpcRun(opts *RPCOptions) error {
	params, err := opts.params()
	if err != nil {
		return err
	}
	method := opts.Method
	return withConn(context.Background(), opts.Target, func(ctx context.Context, c callConn) error {
		var res json.RawMessage
		err := c.Call(ctx, method, params, &res)
		var we *wire.Error
		if errors.As(err, &we) {
			return &exitError{code: 1, err: rpcError(method, params, we), plain: true}
		}
		if method == "server.shutdown" && errors.Is(err, client.ErrConnectionLost) {
			return nil // its answer is the connection closing (docs/PROTOCOL.md)
		}
		if err != nil {
			return err
		}
		if err := writeRawJSON(opts.IO.Out, res); err != nil {
			return fmt.Errorf("rpc: %w", err)
		}
		return nil
	})
}

// params are the call's params: nil without any, else the JSON given or
// read from stdin, which must be a JSON value.
func (o *RPCOptions) params() (json.RawMessage, error) {
	if !o.HasParams {
		return nil, nil
	}
	raw := []byte(o.Params)
	if o.Params == "-" {
		b, err := io.ReadAll(o.IO.In)
		if err != nil {
			return nil, fmt.Errorf("rpc: read params: %w", err)
		}
		raw = b
	}
	raw = bytes.TrimSpace(raw)
	if len(raw) == 0 {
		return nil, usageErrorf("rpc: params are empty: give a JSON value (or omit PARAMS for none)")
	}
	if !json.Valid(raw) {
		return nil, usageErrorf("rpc: params are not valid JSON: %s", truncate(string(raw), 80))
	}
	return raw, nil
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
