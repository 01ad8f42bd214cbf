package client

import (
	"context"
	"errors"
	"fmt"
	"net/url"
	"os"
	"strconv"
	"strings"
	"time"
)

// Target names a daemon: "embedded" (or ""), "unix:///path/to.sock", a
// bare socket path, "ssh://[user@]host[:port][/socket]" or
// "ws://host:port[/path]".
type Target struct {
	URL   string
	Token string // for socket, ssh and ws targets; see TokenFromEnv
	// Embedded starts the in-process daemon when URL is "embedded".
	Embedded EmbeddedDaemon
	// SSH tunes ssh:// targets (ssh program, extra args, bridge command).
	SSH     SSHOptions
	Options Options
}

// EmbeddedDaemon is how an "embedded" target gets its in-process daemon.
// The program composes it: this library never builds a daemon (see
// LocalServer).
type EmbeddedDaemon struct {
	// New builds the daemon, its children's working directory and
	// environment being Dir and Env. Nil: the program has no embedded
	// daemon, and an "embedded" target fails.
	New func(dir string, env []string) (LocalServer, error)
	// Dir is the daemon's working directory: the default cwd of children
	// and the default repo of git worktree ops ("": the process's).
	Dir string
	// Env is the environment its children inherit (nil: the process's).
	Env []string
}

// ErrNoEmbeddedDaemon fails an "embedded" target whose Target.Embedded.New
// is nil.
var ErrNoEmbeddedDaemon = errors.New("target embedded: this program has no embedded daemon (Target.Embedded.New is nil)")

// TokenFromEnv returns SOUS_TOKEN, else CLAUDE_RPC_TOKEN, else "".
func TokenFromEnv(getenv func(string) string) string {
	if t := getenv("SOUS_TOKEN"); t != "" {
		return t
	}
	return getenv("CLAUDE_RPC_TOKEN")
}

// ReconnectTimeoutFromEnv reads SOUS_RECONNECT_TIMEOUT: how long a client
// keeps dialing a daemon whose connection dropped before it gives up, as a
// Go duration ("30s", "2m") or a number of seconds. "0" turns reconnecting
// off; unset or empty leaves the default (Options.ReconnectTimeout's zero).
func ReconnectTimeoutFromEnv(getenv func(string) string) (time.Duration, error) {
	v := strings.TrimSpace(getenv("SOUS_RECONNECT_TIMEOUT"))
	if v == "" {
		return 0, nil
	}
	d, err := time.ParseDuration(v)
	if err != nil {
		secs, ferr := strconv.ParseFloat(v, 64)
		if ferr != nil || secs < 0 || secs > 1e6 {
			return 0, fmt.Errorf("SOUS_RECONNECT_TIMEOUT=%q: want a duration such as 30s or 2m, or 0 to turn reconnecting off", v)
		}
		d = time.Duration(secs * float64(time.Second))
	}
	switch {
	case d < 0:
		return 0, fmt.Errorf("SOUS_RECONNECT_TIMEOUT=%q: want a duration of 0 or more", v)
	case d == 0:
		return -1, nil // Options: negative disables reconnecting
	}
	return d, nil
}

// ReadTokenFile reads a token file: one trailing newline (\n or \r\n) is
// stripped, everything else is kept verbatim.
func ReadTokenFile(path string) (string, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return "", fmt.Errorf("read token file: %w", err)
	}
	return StripTokenNewline(string(b)), nil
}

// StripTokenNewline removes one trailing "\n" or "\r\n".
func StripTokenNewline(s string) string {
	if strings.HasSuffix(s, "\r\n") {
		return s[:len(s)-2]
	}
	return strings.TrimSuffix(s, "\n")
}

// IsEmbedded says whether target names the in-process daemon ("embedded"
// or ""), whose processes die with the command.
func IsEmbedded(target string) bool { return target == "" || target == "embedded" }

// Kind classifies a target URL: "embedded", "unix", "ssh" or "ws".
func Kind(target string) (kind, rest string, err error) {
	switch {
	case IsEmbedded(target):
		return "embedded", "", nil
	case strings.HasPrefix(target, "unix://"):
		u, err := url.Parse(target)
		if err != nil {
			return "", "", fmt.Errorf("target %q: %w", target, err)
		}
		path := u.Path
		if u.Host != "" { // unix://relative/path is a mistake worth naming
			return "", "", fmt.Errorf("target %q: want unix:///absolute/path (three slashes)", target)
		}
		if path == "" {
			return "", "", fmt.Errorf("target %q: no socket path", target)
		}
		return "unix", path, nil
	case strings.HasPrefix(target, "ssh://"):
		return "ssh", target, nil
	case strings.HasPrefix(target, "ws://") || strings.HasPrefix(target, "wss://"):
		u, err := url.Parse(target)
		if err != nil {
			return "", "", fmt.Errorf("target %q: %w", target, err)
		}
		if u.Host == "" {
			return "", "", fmt.Errorf("target %q: want ws://host:port[/path]", target)
		}
		if u.User != nil {
			return "", "", fmt.Errorf("target %q: put the token in --token-file or SOUS_TOKEN, not in the URL", target)
		}
		return "ws", target, nil
	case strings.HasPrefix(target, "/") || strings.HasPrefix(target, "./") || strings.HasPrefix(target, "../"):
		return "unix", target, nil
	}
	return "", "", fmt.Errorf("target %q: want \"embedded\", unix:///path/to.sock, ssh://[user@]host[:port][/socket] or ws://host:port[/path]", target)
}

// Open connects to the target. For "embedded" it builds the in-process
// daemon with t.Embedded.New; its processes are stopped when the returned
// Conn's Shutdown runs.
func Open(ctx context.Context, t Target) (*Conn, error) {
	kind, rest, err := Kind(t.URL)
	if err != nil {
		return nil, err
	}
	switch kind {
	case "embedded":
		if t.Embedded.New == nil {
			return nil, ErrNoEmbeddedDaemon
		}
		srv, err := t.Embedded.New(t.Embedded.Dir, t.Embedded.Env)
		if err != nil {
			return nil, err
		}
		return &Conn{Client: Embedded(srv), server: srv, target: "embedded"}, nil
	case "unix":
		c, err := DialUnix(ctx, rest, t.Token, t.Options)
		if err != nil {
			return nil, err
		}
		return &Conn{Client: c, target: t.URL}, nil
	case "ssh":
		st, err := ParseSSH(rest)
		if err != nil {
			return nil, err
		}
		c, err := Dial(ctx, SSHDial(st, t.SSH), t.Token, t.Options)
		if err != nil {
			return nil, fmt.Errorf("connect to %s: %w", t.URL, err)
		}
		return &Conn{Client: c, target: t.URL}, nil
	case "ws":
		c, err := DialWebSocket(ctx, rest, t.Token, t.Options)
		if err != nil {
			return nil, err
		}
		return &Conn{Client: c, target: t.URL}, nil
	default:
		return nil, fmt.Errorf("target %s: the %s transport is not available in this build", t.URL, kind)
	}
}

// Conn is a Client together with what it owns: for an embedded target, the
// daemon itself.
type Conn struct {
	*Client
	server LocalServer
	target string
}

// Target is the URL this connection was opened with.
func (c *Conn) Target() string { return c.target }

// Server is the in-process daemon of an embedded target, or nil.
func (c *Conn) Server() LocalServer { return c.server }

// Shutdown closes the connection; for an embedded target it also stops the
// daemon and every process it started (SIGTERM, then SIGKILL after the
// daemon's ShutdownGrace).
func (c *Conn) Shutdown() error {
	c.Client.Close()
	if c.server != nil {
		return c.server.Close()
	}
	return nil
}
