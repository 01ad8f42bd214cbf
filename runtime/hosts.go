package runtime

import (
	"context"
	"errors"
	"fmt"
	"sync"

	"github.com/seed5ad92d46/sous/daemon/client"
)

// hosts selects and owns a run's daemon connections: the default host
// (the --socket or --remote daemon, else the embedded one, connected on
// first use),
// and every host() the recipe opens. Close ends them all; processes on the
// embedded daemon are stopped then.
//
// The run has at most one embedded daemon: host("embedded") is another
// connection to it, so a process spawned through one can be reattached
// through the other.
type hosts struct {
	def client.Target // the default host; its Embedded builds the embedded daemon

	mu       sync.Mutex
	defConn  Daemon           // the default host, once connected
	embedded *client.Conn     // the run's embedded daemon, once started
	conns    []*client.Conn   // socket, ssh and WebSocket connections
	extra    []*client.Client // further connections to the embedded daemon
	closed   bool
}

var _ Connector = (*hosts)(nil)

// newHosts makes a run's hosts; defConn, when set, is the default host's
// connection, opened by the caller, who closes it (Options.HostConn).
func newHosts(def client.Target, defConn *client.Conn) *hosts {
	if def.URL == "" {
		def.URL = "embedded"
	}
	h := &hosts{def: def}
	if defConn != nil {
		h.defConn = ClientDaemon(defConn.Client)
	}
	return h
}

// DefaultTarget implements Connector.
func (h *hosts) DefaultTarget() string { return h.def.URL }

// Default implements Connector. A failed connection is not kept:
// the next call tries again.
func (h *hosts) Default(ctx context.Context) (Daemon, error) {
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.defConn != nil {
		return h.defConn, nil
	}
	kind, _, err := client.Kind(h.def.URL)
	if err != nil {
		return nil, err
	}
	var conn *client.Conn
	if kind == "embedded" {
		conn, err = h.startEmbedded(ctx)
	} else {
		conn, err = h.dial(ctx, h.def)
	}
	if err != nil {
		return nil, err
	}
	h.defConn = ClientDaemon(conn.Client)
	return h.defConn, nil
}

// Open implements Connector.
func (h *hosts) Open(ctx context.Context, target, token string) (Daemon, error) {
	kind, _, err := client.Kind(target)
	if err != nil {
		return nil, err
	}
	h.mu.Lock()
	defer h.mu.Unlock()
	switch kind {
	case "embedded":
		conn, err := h.startEmbedded(ctx)
		if err != nil {
			return nil, err
		}
		c := client.Embedded(conn.Server())
		h.extra = append(h.extra, c)
		return ClientDaemon(c), nil
	case "unix", "ssh", "ws":
		// ssh targets reuse the command line's ssh settings (SOUS_SSH_COMMAND,
		// --bridge-cmd), so host("ssh://...") reaches hosts the way --remote does.
		conn, err := h.dial(ctx, client.Target{URL: target, Token: token, SSH: h.def.SSH, Options: h.def.Options})
		if err != nil {
			return nil, err
		}
		return ClientDaemon(conn.Client), nil
	}
	return nil, fmt.Errorf("target %s: %s targets are not supported yet", target, kind)
}

// startEmbedded starts the run's embedded daemon once. h.mu is held.
func (h *hosts) startEmbedded(ctx context.Context) (*client.Conn, error) {
	if h.closed {
		return nil, errors.New("the run is over")
	}
	if h.embedded == nil {
		conn, err := client.Open(ctx, client.Target{URL: "embedded", Embedded: h.def.Embedded})
		if err != nil {
			return nil, fmt.Errorf("start the embedded daemon: %w", err)
		}
		h.embedded = conn
	}
	return h.embedded, nil
}

// dial connects to a socket, ssh or WebSocket daemon. h.mu is held.
func (h *hosts) dial(ctx context.Context, t client.Target) (*client.Conn, error) {
	if h.closed {
		return nil, errors.New("the run is over")
	}
	conn, err := client.Open(ctx, t)
	if err != nil {
		return nil, err
	}
	h.conns = append(h.conns, conn)
	return conn, nil
}

// Close implements Connector: it ends every connection, the embedded
// daemon last: its Shutdown stops every process it still runs (SIGTERM,
// then SIGKILL after its grace). Processes on socket daemons keep running,
// as a daemon's processes outlive their clients.
func (h *hosts) Close() error {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.closed = true
	var errs []error
	for _, c := range h.extra {
		errs = append(errs, c.Close())
	}
	for _, c := range h.conns {
		errs = append(errs, c.Shutdown())
	}
	if h.embedded != nil {
		errs = append(errs, h.embedded.Shutdown())
	}
	h.extra, h.conns, h.embedded, h.defConn = nil, nil, nil, nil
	return errors.Join(errs...)
}
