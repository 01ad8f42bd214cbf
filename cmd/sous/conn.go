package main

import (
	"context"
	"encoding/json"
	"io"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"github.com/seed5ad92d46/sous/daemon/client"
	"github.com/seed5ad92d46/sous/daemon/wire"
)

// withConn opens the target, runs f, and closes the connection (stopping an
// embedded daemon).
func withConn(ctx context.Context, t *Target, f func(ctx context.Context, c callConn) error) error {
	conn, err := t.Open(ctx)
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
func completeProcessIDs(t *Target) cobra.CompletionFunc {
	return func(cmd *cobra.Command, args []string, prefix string) ([]string, cobra.ShellCompDirective) {
		none := cobra.ShellCompDirectiveNoFileComp
		if len(args) > 0 {
			return nil, none
		}
		if url, err := t.URL(); err != nil || client.IsEmbedded(url) {
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

func truncate(s string, n int) string {
	if len(s) <= n {
		return s
	}
	return s[:n] + "..."
}
