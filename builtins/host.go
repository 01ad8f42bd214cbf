package builtins

import (
	"context"
	"errors"
	"fmt"
	"strings"

	"go.starlark.net/starlark"

	"github.com/seed5ad92d46/sous/daemon/client"
)

// Host is a daemon the recipe acts on: the default host behind the
// top-level builtins, or one returned by host(). Its attributes are the
// host-bound globals (spawn, run, files, ...) acting on it.
type Host struct {
	env     *Env
	target  string
	connect func(ctx context.Context) (*client.Client, error)
}

var _ starlark.HasAttrs = (*Host)(nil)

func (h *Host) String() string        { return fmt.Sprintf("<Host %s>", h.target) }
func (h *Host) Type() string          { return "Host" }
func (h *Host) Freeze()               {} // a handle to a connection the runtime owns
func (h *Host) Truth() starlark.Bool  { return starlark.True }
func (h *Host) Hash() (uint32, error) { return 0, fmt.Errorf("unhashable type: Host") }

func (h *Host) Attr(name string) (starlark.Value, error) {
	return h.env.Table.hostAttr(h, name), nil
}

func (h *Host) AttrNames() []string { return h.env.Table.HostNames() }

// local reports a host whose files are this machine's: the embedded
// daemon, or a daemon behind a Unix socket (a socket file is reachable
// only on this machine). ssh and ws hosts may be anywhere.
func (h *Host) local() bool {
	if h == nil {
		return false
	}
	kind, _, err := client.Kind(h.target)
	return err == nil && (kind == "embedded" || kind == "unix")
}

// client connects to the host if need be (the default host connects on
// first use).
func (h *Host) client(c *Call) (*client.Client, error) {
	var cl *client.Client
	err := c.Env.block(c.Env.Ctx, func(ctx context.Context) (err error) {
		cl, err = h.connect(ctx)
		return err
	})
	if err != nil {
		return nil, c.errorf("%s: %v", h.target, err)
	}
	return cl, nil
}

func hostEntries() []Entry {
	return []Entry{
		{Name: "host", Sig: "host(target, *, token=None) -> Host",
			Doc: "Connects to another daemon: \"embedded\" (the daemon inside sous), \"unix:///path/to.sock\", " +
				"\"ssh://[user@]host[:port][/path/to.sock]\" (through the system ssh and the remote bridge) or " +
				"\"ws://host:port[/path]\" (a daemon serving --listen ws://...; the token also goes as a bearer header). " +
				"Socket, ssh and ws connections reconnect and reattach by themselves when they drop. " +
				"The token is token=, else $SOUS_TOKEN, else $CLAUDE_RPC_TOKEN. The Host has the host-bound builtins " +
				"as methods and modules: h.spawn, h.run, h.sh, h.pipeline, h.reattach, h.files, h.git, h.extract_tar, h.sdk.",
			Fn: hostBuiltin},
		{Name: "Host", Sig: "Host",
			Doc: "A connection to a daemon, from host(). Every builtin marked as acting on a host is also its method " +
				"(h.run(...), h.files.read(...)) and acts on that daemon. The connection is closed when the run ends; " +
				"processes on an embedded daemon are stopped then, those on a socket daemon keep running."},
	}
}

func hostBuiltin(c *Call) (starlark.Value, error) {
	var target, token string
	if err := bind(c, 1, req("target", str(&target)), opt("token", optStr(&token))); err != nil {
		return nil, err
	}
	if target == "" {
		// The command line's empty --remote means the embedded daemon; an
		// empty target here is more likely a variable that was never set.
		return nil, c.errorf(`target is empty: want "embedded", "unix:///path/to.sock", "ssh://host" or "ws://host:port"`)
	}
	if token == "" {
		token = client.TokenFromEnv(func(name string) string {
			v, _ := c.Env.Getenv(name)
			return v
		})
	}
	var cl *client.Client
	err := c.Env.block(c.Env.Ctx, func(ctx context.Context) (err error) {
		cl, err = c.Env.Hosts.Open(ctx, target, token)
		return err
	})
	switch {
	case errors.Is(err, client.ErrNoToken):
		return nil, c.errorf("%s: the daemon requires a token and none was given: pass token=, or set SOUS_TOKEN or CLAUDE_RPC_TOKEN", target)
	case errors.Is(err, client.ErrTokenRefused):
		return nil, c.errorf("%s: the daemon refused the token (host's token=, else SOUS_TOKEN, else CLAUDE_RPC_TOKEN)", target)
	case err != nil:
		return nil, c.errorf("%v", err)
	}
	return &Host{env: c.Env, target: target, connect: func(context.Context) (*client.Client, error) { return cl, nil }}, nil
}

// hostCall makes one daemon call on the call's host. subject (a path)
// leads the error message when set.
func hostCall(c *Call, subject, method string, params, result any) error {
	return hostDo(c, subject, method, func(ctx context.Context, cl *client.Client) error {
		return cl.Call(ctx, method, params, result)
	})
}

// hostDo runs f with the client of the call's host, as hostCall makes its
// call: for the client's methods that make more than one (with an
// extension, or without it).
func hostDo(c *Call, subject, method string, f func(ctx context.Context, cl *client.Client) error) error {
	cl, err := c.Host.client(c)
	if err != nil {
		return err
	}
	err = c.Env.block(c.Env.Ctx, func(ctx context.Context) error { return f(ctx, cl) })
	if err == nil {
		return nil
	}
	// The daemon's messages may start with the method's name
	// ("files.read: path is a directory"); the builtin's name leads already.
	msg := strings.TrimPrefix(daemonMessage(err), method+": ")
	if subject != "" {
		return c.errorf("%s: %s", subject, msg)
	}
	return c.errorf("%s", msg)
}
