package builtins

import (
	"context"
	"errors"
	"strings"

	"go.starlark.net/starlark"

	"github.com/seed5ad92d46/sous/daemon/client"
	"github.com/seed5ad92d46/sous/runtime"
)

// hostClient connects to h if need be (the default host connects on
// first use), through the event loop.
func hostClient(c *runtime.Call, h *runtime.Host) (runtime.Daemon, error) {
	var d runtime.Daemon
	err := block(c.Env, c.Env.Ctx, func(ctx context.Context) (err error) {
		d, err = h.Connect(ctx)
		return err
	})
	if err != nil {
		return nil, c.Errorf("%s: %v", h.Target(), err)
	}
	return d, nil
}

func hostEntries() []runtime.Entry {
	return []runtime.Entry{
		{Name: "host", Journal: runtime.JournalPure, Sig: "host(target, *, token=None) -> Host",
			Doc: "Connects to another daemon: \"embedded\" (the daemon inside sous), \"unix:///path/to.sock\", " +
				"\"ssh://[user@]host[:port][/path/to.sock]\" (through the system ssh and the remote bridge) or " +
				"\"ws://host:port[/path]\" (a daemon serving --listen ws://...; the token also goes as a bearer header). " +
				"Socket, ssh and ws connections reconnect and reattach by themselves when they drop. " +
				"The token is token=, else $SOUS_TOKEN, else $CLAUDE_RPC_TOKEN. The Host has the host-bound builtins " +
				"as methods and modules: h.spawn, h.run, h.sh, h.pipeline, h.reattach, h.files, h.git, h.extract_tar, h.sdk, " +
				"h.dotenv.",
			Fn: hostBuiltin},
		{Name: "Host", Sig: "Host",
			Doc: "A connection to a daemon, from host(). Every builtin marked as acting on a host is also its method " +
				"(h.run(...), h.files.read(...)) and acts on that daemon. The connection is closed when the run ends; " +
				"processes on an embedded daemon are stopped then, those on a socket daemon keep running."},
	}
}

func hostBuiltin(c *runtime.Call) (starlark.Value, error) {
	var target, token string
	if err := bind(c, 1, req("target", str(&target)), opt("token", optStr(&token))); err != nil {
		return nil, err
	}
	h, err := openHost(c, target, token)
	if err != nil {
		return nil, err
	}
	return h, nil
}

// openHost connects to target as host() does (hosts() too): the token is
// token, else the environment's.
func openHost(c *runtime.Call, target, token string) (*runtime.Host, error) {
	if target == "" {
		// The command line's empty --remote means the embedded daemon; an
		// empty target here is more likely a variable that was never set.
		return nil, c.Errorf(`target is empty: want "embedded", "unix:///path/to.sock", "ssh://host" or "ws://host:port"`)
	}
	if token == "" {
		token = client.TokenFromEnv(func(name string) string {
			v, _ := c.Env.Getenv(name)
			return v
		})
	}
	var d runtime.Daemon
	err := block(c.Env, c.Env.Ctx, func(ctx context.Context) (err error) {
		d, err = c.Env.Hosts.Open(ctx, target, token)
		return err
	})
	switch {
	case errors.Is(err, client.ErrNoToken):
		return nil, c.Errorf("%s: the daemon requires a token and none was given: pass token=, or set SOUS_TOKEN or CLAUDE_RPC_TOKEN", target)
	case errors.Is(err, client.ErrTokenRefused):
		return nil, c.Errorf("%s: the daemon refused the token (host's token=, else SOUS_TOKEN, else CLAUDE_RPC_TOKEN)", target)
	case err != nil:
		return nil, c.Errorf("%v", err)
	}
	return runtime.NewHost(c.Env, target, d), nil
}

// hostCall makes one daemon call on the call's host. subject (a path)
// leads the error message when set.
func hostCall(c *runtime.Call, subject, method string, params, result any) error {
	return hostDo(c, subject, method, func(ctx context.Context, d runtime.Daemon) error {
		return d.Call(ctx, method, params, result)
	})
}

// hostDo runs f with the client of the call's host, as hostCall makes its
// call: for the client's methods that make more than one (with an
// extension, or without it).
func hostDo(c *runtime.Call, subject, method string, f func(ctx context.Context, d runtime.Daemon) error) error {
	d, err := hostClient(c, c.Host)
	if err != nil {
		return err
	}
	err = block(c.Env, c.Env.Ctx, func(ctx context.Context) error { return f(ctx, d) })
	if err == nil {
		return nil
	}
	// The daemon's messages may start with the method's name
	// ("files.read: path is a directory"); the builtin's name leads already.
	msg := strings.TrimPrefix(daemonMessage(err), method+": ")
	if subject != "" {
		return c.Errorf("%s: %s", subject, msg)
	}
	return c.Errorf("%s", msg)
}
