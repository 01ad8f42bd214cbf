package main

import (
	"fmt"
	"os"
	"path/filepath"

	"github.com/spf13/cobra"
)

// newCmdDaemon is the daemon group: serve, start, stop and bridge.
func newCmdDaemon(f *Factory) *cobra.Command {
	cmd := &cobra.Command{
		Use:   "daemon",
		Short: "Run, start, stop or bridge to a sous daemon",
		Long: `A daemon owns processes, files, git and archives and speaks claustrum's
JSON-RPC protocol on a Unix socket (mode 0600). sous run uses an embedded
daemon by default; a standalone daemon lets processes outlive the runner and
be reattached from other runs, hosts (over ssh) and tools.`,
		Example: `  printf '%s\n' "$TOKEN" | sous daemon start --socket "$XDG_RUNTIME_DIR/sous.sock" --token-fd 0
  SOUS_TOKEN=$TOKEN sous run --socket "$XDG_RUNTIME_DIR/sous.sock" recipe.star
  SOUS_TOKEN=$TOKEN sous daemon stop --socket "$XDG_RUNTIME_DIR/sous.sock"`,
	}
	cmd.AddCommand(
		newCmdDaemonServe(f, nil),
		newCmdDaemonStart(f, nil),
		newCmdDaemonStop(f, nil),
		newCmdDaemonBridge(f, nil),
	)
	return cmd
}

// defaultSocket is the socket of serve, start, stop and bridge without
// --socket: $SOUS_SOCKET, else claustrum's default (homeSocket).
func (f *Factory) defaultSocket() string {
	// The same variable the clients' --socket defaults to, so that
	// `export SOUS_SOCKET=...` serves, stops and reaches one daemon.
	if s := f.Getenv("SOUS_SOCKET"); s != "" {
		return s
	}
	return f.homeSocket()
}

// homeSocket is claustrum's default socket, ~/.claude/remote/rpc.sock
// ($HOME's, as os.UserHomeDir finds it; relative without a $HOME).
func (f *Factory) homeSocket() string {
	return filepath.Join(f.Getenv("HOME"), ".claude", "remote", "rpc.sock")
}

// makeHomeSocketDir creates the directory of ~/.claude/remote/rpc.sock
// (0700, as the socket is the daemon's alone) when that is the socket to
// serve: nobody chose that path, so its directory missing is no mistake
// to report. (claustrum leaves it to the user.) A directory of a socket
// the user named must exist: a typo there should not make directories.
func makeHomeSocketDir(socket, homeSocket string) error {
	if socket == "" || socket != homeSocket {
		return nil
	}
	if err := os.MkdirAll(filepath.Dir(socket), 0o700); err != nil {
		return fmt.Errorf("create the default socket's directory: %w", err)
	}
	return nil
}
