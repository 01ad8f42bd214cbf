package main

import (
	"context"
	"fmt"
	"io"
	"path/filepath"
	"strings"

	"github.com/spf13/cobra"

	"github.com/seed5ad92d46/sous/daemon"
	"github.com/seed5ad92d46/sous/daemon/client"
)

// Target is how a command that talks to a daemon reaches it: its target
// flags, --socket PATH | --remote URL, --token-file and --bridge-cmd, with
// defaults from the environment the factory gave it (Factory.newTarget):
// SOUS_SOCKET and SOUS_REMOTE; the token from --token-file, else SOUS_TOKEN,
// else CLAUDE_RPC_TOKEN. With none of them, the embedded daemon is used.
// SOUS_RECONNECT_TIMEOUT bounds how long a dropped connection is redialed.
// Nothing is resolved until the command asks (URL, Client, Open).
type Target struct {
	Socket    string
	Remote    string
	TokenFile string
	BridgeCmd string
	// Notices, when set, receives the client's notices about the
	// connection (dropped, reconnected): the command's stderr.
	Notices io.Writer

	getenv func(string) string
}

func (t *Target) register(cmd *cobra.Command) {
	f := cmd.Flags()
	f.StringVar(&t.Socket, "socket", "", "talk to the daemon on this Unix socket (default $SOUS_SOCKET, else the embedded daemon)")
	f.StringVar(&t.Remote, "remote", "", "talk to a remote daemon: ssh://[user@]host[:port][/socket] or ws://host:port[/path] (default $SOUS_REMOTE)")
	f.StringVar(&t.TokenFile, "token-file", "", "read the daemon's token from this file (without it, the token is $SOUS_TOKEN, else $CLAUDE_RPC_TOKEN)")
	f.StringVar(&t.BridgeCmd, "bridge-cmd", "", `with --remote ssh://: the remote relay command, the socket path appended (default $SOUS_BRIDGE_CMD, else "sous daemon bridge --socket"; "claustrum -bridge -socket" for claustrum hosts)`)
}

// sshOptions gathers how ssh:// targets are reached: the bridge command, and
// SOUS_SSH_COMMAND (like GIT_SSH_COMMAND: the ssh program and its options,
// split on spaces).
func (t *Target) sshOptions() client.SSHOptions {
	o := client.SSHOptions{BridgeCommand: t.BridgeCmd}
	if o.BridgeCommand == "" {
		o.BridgeCommand = t.getenv("SOUS_BRIDGE_CMD")
	}
	if fields := strings.Fields(t.getenv("SOUS_SSH_COMMAND")); len(fields) > 0 {
		o.SSH, o.ExtraArgs = fields[0], fields[1:]
	}
	return o
}

// URL resolves the flags and environment into a target URL ("embedded" when
// nothing names a daemon).
func (t *Target) URL() (string, error) {
	socket, remote := t.Socket, t.Remote
	if socket != "" && remote != "" {
		return "", usageErrorf("use either --socket or --remote, not both")
	}
	if socket == "" && remote == "" {
		socket, remote = t.getenv("SOUS_SOCKET"), t.getenv("SOUS_REMOTE")
		if socket != "" && remote != "" {
			return "", usageErrorf("SOUS_SOCKET and SOUS_REMOTE are both set; unset one or pass --socket/--remote")
		}
	}
	switch {
	case socket != "":
		return "unix://" + absPath(socket), nil
	case remote != "":
		if _, _, err := client.Kind(remote); err != nil {
			return "", usageErrorf("--remote: %v", err)
		}
		return remote, nil
	}
	return "embedded", nil
}

// token reads the token for a socket or remote daemon.
func (t *Target) token() (string, error) {
	if t.TokenFile != "" {
		tok, err := client.ReadTokenFile(t.TokenFile)
		if err == nil && tok == "" {
			err = fmt.Errorf("--token-file %s is empty", t.TokenFile)
		}
		return tok, err
	}
	return client.TokenFromEnv(t.getenv), nil
}

// Client builds the client target the flags describe.
func (t *Target) Client() (client.Target, error) {
	url, err := t.URL()
	if err != nil {
		return client.Target{}, err
	}
	tok := ""
	if !client.IsEmbedded(url) {
		if tok, err = t.token(); err != nil {
			return client.Target{}, err
		}
	}
	reconnect, err := client.ReconnectTimeoutFromEnv(t.getenv)
	if err != nil {
		return client.Target{}, usageErrorf("%v", err)
	}
	opt := client.Options{ReconnectTimeout: reconnect}
	if t.Notices != nil {
		opt.Logger = newNoticeLogger(t.Notices)
	}
	return client.Target{URL: url, Token: tok, Embedded: embeddedDaemon(), SSH: t.sshOptions(), Options: opt}, nil
}

// Open connects to the daemon the flags name.
func (t *Target) Open(ctx context.Context) (*client.Conn, error) {
	tg, err := t.Client()
	if err != nil {
		return nil, err
	}
	return client.Open(ctx, tg)
}

// isLocal reports whether paths on the target's host are paths here.
func isLocal(url string) bool {
	return client.IsEmbedded(url) || strings.HasPrefix(url, "unix://")
}

func absPath(p string) string {
	if abs, err := filepath.Abs(p); err == nil {
		return abs
	}
	return p
}

// embeddedConfig configures the in-process daemon of `sous run` and the
// one-off commands: memory-only replay, and children that die with sous
// even when it is killed with SIGKILL (nothing outlives the run anyway).
func embeddedConfig() daemon.Config {
	return daemon.Config{Version: currentBuild().Version, DieWithDaemon: true}
}

// embeddedDaemon composes the in-process daemon for an "embedded" target:
// the client library takes it as a client.LocalServer and never builds
// one. The run decides its directory and environment (runtime fills in
// Target.Embedded's Dir and Env); the rest is embeddedConfig.
func embeddedDaemon() client.EmbeddedDaemon {
	return client.EmbeddedDaemon{New: func(dir string, env []string) (client.LocalServer, error) {
		cfg := embeddedConfig()
		cfg.Dir, cfg.Env = dir, env
		srv, err := daemon.New(cfg)
		if err != nil {
			return nil, err // not a nil *daemon.Server in the interface
		}
		return srv, nil
	}}
}

// *daemon.Server is what the client takes of an in-process daemon, though
// neither package imports the other: the method signatures use only wire
// and standard types (see client.LocalServer). Composed here, so checked
// here.
var _ client.LocalServer = (*daemon.Server)(nil)
