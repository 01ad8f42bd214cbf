package main

import (
	"bufio"
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"os"
	"strings"
	"syscall"
	"time"

	"github.com/spf13/cobra"

	"github.com/seed5ad92d46/sous/daemon/client"
	"github.com/seed5ad92d46/sous/daemon/wire"
)

// DaemonStopOptions are the flags of `sous daemon stop`.
type DaemonStopOptions struct {
	IO        *IO
	Getenv    func(string) string // SOUS_TOKEN, CLAUDE_RPC_TOKEN
	Socket    string
	TokenFile string
}

func newCmdDaemonStop(f *Factory, runF func(*DaemonStopOptions) error) *cobra.Command {
	opts := &DaemonStopOptions{IO: f.IO, Getenv: f.Getenv}
	cmd := &cobra.Command{
		Use:   "stop",
		Short: "Ask a running daemon to shut down (best effort)",
		Long: `Send server.shutdown to the daemon on --socket (default $SOUS_SOCKET, else
~/.claude/remote/rpc.sock, as serve and start), with the token from
--token-file (read, not deleted), else SOUS_TOKEN, else CLAUDE_RPC_TOKEN.
It exits 0, silently, once the daemon has taken the request and closed the
connection (it then stops its children and removes its socket).

It exits 1 with one line on stderr when nothing was stopped: no daemon
listens on the socket (unlike claustrum -stop, which exits 0 there), no
token was given, or the daemon refused the token and runs on.`,
		Example: `  SOUS_TOKEN=$TOKEN sous daemon stop --socket "$XDG_RUNTIME_DIR/sous.sock"
  sous daemon stop --socket "$XDG_RUNTIME_DIR/sous.sock" --token-file ~/.config/sous/token
  sous daemon stop --token-file ~/.config/sous/token || true   # none running is fine`,
		Args: cobra.NoArgs,
		RunE: func(*cobra.Command, []string) error {
			if runF != nil {
				return runF(opts)
			}
			return daemonStopRun(opts)
		},
	}
	cmd.Flags().StringVar(&opts.Socket, "socket", f.defaultSocket(), "the daemon's Unix socket ($SOUS_SOCKET, else claustrum's default)")
	cmd.Flags().StringVar(&opts.TokenFile, "token-file", "", "read the token from this file (else SOUS_TOKEN, then CLAUDE_RPC_TOKEN)")
	return cmd
}

func daemonStopRun(opts *DaemonStopOptions) error {
	token := client.TokenFromEnv(opts.Getenv)
	if opts.TokenFile != "" {
		var err error
		if token, err = client.ReadTokenFile(opts.TokenFile); err != nil {
			return usageErrorf("--token-file: %v", err)
		}
	}
	if opts.Socket == "" {
		return usageErrorf("stop: --socket must name the daemon's socket")
	}
	return stopDaemon(opts.Socket, token)
}

// stopDaemon sends server.shutdown. A daemon that stops closes the
// connection without a reply; every other outcome leaves a daemon running,
// or none there, and is said in one line (exit 1).
func stopDaemon(socket, token string) error {
	conn, err := net.DialTimeout("unix", socket, 2*time.Second)
	if err != nil {
		return fmt.Errorf("daemon stop: no daemon listens on %s (%s)", socket, dialFailure(err))
	}
	defer conn.Close()
	if token == "" {
		// The daemon never runs without a token, so it would refuse.
		return fmt.Errorf("daemon stop: the daemon on %s needs its token to stop, and none was given (set --token-file, SOUS_TOKEN or CLAUDE_RPC_TOKEN)", socket)
	}
	auth, _ := json.Marshal(token) // a string always encodes
	req := `{"jsonrpc":"2.0","id":1,"method":"server.shutdown","auth":` + string(auth) + "}\n"
	if _, err := conn.Write([]byte(req)); err != nil {
		return fmt.Errorf("daemon stop: send to the daemon on %s: %w", socket, err)
	}
	// A stopping daemon closes the connection without a reply; a refusing
	// one answers. Either way, wait briefly for whichever comes.
	conn.SetReadDeadline(time.Now().Add(5 * time.Second))
	line, err := bufio.NewReader(conn).ReadString('\n')
	switch {
	case line == "" && errors.Is(err, os.ErrDeadlineExceeded):
		return fmt.Errorf("daemon stop: the daemon on %s neither answered nor stopped within 5s", socket)
	case line == "":
		return nil // it closed the connection: stopping
	}
	var resp wire.Response
	if json.Unmarshal([]byte(line), &resp) != nil || resp.Error == nil {
		return fmt.Errorf("daemon stop: the daemon on %s answered instead of stopping, and is still running: %s", socket, truncate(strings.TrimSpace(line), 200))
	}
	if resp.Error.Code == wire.CodeUnauthorized {
		return fmt.Errorf("daemon stop: the daemon on %s refused the token and is still running (set --token-file, SOUS_TOKEN or CLAUDE_RPC_TOKEN to the daemon's token)", socket)
	}
	return fmt.Errorf("daemon stop: the daemon on %s is still running: %s (%d)", socket, resp.Error.Message, resp.Error.Code)
}

// dialFailure says why a socket could not be reached, in a few words.
func dialFailure(err error) string {
	switch {
	case errors.Is(err, syscall.ENOENT):
		return "no such file or directory"
	case errors.Is(err, syscall.ECONNREFUSED):
		return "connection refused: a socket left behind"
	case errors.Is(err, syscall.EACCES):
		return "permission denied"
	}
	var oe *net.OpError
	if errors.As(err, &oe) && oe.Err != nil {
		return oe.Err.Error()
	}
	return err.Error()
}
