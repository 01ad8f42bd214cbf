package main

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"math"
	"net"
	"net/url"
	"os"
	"os/signal"
	"path/filepath"
	"time"

	"github.com/spf13/cobra"

	"github.com/seed5ad92d46/sous/daemon"
	"github.com/seed5ad92d46/sous/daemon/metrics"
)

// DaemonServeOptions are the flags of `sous daemon serve`, which `daemon
// start` shares (DaemonStartOptions).
type DaemonServeOptions struct {
	IO *IO
	// Environ is the environment the daemon's children start from.
	Environ []string
	// homeSocket is claustrum's default socket (Factory.homeSocket),
	// whose directory serve creates.
	homeSocket string

	Socket          string
	TokenFile       string
	TokenFD         int
	StateDir        string
	KeepChildren    bool
	LogFormat       string
	ReplayMemLimit  int
	ReplayDiskLimit int64
	ReplayDiskTotal int64
	ReplayMemTotal  int
	RetainExited    int
	RetainFor       time.Duration
	AllowCommands   []string // --allow-command
	// WebSocket transport and metrics (feature transport.websocket,
	// docs/PROTOCOL.md -metrics-addr).
	Listen          []string
	WSRequireBearer bool
	MaxConnections  int
	MetricsAddr     string
	ReadyFD         int // --ready-fd: `daemon start` learns on it that this daemon listens
	LoginPath       bool
	// What one files.extract_tar may unpack (0: no limit).
	ExtractMaxBytes int64
	ExtractMaxRatio float64
	// UI is --ui ADDR (serve only): the daemon's web page.
	UI string
}

// newDaemonServeOptions are serve's (and start's) options before the flags
// are parsed.
func newDaemonServeOptions(f *Factory) *DaemonServeOptions {
	return &DaemonServeOptions{IO: f.IO, Environ: f.Environ, homeSocket: f.homeSocket()}
}

func (o *DaemonServeOptions) register(cmd *cobra.Command, f *Factory) {
	fl := cmd.Flags()
	fl.StringVar(&o.Socket, "socket", f.defaultSocket(), "Unix socket path to listen on ($SOUS_SOCKET, else claustrum's default, whose directory is created 0700 if missing)")
	fl.StringVar(&o.TokenFile, "token-file", "", "read the auth token from this file once, then delete it; it must be private (mode 600: other users' access is refused, as ssh refuses a key); a pipe or /dev/stdin is read, not deleted")
	fl.IntVar(&o.TokenFD, "token-fd", -1, "read the auth token from this open file descriptor (0 = stdin); keeps it off disk")
	fl.StringVar(&o.StateDir, "state-dir", "", "directory for spilled replay frames and the journals of durable runs (runs/) (default: a private temp dir, removed at exit: the journals die with the daemon, so sous resume cannot continue a run after it stops)")
	fl.BoolVar(&o.KeepChildren, "keep-children", false, "leave children running across a graceful shutdown")
	fl.StringVar(&o.LogFormat, "log-format", "text", "log format on stderr: text or json")
	fl.IntVar(&o.ReplayMemLimit, "replay-mem-limit", 4<<20, "bytes of output per process kept in memory for replay")
	fl.Int64Var(&o.ReplayDiskLimit, "replay-disk-limit", 1<<30, "bytes of output per process spilled to disk for replay; older output is dropped and reported via firstSeq; 0 spills nothing (replay keeps only the memory window, and streams cost less)")
	fl.Int64Var(&o.ReplayDiskTotal, "replay-disk-total", 4<<30, "bytes spilled for replay by all processes together; past it, processes that exited longest ago lose their oldest spilled replay first")
	fl.IntVar(&o.ReplayMemTotal, "replay-mem-total", 64<<20, "bytes of replay that exited processes keep in memory together; past it, those that exited longest ago move theirs to disk (with --replay-disk-limit 0: drop it, keeping the exit)")
	fl.IntVar(&o.RetainExited, "retain-exited", 1000, "how many exited processes stay reattachable; older ones are forgotten")
	durationVar(fl, &o.RetainFor, "retain-for", time.Hour, "how long an exited process stays reattachable (30m, 2h, or 600 for seconds)")
	fl.StringArrayVar(&o.AllowCommands, "allow-command", nil, "spawn only this program (`NAME`: any command of that base name; /ABS/PATH: that file, found on PATH or named); repeatable; default: any. Refusals are -32602, logged and counted")
	fl.StringArrayVar(&o.Listen, "listen", nil, "also serve JSON-RPC over WebSocket at `ws://HOST:PORT[/PATH]` (path default /; repeatable; --socket \"\" serves WebSocket only)")
	fl.BoolVar(&o.WSRequireBearer, "ws-require-bearer", true, "refuse WebSocket upgrades without \"Authorization: Bearer TOKEN\" (401); =false admits them and relies on each request's auth")
	fl.IntVar(&o.MaxConnections, "max-connections", 100, "most WebSocket connections open at once (503 beyond; 0 = no limit)")
	fl.StringVar(&o.MetricsAddr, "metrics-addr", "", "serve Prometheus counters at http://`ADDR`/metrics (no auth: bind to loopback)")
	fl.BoolVar(&o.LoginPath, "login-path", true, "give children the PATH of the user's login shell ($SHELL -l), as claustrum does; =false keeps the daemon's own")
	fl.Int64Var(&o.ExtractMaxBytes, "extract-max-bytes", daemon.DefaultExtractMaxBytes, "most bytes one files.extract_tar may unpack (the tar stream: contents plus 512 per entry); past it the extraction fails and leaves DEST empty; 0 = no limit")
	fl.Float64Var(&o.ExtractMaxRatio, "extract-max-ratio", daemon.DefaultExtractMaxRatio, "most bytes one files.extract_tar may unpack per byte of archive, past the first 64 MiB (gzip bombs expand about 1000x); 0 = no limit")
	fl.IntVar(&o.ReadyFD, "ready-fd", -1, "write \"ready\" to this descriptor once listening (used by daemon start)")
	fl.MarkHidden("ready-fd")
}

// validate refuses flag values that serve and start cannot use, before
// anything is read or dialed.
func (o *DaemonServeOptions) validate() error {
	if o.ReplayMemLimit <= 0 {
		return usageErrorf("--replay-mem-limit: want a positive number of bytes, got %d", o.ReplayMemLimit)
	}
	if o.ReplayDiskLimit < 0 {
		return usageErrorf("--replay-disk-limit: want bytes, or 0 to spill nothing; got %d", o.ReplayDiskLimit)
	}
	if o.ReplayDiskTotal <= 0 {
		return usageErrorf("--replay-disk-total: want a positive number of bytes, got %d", o.ReplayDiskTotal)
	}
	if o.ReplayMemTotal <= 0 {
		return usageErrorf("--replay-mem-total: want a positive number of bytes, got %d", o.ReplayMemTotal)
	}
	if o.ExtractMaxBytes < 0 {
		return usageErrorf("--extract-max-bytes: want bytes, or 0 for no limit; got %d", o.ExtractMaxBytes)
	}
	if r := o.ExtractMaxRatio; r < 0 || math.IsNaN(r) || math.IsInf(r, 0) {
		return usageErrorf("--extract-max-ratio: want a ratio, or 0 for no limit; got %v", r)
	}
	if _, err := newLogger(io.Discard, o.LogFormat); err != nil {
		return err
	}
	if err := daemon.CheckAllowCommands(o.AllowCommands); err != nil {
		return usageErrorf("--allow-command: %v", err)
	}
	if err := checkUIAddr(o.UI); err != nil {
		return err
	}
	return o.checkListen()
}

// checkSocket makes the directory of the default socket and refuses a
// socket another daemon serves. It comes after validate, as it dials: a
// daemon already serving the socket is not a flag mistake, but it too must
// not cost the token file.
func (o *DaemonServeOptions) checkSocket() error {
	if o.Socket == "" {
		return nil
	}
	if err := makeHomeSocketDir(o.Socket, o.homeSocket); err != nil {
		return err
	}
	return daemon.CheckSocketPath(o.Socket)
}

// checkListen validates --listen and --socket together.
func (o *DaemonServeOptions) checkListen() error {
	addrs, err := o.wsListenAddrs()
	if err != nil {
		return err
	}
	if o.Socket == "" && len(addrs) == 0 {
		return usageErrorf("--socket \"\" needs a --listen ws://HOST:PORT to serve on")
	}
	return nil
}

// wsListenAddrs parses --listen values into host:port and path.
func (o *DaemonServeOptions) wsListenAddrs() ([][2]string, error) {
	var out [][2]string
	for _, l := range o.Listen {
		u, err := url.Parse(l)
		if err != nil {
			return nil, usageErrorf("--listen %q: %v", l, err)
		}
		switch {
		case u.Scheme == "wss":
			return nil, usageErrorf("--listen %q: the daemon serves plain ws://; put TLS in front of it (a reverse proxy) and dial wss:// there", l)
		case u.Scheme != "ws" || u.Host == "" || u.Port() == "" || u.User != nil || u.RawQuery != "" || u.Fragment != "":
			return nil, usageErrorf("--listen %q: want ws://HOST:PORT[/PATH], e.g. ws://127.0.0.1:8003", l)
		}
		path := u.Path
		if path == "" {
			path = "/"
		}
		out = append(out, [2]string{u.Host, path})
	}
	return out, nil
}

// noLimitIfZero maps a flag's 0 ("no limit") to the daemon.Config's
// negative, whose 0 means the default.
func noLimitIfZero[N int64 | float64](n N) N {
	if n == 0 {
		return -1
	}
	return n
}

func newCmdDaemonServe(f *Factory, runF func(*DaemonServeOptions) error) *cobra.Command {
	opts := newDaemonServeOptions(f)
	cmd := &cobra.Command{
		Use:   "serve",
		Short: "Run a daemon in the foreground",
		Long: `Serve claustrum's protocol on a Unix socket in the foreground (for systemd,
CI, containers). Prints a line containing "listening" for each address once
it accepts connections. Without --socket it serves $SOUS_SOCKET, else
~/.claude/remote/rpc.sock (its directory created 0700), as start does.
SIGTERM, SIGINT, SIGHUP or a server.shutdown request with the token stop it
and every child process group (unless --keep-children). Started with SIGHUP
ignored (nohup sous daemon serve), it ignores SIGHUP, and its children still
start with the default for it.

Children inherit the daemon's environment with CLAUDE_SSH_DAEMON_CHILD=1 and,
as claustrum's daemon gives them, the PATH of the user's login shell
($SHELL -l, within 3 s; --login-path=false keeps the daemon's own PATH).

The daemon keeps the journals of the durable runs that act on it (feature
run.journal: sous run against it journals there, sous runs lists them, sous
resume RUN_ID continues one from any client) in STATE/runs, STATE being
--state-dir. Without --state-dir it is a private temporary directory removed
when the daemon stops: the journals die with it, and its runs cannot be
resumed after a restart. Give it --state-dir (e.g. /var/lib/sous) to keep them.

--listen ws://HOST:PORT[/PATH] also serves the same JSON-RPC over WebSocket,
one JSON message per text message (clients: --remote ws://HOST:PORT[/PATH]).
Every request still carries the token in "auth"; the upgrade is also refused
with 401 unless it carries "Authorization: Bearer TOKEN" (--ws-require-bearer,
on by default; a wrong bearer is refused either way), and with 503 beyond
--max-connections. Every answer but an upgrade closes the connection, and
connections not upgraded yet are bounded apart from --max-connections: 64 per
listener at once (more are closed as soon as accepted), 5 s each, so peers
without the token cannot take the daemon's descriptors. Peers are pinged every
15 s and dropped after 10 s without an answer; their processes keep running.
The daemon speaks plain ws://: for wss://, put a TLS-terminating proxy in
front of it.

--metrics-addr ADDR serves Prometheus counters (connections, spawns, exits,
reattaches, stream and stdin bytes, refused requests) at http://ADDR/metrics,
without auth: bind it to loopback. It holds 16 connections at once, one
request of at most 5 s each. A bind failure is logged, not fatal.

--allow-command NAME|/ABS/PATH (repeatable) spawns only those programs, each
stage of a pipeline included; others are refused with -32602, logged and
counted. A NAME allows any command of that base name (git: git, /usr/bin/git,
./git); an absolute path allows the command that resolves (on the child's
PATH, or as given) to that same file. A guard, not a sandbox: an allowed
shell runs whatever it is told.

--extract-max-bytes N and --extract-max-ratio R bound what one
files.extract_tar may unpack: N bytes of tar stream in all (default 16 GiB),
and R bytes per byte of archive past the first 64 MiB (default 200; gzip
cannot expand more than about 1000x, real archives 2-20x). An archive past
either fails and leaves its DEST empty. 0 disables a limit.

--ui ADDR serves the daemon's web page (docs/UI.md) and prints
"sous: ui at http://HOST:PORT/#token=TOKEN" on stderr: the daemon's
processes with the tail of their output, and the permission requests that
every run on the daemon waits on a person for, with Allow and Deny buttons
(answered as "remote", as sous approvals does). The page's API takes the
daemon's token as "Authorization: Bearer TOKEN"; that URL holds the token, so
keep stderr private. :PORT and 127.0.0.1:0 bind loopback only; name a host
(0.0.0.0:8080) to serve others, and put TLS in front of it.`,
		Example: `  sous daemon serve --socket /run/sous.sock --token-file /run/sous.token
  printf '%s\n' "$TOKEN" | sous daemon serve --socket "$XDG_RUNTIME_DIR/sous.sock" --token-fd 0
  (umask 077 && printf '%s\n' "$TOKEN" > ~/.sous-token)
  sous daemon serve --socket "$XDG_RUNTIME_DIR/sous.sock" --listen ws://127.0.0.1:8003 --metrics-addr 127.0.0.1:9103 --token-file ~/.sous-token
  sous daemon serve --token-file ~/.sous-token --ui 127.0.0.1:0    # the web page, on a free port`,
		Args: cobra.NoArgs,
		RunE: func(*cobra.Command, []string) error {
			// Flag mistakes first: they must not consume the token file.
			if err := opts.validate(); err != nil {
				return err
			}
			if runF != nil {
				return runF(opts)
			}
			return daemonServeRun(opts)
		},
	}
	opts.register(cmd, f)
	cmd.Flags().StringVar(&opts.UI, "ui", "", uiFlagUsage)
	return cmd
}

// daemonServeRun serves until a signal or server.shutdown stops the
// daemon.
func daemonServeRun(opts *DaemonServeOptions) error {
	if err := opts.checkSocket(); err != nil {
		return err
	}
	token, err := opts.readToken()
	if err != nil {
		return err
	}
	return serveDaemon(context.Background(), opts, token)
}

func newLogger(w io.Writer, format string) (*slog.Logger, error) {
	switch format {
	case "text":
		return slog.New(slog.NewTextHandler(w, nil)), nil
	case "json":
		return slog.New(slog.NewJSONHandler(w, nil)), nil
	}
	return nil, usageErrorf("--log-format: want text or json, got %q", format)
}

func serveDaemon(ctx context.Context, o *DaemonServeOptions, token string) error {
	streams := o.IO
	// Taken first, so that a signal during start-up (the login shell may
	// take seconds) still runs the deferred clean-up of the state dir; it
	// stops the daemon as soon as it serves.
	// SIGHUP stops the daemon as SIGTERM does, unless it was started with
	// SIGHUP ignored (nohup): then it goes on, as asked, and its children
	// still start with SIGHUP's default (notifyStops).
	sigs := make(chan os.Signal, 1)
	hups, stopHangups := notifyStops(sigs)
	defer signal.Stop(sigs)
	defer stopHangups()
	logger, err := newLogger(streams.ErrOut, o.LogFormat)
	if err != nil {
		return err
	}
	stateDir := o.StateDir
	if stateDir == "" {
		// Journals and spilled replay die with the daemon (--help says so).
		d, err := os.MkdirTemp("", "sous-daemon-")
		if err != nil {
			return fmt.Errorf("state dir: %w", err)
		}
		defer os.RemoveAll(d)
		stateDir = d
	}
	runsDir := filepath.Join(stateDir, "runs")
	if o.ReplayDiskLimit == 0 {
		stateDir = "" // the daemon then keeps replay in memory only (journals still in runsDir)
	}
	srv, err := daemon.New(daemon.Config{
		Token:           token,
		Version:         currentBuild().Version,
		StateDir:        stateDir,
		RunsDir:         runsDir,
		ReplayMemLimit:  o.ReplayMemLimit,
		ReplayDiskLimit: o.ReplayDiskLimit,
		ReplayDiskTotal: o.ReplayDiskTotal,
		ReplayMemTotal:  o.ReplayMemTotal,
		RetainExited:    o.RetainExited,
		RetainFor:       o.RetainFor,
		KeepChildren:    o.KeepChildren,
		Logger:          logger,
		AllowCommands:   o.AllowCommands,
		Env:             daemonChildEnv(ctx, o.Environ, o.LoginPath, logger),
		ExtractMaxBytes: noLimitIfZero(o.ExtractMaxBytes),
		ExtractMaxRatio: noLimitIfZero(o.ExtractMaxRatio),
	})
	if err != nil {
		return err
	}
	lns, err := o.listen()
	if err != nil {
		return err
	}
	stopUI := func() {}
	if o.UI != "" {
		// Before the token file goes: a --ui that cannot bind must not
		// cost it.
		if stopUI, err = startDaemonUI(o.UI, srv, token, streams.ErrOut, logger); err != nil {
			lns.close()
			return err
		}
	}
	if err := o.removeTokenFile(); err != nil {
		stopUI()
		lns.close()
		return err
	}
	if o.MetricsAddr != "" {
		// Off the wire and optional: a bind failure is logged, not fatal.
		if ms, err := metrics.Listen(o.MetricsAddr, srv.Stats()); err != nil {
			logger.Error(fmt.Sprintf("[Server] metrics: %v", err))
		} else {
			defer ms.Close()
			logger.Info("[Server] metrics: serving " + ms.URL())
		}
	}

	served := make(chan error, 1+len(lns.ws))
	if lns.unix != nil {
		go func() { served <- srv.Serve(lns.unix) }()
		fmt.Fprintf(streams.Out, "sous daemon listening on %s\n", o.Socket)
	}
	for i, l := range lns.ws {
		opt := daemon.WebSocketOptions{Path: lns.wsPaths[i], RequireBearer: o.WSRequireBearer, MaxConnections: o.MaxConnections}
		go func() { served <- srv.ServeWebSocket(l, opt) }()
		fmt.Fprintf(streams.Out, "sous daemon listening on ws://%s%s\n", l.Addr(), opt.Path)
	}

	if o.ReadyFD >= 0 {
		// `daemon start` waits for this rather than for the socket to
		// accept: another daemon may already answer on that socket.
		if f := os.NewFile(uintptr(o.ReadyFD), "ready-fd"); f != nil {
			fmt.Fprintln(f, "ready")
			f.Close()
		}
	}

	var serveErr error
wait:
	for {
		select {
		case s := <-sigs:
			logger.Info("shutting down", "signal", s.String())
			break wait
		case s := <-hups:
			logger.Info("signal ignored (the daemon was started with it ignored)", "signal", s.String())
		case <-srv.ShutdownRequested():
			break wait
		case serveErr = <-served:
			break wait
		}
	}
	stopUI() // first: the page follows the daemon through a client of it
	srv.Close()
	return serveErr
}

// listeners are what a serving daemon listens on: its Unix socket (nil
// with --socket "") and its --listen addresses, with the path each serves.
type listeners struct {
	unix    net.Listener
	ws      []net.Listener
	wsPaths []string
}

// listen listens on --socket and every --listen address, or on none of
// them.
func (o *DaemonServeOptions) listen() (*listeners, error) {
	if err := o.checkListen(); err != nil {
		return nil, err
	}
	wsAddrs, _ := o.wsListenAddrs()
	lns := &listeners{}
	if o.Socket != "" {
		ln, err := daemon.ListenUnix(o.Socket)
		if err != nil {
			return nil, err
		}
		lns.unix = ln
	}
	for _, a := range wsAddrs {
		l, err := net.Listen("tcp", a[0])
		if err != nil {
			lns.close()
			return nil, fmt.Errorf("--listen ws://%s: %w", a[0], err)
		}
		lns.ws, lns.wsPaths = append(lns.ws, l), append(lns.wsPaths, a[1])
	}
	return lns, nil
}

// close closes what listens, for a start-up that fails.
func (l *listeners) close() {
	for _, ws := range l.ws {
		ws.Close()
	}
	if l.unix != nil {
		l.unix.Close()
	}
}
