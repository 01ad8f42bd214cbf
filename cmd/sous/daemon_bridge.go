package main

import (
	"errors"
	"fmt"
	"io"
	"net"

	"github.com/spf13/cobra"
)

// DaemonBridgeOptions are the flags of `sous daemon bridge`.
type DaemonBridgeOptions struct {
	IO     *IO
	Socket string
	// PassStdio hands stdin and stdout to the daemon (connection.stdio)
	// when it takes them, rather than relaying (bridge_stdio.go).
	PassStdio bool
}

func newCmdDaemonBridge(f *Factory, runF func(*DaemonBridgeOptions) error) *cobra.Command {
	opts := &DaemonBridgeOptions{IO: f.IO}
	cmd := &cobra.Command{
		Use:   "bridge",
		Short: "Relay stdin/stdout to a daemon's socket (for ssh)",
		Long: `Relay bytes between stdin/stdout and the daemon's socket, unchanged: no auth
is injected, so whatever speaks through the bridge sends its own token. This is
what sous runs on the far side of an ssh connection.

When stdin and stdout are pipes or sockets (as sshd gives them) and the daemon
offers connection.stdio, the bridge passes them to the daemon, which then reads
and writes them itself; the bridge relays nothing and exits when the daemon
ends the connection. Any other daemon gets the plain relay.`,
		Example: `  ssh build-host sous daemon bridge --socket /run/sous.sock`,
		Args:    cobra.NoArgs,
		RunE: func(*cobra.Command, []string) error {
			if runF != nil {
				return runF(opts)
			}
			return daemonBridgeRun(opts)
		},
	}
	cmd.Flags().StringVar(&opts.Socket, "socket", f.defaultSocket(), "the daemon's Unix socket ($SOUS_SOCKET, else claustrum's default)")
	cmd.Flags().BoolVar(&opts.PassStdio, "pass-stdio", true, "hand stdin and stdout to a daemon that takes them (connection.stdio) instead of relaying")
	return cmd
}

// daemonBridgeRun relays stdin to the daemon's socket and its answers to
// stdout until the client is done.
func daemonBridgeRun(opts *DaemonBridgeOptions) error {
	streams := opts.IO
	conn, err := net.Dial("unix", opts.Socket)
	if err != nil {
		return fmt.Errorf("dial server: %w", err)
	}
	var fromDaemon io.Reader = conn
	if opts.PassStdio {
		var handed bool
		handed, conn, fromDaemon, err = passStdio(conn.(*net.UnixConn), streams, opts.Socket) // bridge_stdio.go
		if err != nil {
			return err
		}
		if handed {
			return nil
		}
	}
	defer conn.Close()
	done := make(chan struct{})
	go func() {
		relay(conn, streams.In)
		// The client finished sending; let the daemon finish answering.
		if uc, ok := conn.(*net.UnixConn); ok {
			uc.CloseWrite()
		}
		close(done)
	}()
	if _, err := relay(streams.Out, fromDaemon); err != nil && !errors.Is(err, net.ErrClosed) {
		return fmt.Errorf("bridge: %w", err)
	}
	return nil
}

// relayBuffer is what one read of the relay takes: the daemon writes its
// frames in batches of up to a few hundred KiB.
const relayBuffer = 256 << 10

// relay copies src to dst with plain reads and writes. io.Copy between a
// socket and a file splices through a pipe of its own, which on the answers'
// side (the daemon's socket into sshd's pipe) took the bridge 2.7 s of CPU
// to move 340 MB, 57% of a CPU, most of it in splice(2) itself.
func relay(dst io.Writer, src io.Reader) (int64, error) {
	return io.CopyBuffer(struct{ io.Writer }{dst}, struct{ io.Reader }{src}, make([]byte, relayBuffer))
}
