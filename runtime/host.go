package runtime

import (
	"context"
	"fmt"

	"go.starlark.net/starlark"

	"github.com/seed5ad92d46/sous/daemon/client"
)

// Host is a daemon the recipe acts on: the default host behind the
// top-level builtins, or one returned by host(). Its attributes are the
// host-bound globals (spawn, run, files, ...) acting on it: the table's
// entries marked Host.
type Host struct {
	env     *Env
	target  string
	connect func(ctx context.Context) (Daemon, error)
}

var _ starlark.HasAttrs = (*Host)(nil)

// DefaultHost is the host the top-level builtins act on.
func (e *Env) DefaultHost() *Host {
	return &Host{env: e, target: e.Hosts.DefaultTarget(), connect: e.Hosts.Default}
}

// NewHost is the host target of the run env, reached through d (a
// connection from env.Hosts.Open).
func NewHost(env *Env, target string, d Daemon) *Host {
	return &Host{env: env, target: target, connect: func(context.Context) (Daemon, error) { return d, nil }}
}

// Target names the host as the recipe did ("embedded", "unix:///path").
func (h *Host) Target() string { return h.target }

// Connect returns the host's connection, connecting first if need be (the
// default host connects on first use).
func (h *Host) Connect(ctx context.Context) (Daemon, error) { return h.connect(ctx) }

// Local reports a host whose files are this machine's: the embedded
// daemon, or a daemon behind a Unix socket (a socket file is reachable
// only on this machine). ssh and ws hosts may be anywhere.
func (h *Host) Local() bool {
	if h == nil {
		return false
	}
	kind, _, err := client.Kind(h.target)
	return err == nil && (kind == "embedded" || kind == "unix")
}

func (h *Host) String() string        { return fmt.Sprintf("<Host %s>", h.target) }
func (h *Host) Type() string          { return "Host" }
func (h *Host) Freeze()               {} // a handle to a connection the runtime owns
func (h *Host) Truth() starlark.Bool  { return starlark.True }
func (h *Host) Hash() (uint32, error) { return 0, fmt.Errorf("unhashable type: Host") }

func (h *Host) Attr(name string) (starlark.Value, error) {
	return h.env.Table.hostAttr(h, name), nil
}

func (h *Host) AttrNames() []string { return h.env.Table.HostNames() }
