package agent

import (
	"context"
	"fmt"
	"time"

	"github.com/seed5ad92d46/sous/daemon/client"
)

// transport carries lines between the session and the CLI and owns the CLI
// process. It is everything the session needs from stdio or WebSocket: the
// session never looks at the concrete type.
type transport interface {
	// send writes one line (newline included). It may block; it is only
	// called from the session's writer goroutine.
	send(ctx context.Context, o outbound) error
	// stop ends the CLI and its process tree and releases the transport.
	stop() error
	// note keeps a line where error messages will show it (e.g. a line on
	// stdout that is not a protocol message).
	note(line string)
	// output is what the CLI said that was not protocol: the end of its
	// stderr and the notes.
	output() string
	// waitExit waits up to d for the daemon to report that the CLI exited
	// and then says how (exit code and stderr); nil if it did not exit.
	waitExit(d time.Duration) error
	// explainStartFailure turns the error of a start whose initialize got
	// no answer into one that says what to do, when the transport knows
	// more about why (the WebSocket one does).
	explainStartFailure(err error) error
}

// receiver is the session as a transport sees it: where the CLI's lines go.
// Both methods must return quickly (they run on the client's frame handler
// or a WebSocket reader).
type receiver interface {
	// deliver takes one line from the CLI, without its newline.
	deliver(line []byte)
	// ended says the CLI's output ended for good, and why.
	ended(err error)
}

// launch is what a transport needs to start the CLI on the daemon.
type launch struct {
	client    *client.Client
	cli       []string // program and leading arguments
	args      []string // the rest of the command line (buildArgs)
	cwd       string
	env       map[string]string // merged over the daemon host's environment
	processID string
	to        receiver
}

// startTransport starts the CLI under the transport kind (an
// Options.Transport value, already validated).
func startTransport(ctx context.Context, kind string, l launch) (transport, error) {
	switch kind {
	case TransportStdio:
		t, err := startStdio(ctx, l)
		if err != nil {
			return nil, err
		}
		return t, nil
	case TransportWebSocket:
		t, err := startWebSocket(ctx, l)
		if err != nil {
			return nil, err
		}
		return t, nil
	}
	return nil, fmt.Errorf("agent: transport %q: want %q or %q", kind, TransportStdio, TransportWebSocket)
}

// outbound is one line for the CLI with what a transport needs to know to
// replay it after a reconnect.
type outbound struct {
	line []byte
	meta outMeta
}

// outKind says what settles an outgoing message: which answer from the CLI
// shows it arrived (see wsTransport.settle).
type outKind int

const (
	outOther   outKind = iota // never replayed (keep_alive)
	outUser                   // settled by the turn's result
	outControl                // our control_request: settled by its control_response
	outAnswer                 // our control_response to the CLI's control request
)

type outMeta struct {
	kind      outKind
	requestID string
	toolUseID string // an answer to can_use_tool: settled by the tool's result
}

// Both transports are all the session needs.
var (
	_ transport = (*stdioTransport)(nil)
	_ transport = (*wsTransport)(nil)
)
