package main

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"math"
	"net"
	"net/url"
	"os"
	"os/exec"
	"os/signal"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/spf13/cobra"

	"github.com/seed5ad92d46/sous/daemon"
	"github.com/seed5ad92d46/sous/daemon/client"
	"github.com/seed5ad92d46/sous/daemon/metrics"
	"github.com/seed5ad92d46/sous/daemon/wire"
)

func init() { commandGroups = append(commandGroups, newDaemonCmd) }

func newDaemonCmd(streams *IO) *cobra.Command {
	cmd := &cobra.Command{
		Use:   "daemon",
		Short: "Run, start, stop or bridge to a sous daemon",
		Long: `A daemon owns processes, files, git and archives and speaks claustrum's
JSON-RPC protocol on a Unix socket (mode 0600). sous run uses an embedded
daemon by default; a standalone daemon lets processes outlive the runner and
be reattached from other runs, hosts (over ssh) and tools.`,
		Example: `  echo "$TOKEN" > /tmp/tok && sous daemon start --socket /tmp/sous.sock --token-file /tmp/tok
  SOUS_TOKEN=$TOKEN sous run --socket /tmp/sous.sock recipe.star
  SOUS_TOKEN=$TOKEN sous daemon stop --socket /tmp/sous.sock`,
	}
	cmd.AddCommand(newDaemonServeCmd(streams), newDaemonStartCmd(streams), newDaemonStopCmd(streams), newDaemonBridgeCmd(streams))
	return cmd
}

// defaultSocket is $SOUS_SOCKET, else claustrum's default:
// ~/.claude/remote/rpc.sock. The directory is not created.
func defaultSocket() string {
	// The same variable the clients' --socket defaults to, so that
	// `export SOUS_SOCKET=...` serves, stops and reaches one daemon.
	if s := os.Getenv("SOUS_SOCKET"); s != "" {
		return s
	}
	home, err := os.UserHomeDir()
	if err != nil {
		return filepath.Join(".claude", "remote", "rpc.sock")
	}
	return filepath.Join(home, ".claude", "remote", "rpc.sock")
}

// serveOptions are the flags shared by serve and start.
type serveOptions struct {
	socket          string
	tokenFile       string
	tokenFD         int
	stateDir        string
	keepChildren    bool
	logFormat       string
	logFile         string
	replayMemLimit  int
	replayDiskLimit int64
	replayDiskTotal int64
	replayMemTotal  int
	retainExited    int
	retainFor       time.Duration
	allowCommands   []string // --allow-command
	// WebSocket transport and metrics (feature transport.websocket,
	// seeds/001 -metrics-addr).
	listen          []string
	wsRequireBearer bool
	maxConnections  int
	metricsAddr     string
	readyFD         int // --ready-fd: `daemon start` learns on it that this daemon listens
	loginPath       bool
	// What one files.extract_tar may unpack (0: no limit).
	extractMaxBytes int64
	extractMaxRatio float64
}

func (o *serveOptions) register(cmd *cobra.Command) {
	f := cmd.Flags()
	f.StringVar(&o.socket, "socket", defaultSocket(), "Unix socket path to listen on ($SOUS_SOCKET, else claustrum's default)")
	f.StringVar(&o.tokenFile, "token-file", "", "read the auth token from this file once, then delete it")
	f.IntVar(&o.tokenFD, "token-fd", -1, "read the auth token from this open file descriptor (0 = stdin); keeps it off disk")
	f.StringVar(&o.stateDir, "state-dir", "", "directory for spilled replay frames (default: a private temp dir, removed at exit)")
	f.BoolVar(&o.keepChildren, "keep-children", false, "leave children running across a graceful shutdown")
	f.StringVar(&o.logFormat, "log-format", "text", "log format on stderr: text or json")
	f.IntVar(&o.replayMemLimit, "replay-mem-limit", 4<<20, "bytes of output per process kept in memory for replay")
	f.Int64Var(&o.replayDiskLimit, "replay-disk-limit", 1<<30, "bytes of output per process spilled to disk for replay; older output is dropped and reported via firstSeq; 0 spills nothing (replay keeps only the memory window, and streams cost less)")
	f.Int64Var(&o.replayDiskTotal, "replay-disk-total", 4<<30, "bytes spilled for replay by all processes together; past it, processes that exited longest ago lose their spilled replay first")
	f.IntVar(&o.replayMemTotal, "replay-mem-total", 64<<20, "bytes of replay that exited processes keep in memory together; past it, those that exited longest ago move theirs to disk (with --replay-disk-limit 0: drop it, keeping the exit)")
	f.IntVar(&o.retainExited, "retain-exited", 1000, "how many exited processes stay reattachable; older ones are forgotten")
	f.DurationVar(&o.retainFor, "retain-for", time.Hour, "how long an exited process stays reattachable")
	f.StringArrayVar(&o.allowCommands, "allow-command", nil, "spawn only this program (`NAME`: any command of that base name; /ABS/PATH: that file, found on PATH or named); repeatable; default: any. Refusals are -32602, logged and counted")
	f.StringArrayVar(&o.listen, "listen", nil, "also serve JSON-RPC over WebSocket at `ws://HOST:PORT[/PATH]` (path default /; repeatable; --socket \"\" serves WebSocket only)")
	f.BoolVar(&o.wsRequireBearer, "ws-require-bearer", true, "refuse WebSocket upgrades without \"Authorization: Bearer TOKEN\" (401); =false admits them and relies on each request's auth")
	f.IntVar(&o.maxConnections, "max-connections", 100, "most WebSocket connections open at once (503 beyond; 0 = no limit)")
	f.StringVar(&o.metricsAddr, "metrics-addr", "", "serve Prometheus counters at http://`ADDR`/metrics (no auth: bind to loopback)")
	f.BoolVar(&o.loginPath, "login-path", true, "give children the PATH of the user's login shell ($SHELL -l), as claustrum does; =false keeps the daemon's own")
	f.Int64Var(&o.extractMaxBytes, "extract-max-bytes", daemon.DefaultExtractMaxBytes, "most bytes one files.extract_tar may unpack (the tar stream: contents plus 512 per entry); past it the extraction fails and leaves DEST empty; 0 = no limit")
	f.Float64Var(&o.extractMaxRatio, "extract-max-ratio", daemon.DefaultExtractMaxRatio, "most bytes one files.extract_tar may unpack per byte of archive, past the first 64 MiB (gzip bombs expand about 1000x); 0 = no limit")
	f.IntVar(&o.readyFD, "ready-fd", -1, "write \"ready\" to this descriptor once listening (used by daemon start)")
	f.MarkHidden("ready-fd")
}

// check validates the flags that serve and start share.
func (o *serveOptions) check() error {
	if o.replayMemLimit <= 0 {
		return usageErrorf("--replay-mem-limit: want a positive number of bytes, got %d", o.replayMemLimit)
	}
	if o.replayDiskLimit < 0 {
		return usageErrorf("--replay-disk-limit: want bytes, or 0 to spill nothing; got %d", o.replayDiskLimit)
	}
	if o.replayDiskTotal <= 0 {
		return usageErrorf("--replay-disk-total: want a positive number of bytes, got %d", o.replayDiskTotal)
	}
	if o.replayMemTotal <= 0 {
		return usageErrorf("--replay-mem-total: want a positive number of bytes, got %d", o.replayMemTotal)
	}
	if o.extractMaxBytes < 0 {
		return usageErrorf("--extract-max-bytes: want bytes, or 0 for no limit; got %d", o.extractMaxBytes)
	}
	if r := o.extractMaxRatio; r < 0 || math.IsNaN(r) || math.IsInf(r, 0) {
		return usageErrorf("--extract-max-ratio: want a ratio, or 0 for no limit; got %v", r)
	}
	if _, err := newLogger(io.Discard, o.logFormat); err != nil {
		return err
	}
	if err := daemon.CheckAllowCommands(o.allowCommands); err != nil {
		return usageErrorf("--allow-command: %v", err)
	}
	if err := o.checkListen(); err != nil {
		return err
	}
	// Last, as it dials: a daemon already serving the socket is not a flag
	// mistake, but it too must not cost the token file.
	if o.socket != "" {
		return daemon.CheckSocketPath(o.socket)
	}
	return nil
}

// checkListen validates --listen and --socket together.
func (o *serveOptions) checkListen() error {
	addrs, err := o.wsListenAddrs()
	if err != nil {
		return err
	}
	if o.socket == "" && len(addrs) == 0 {
		return usageErrorf("--socket \"\" needs a --listen ws://HOST:PORT to serve on")
	}
	return nil
}

// wsListenAddrs parses --listen values into host:port and path.
func (o *serveOptions) wsListenAddrs() ([][2]string, error) {
	var out [][2]string
	for _, l := range o.listen {
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

// readToken gets the token from --token-file or --token-fd. It is checked
// before anything else: the daemon never starts unauthenticated.
func (o *serveOptions) readToken() (string, error) {
	token, err := o.readTokenLine()
	if err == nil && token == "" {
		// seeds/001: the daemon never starts unauthenticated, and a
		// request without "auth" would match an empty token.
		err = errors.New("the token is empty: the daemon never runs unauthenticated")
	}
	return token, err
}

// readTokenLine reads the token as a line (one trailing \n or \r\n
// stripped; other whitespace kept) from --token-file or --token-fd.
func (o *serveOptions) readTokenLine() (string, error) {
	switch {
	case o.tokenFile != "" && o.tokenFD >= 0:
		return "", usageErrorf("use either --token-file or --token-fd, not both")
	case o.tokenFile != "":
		// Deleted only once the daemon serves (removeTokenFile): a daemon
		// that cannot listen leaves the token where it was for the next try.
		b, err := os.ReadFile(o.tokenFile)
		if err != nil {
			return "", fmt.Errorf("read --token-file: %w", err)
		}
		return client.StripTokenNewline(string(b)), nil
	case o.tokenFD >= 0:
		f := os.NewFile(uintptr(o.tokenFD), "token-fd")
		if f == nil {
			return "", fmt.Errorf("read --token-fd %d: not an open descriptor", o.tokenFD)
		}
		defer f.Close()
		line, err := bufio.NewReader(f).ReadString('\n')
		if err != nil && !errors.Is(err, io.EOF) {
			return "", fmt.Errorf("read --token-fd %d: %w", o.tokenFD, err)
		}
		return client.StripTokenNewline(line), nil
	}
	return "", errors.New("daemon requires --token-file or --token-fd")
}

// removeTokenFile deletes --token-file once the daemon listens: the token
// is the daemon's alone from then on.
func (o *serveOptions) removeTokenFile() error {
	if o.tokenFile == "" {
		return nil
	}
	if err := os.Remove(o.tokenFile); err != nil {
		return fmt.Errorf("remove --token-file after reading it: %w", err)
	}
	return nil
}

// noLimitIfZero maps a flag's 0 ("no limit") to the daemon.Config's
// negative, whose 0 means the default.
func noLimitIfZero[N int64 | float64](n N) N {
	if n == 0 {
		return -1
	}
	return n
}

func newDaemonServeCmd(streams *IO) *cobra.Command {
	var o serveOptions
	cmd := &cobra.Command{
		Use:   "serve",
		Short: "Run a daemon in the foreground",
		Long: `Serve claustrum's protocol on a Unix socket in the foreground (for systemd,
CI, containers). Prints a line containing "listening" for each address once
it accepts connections. SIGTERM, SIGINT or a server.shutdown request with the
token stop it and every child process group (unless --keep-children).

Children inherit the daemon's environment with CLAUDE_SSH_DAEMON_CHILD=1 and,
as claustrum's daemon gives them, the PATH of the user's login shell
($SHELL -l, within 3 s; --login-path=false keeps the daemon's own PATH).

--listen ws://HOST:PORT[/PATH] also serves the same JSON-RPC over WebSocket,
one JSON message per text message (clients: --remote ws://HOST:PORT[/PATH]).
Every request still carries the token in "auth"; the upgrade is also refused
with 401 unless it carries "Authorization: Bearer TOKEN" (--ws-require-bearer,
on by default; a wrong bearer is refused either way), and with 503 beyond
--max-connections. Peers are pinged every 15 s and dropped after 10 s without
an answer; their processes keep running. The daemon speaks plain ws://: for
wss://, put a TLS-terminating proxy in front of it.

--metrics-addr ADDR serves Prometheus counters (connections, spawns, exits,
reattaches, stream and stdin bytes, refused requests) at http://ADDR/metrics,
without auth: bind it to loopback. A bind failure is logged, not fatal.

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
either fails and leaves its DEST empty. 0 disables a limit.`,
		Example: `  sous daemon serve --socket /run/sous.sock --token-file /run/sous.token
  printf '%s\n' "$TOKEN" | sous daemon serve --socket /tmp/s.sock --token-fd 0
  sous daemon serve --socket /tmp/s.sock --listen ws://127.0.0.1:8003 --metrics-addr 127.0.0.1:9103 --token-file tok`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			// Flag mistakes first: they must not consume the token file.
			if err := o.check(); err != nil {
				return err
			}
			token, err := o.readToken()
			if err != nil {
				return err
			}
			return serveDaemon(cmd.Context(), streams, &o, token)
		},
	}
	o.register(cmd)
	return cmd
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

func serveDaemon(ctx context.Context, streams *IO, o *serveOptions, token string) error {
	// Taken first, so that a signal during start-up (the login shell may
	// take seconds) still runs the deferred clean-up of the state dir; it
	// stops the daemon as soon as it serves.
	sigs := make(chan os.Signal, 1)
	signal.Notify(sigs, syscall.SIGTERM, syscall.SIGINT)
	defer signal.Stop(sigs)
	logger, err := newLogger(streams.ErrOut, o.logFormat)
	if err != nil {
		return err
	}
	stateDir := o.stateDir
	switch {
	case o.replayDiskLimit == 0:
		stateDir = "" // the daemon then keeps replay in memory only
	case stateDir == "":
		d, err := os.MkdirTemp("", "sous-daemon-")
		if err != nil {
			return fmt.Errorf("state dir: %w", err)
		}
		defer os.RemoveAll(d)
		stateDir = d
	}
	srv, err := daemon.New(daemon.Config{
		Token:           token,
		Version:         currentBuild().Version,
		StateDir:        stateDir,
		ReplayMemLimit:  o.replayMemLimit,
		ReplayDiskLimit: o.replayDiskLimit,
		ReplayDiskTotal: o.replayDiskTotal,
		ReplayMemTotal:  o.replayMemTotal,
		RetainExited:    o.retainExited,
		RetainFor:       o.retainFor,
		KeepChildren:    o.keepChildren,
		Logger:          logger,
		AllowCommands:   o.allowCommands,
		Env:             daemonChildEnv(ctx, processEnv(streams), o.loginPath, logger),
		ExtractMaxBytes: noLimitIfZero(o.extractMaxBytes),
		ExtractMaxRatio: noLimitIfZero(o.extractMaxRatio),
	})
	if err != nil {
		return err
	}
	if err := o.checkListen(); err != nil {
		return err
	}
	wsAddrs, _ := o.wsListenAddrs()
	var ln net.Listener
	if o.socket != "" {
		if ln, err = daemon.ListenUnix(o.socket); err != nil {
			return err
		}
	}
	wsLns := make([]net.Listener, 0, len(wsAddrs))
	// unlisten closes what listens so far, for a start-up that fails.
	unlisten := func() {
		for _, l := range wsLns {
			l.Close()
		}
		if ln != nil {
			ln.Close()
		}
	}
	for _, a := range wsAddrs {
		l, err := net.Listen("tcp", a[0])
		if err != nil {
			unlisten()
			return fmt.Errorf("--listen ws://%s: %w", a[0], err)
		}
		wsLns = append(wsLns, l)
	}
	if err := o.removeTokenFile(); err != nil {
		unlisten()
		return err
	}
	if o.metricsAddr != "" {
		// Off the wire and optional: a bind failure is logged, not fatal.
		if ms, err := metrics.Listen(o.metricsAddr, srv.Stats()); err != nil {
			logger.Error(fmt.Sprintf("[Server] metrics: %v", err))
		} else {
			defer ms.Close()
			logger.Info("[Server] metrics: serving " + ms.URL())
		}
	}

	served := make(chan error, 1+len(wsLns))
	if ln != nil {
		go func() { served <- srv.Serve(ln) }()
		fmt.Fprintf(streams.Out, "sous daemon listening on %s\n", o.socket)
	}
	for i, l := range wsLns {
		opt := daemon.WebSocketOptions{Path: wsAddrs[i][1], RequireBearer: o.wsRequireBearer, MaxConnections: o.maxConnections}
		go func() { served <- srv.ServeWebSocket(l, opt) }()
		fmt.Fprintf(streams.Out, "sous daemon listening on ws://%s%s\n", l.Addr(), opt.Path)
	}

	if o.readyFD >= 0 {
		// `daemon start` waits for this rather than for the socket to
		// accept: another daemon may already answer on that socket.
		if f := os.NewFile(uintptr(o.readyFD), "ready-fd"); f != nil {
			fmt.Fprintln(f, "ready")
			f.Close()
		}
	}

	var serveErr error
	select {
	case s := <-sigs:
		logger.Info("shutting down", "signal", s.String())
	case <-srv.ShutdownRequested():
	case serveErr = <-served:
	}
	srv.Close()
	return serveErr
}

func newDaemonStartCmd(streams *IO) *cobra.Command {
	var o serveOptions
	var wait time.Duration
	cmd := &cobra.Command{
		Use:   "start",
		Short: "Start a detached daemon and return once it accepts connections",
		Long: `Start a daemon in the background (a new session, detached from the terminal)
and return once its socket accepts connections. Logs go to --log-file
(default: the socket path with ".log" appended). With --token-fd the token is
forwarded to the daemon over a pipe, never through disk, argv or environment.`,
		Example: `  sous daemon start --socket /tmp/sous.sock --token-file /tmp/tok`,
		Args:    cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			return startDaemon(streams, &o, wait)
		},
	}
	o.register(cmd)
	// start needs its socket (it waits for it, and stop talks to it), so a
	// WebSocket-only daemon is serve's alone.
	cmd.Flags().Lookup("listen").Usage = "also serve JSON-RPC over WebSocket at `ws://HOST:PORT[/PATH]` (path default /; repeatable)"
	cmd.Flags().StringVar(&o.logFile, "log-file", "", "file for the daemon's logs (default SOCKET.log)")
	cmd.Flags().DurationVar(&wait, "wait", 10*time.Second, "how long to wait for the socket to accept")
	return cmd
}

func startDaemon(streams *IO, o *serveOptions, wait time.Duration) error {
	if o.socket == "" {
		return usageErrorf("start needs a --socket: it waits for the socket, and stop talks to it")
	}
	if err := o.check(); err != nil {
		return err
	}
	self, err := os.Executable()
	if err != nil {
		return fmt.Errorf("start: find own executable: %w", err)
	}
	if dir := filepath.Dir(o.socket); dir != "" {
		if _, err := os.Stat(dir); err != nil {
			return fmt.Errorf("start: --socket %s: its directory: %w", o.socket, err)
		}
	}
	logPath := o.logFile
	if logPath == "" {
		logPath = o.socket + ".log"
	}
	logf, err := os.OpenFile(logPath, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o600)
	if err != nil {
		return fmt.Errorf("start: log file: %w", err)
	}
	defer logf.Close()
	// Read the token here, once nothing else can fail first, so a missing
	// or bad token fails in the foreground with a clear message; then
	// forward it over a pipe.
	token, err := o.readToken()
	if err != nil {
		return err
	}
	tokR, tokW, err := os.Pipe()
	if err != nil {
		return fmt.Errorf("start: %w", err)
	}
	defer tokR.Close()

	args := []string{"daemon", "serve", "--socket", o.socket, "--token-fd", "3",
		"--log-format", o.logFormat,
		"--replay-mem-limit", strconv.Itoa(o.replayMemLimit),
		"--replay-disk-limit", strconv.FormatInt(o.replayDiskLimit, 10),
		"--replay-disk-total", strconv.FormatInt(o.replayDiskTotal, 10),
		"--replay-mem-total", strconv.Itoa(o.replayMemTotal),
		"--retain-exited", strconv.Itoa(o.retainExited), "--retain-for", o.retainFor.String(),
		"--extract-max-bytes", strconv.FormatInt(o.extractMaxBytes, 10),
		"--extract-max-ratio", strconv.FormatFloat(o.extractMaxRatio, 'g', -1, 64)}
	if o.stateDir != "" {
		args = append(args, "--state-dir", o.stateDir)
	}
	if o.keepChildren {
		args = append(args, "--keep-children")
	}
	if !o.loginPath {
		args = append(args, "--login-path=false")
	}
	for _, c := range o.allowCommands {
		args = append(args, "--allow-command", c)
	}
	for _, l := range o.listen {
		args = append(args, "--listen", l)
	}
	args = append(args, "--ws-require-bearer="+strconv.FormatBool(o.wsRequireBearer),
		"--max-connections", strconv.Itoa(o.maxConnections))
	if o.metricsAddr != "" {
		args = append(args, "--metrics-addr", o.metricsAddr)
	}
	readyR, readyW, err := os.Pipe()
	if err != nil {
		return fmt.Errorf("start: %w", err)
	}
	defer readyR.Close()
	args = append(args, "--ready-fd", "4")
	child := exec.Command(self, args...)
	child.Stdout, child.Stderr = logf, logf
	child.ExtraFiles = []*os.File{tokR, readyW} // fds 3 and 4
	child.SysProcAttr = &syscall.SysProcAttr{Setsid: true}
	// claustrum's daemon marks its environment so children can tell they run
	// under a detached daemon; keep that parity (serve marks its children's
	// too, daemon_env.go).
	child.Env = append(os.Environ(), "CLAUDE_SSH_DAEMON_CHILD=1")
	err = child.Start()
	readyW.Close() // the child's now; EOF on readyR once it exits
	if err != nil {
		tokW.Close()
		return fmt.Errorf("start daemon: %w", err)
	}
	fmt.Fprintf(tokW, "%s\n", token)
	tokW.Close()

	// The child says "ready" once it listens. A socket that accepts is not
	// enough: another daemon may already be serving it, while this one
	// failed to listen and exits.
	ready := make(chan bool, 1)
	go func() {
		line, _ := bufio.NewReader(readyR).ReadString('\n')
		ready <- line == "ready\n"
	}()
	select {
	case ok := <-ready:
		if ok {
			if err := o.removeTokenFile(); err != nil {
				// The daemon serves; only the file stays behind.
				fmt.Fprintf(streams.ErrOut, "sous: %v\n", err)
			}
			fmt.Fprintf(streams.Out, "sous daemon started (pid %d) on %s, logs in %s\n", child.Process.Pid, o.socket, logPath)
			child.Process.Release()
			return nil
		}
		err := child.Wait()
		return fmt.Errorf("daemon exited during start (%v); its log %s ends with:\n%s", err, logPath, tail(logPath, 10))
	case <-time.After(wait):
		child.Process.Kill()
		child.Wait()
		return fmt.Errorf("daemon did not listen on %s within %s; see %s", o.socket, wait, logPath)
	}
}

// tail returns the last n lines of a file, for error messages.
func tail(path string, n int) string {
	b, err := os.ReadFile(path)
	if err != nil {
		return ""
	}
	lines := strings.Split(strings.TrimRight(string(b), "\n"), "\n")
	if len(lines) > n {
		lines = lines[len(lines)-n:]
	}
	return strings.Join(lines, "\n")
}

func newDaemonStopCmd(streams *IO) *cobra.Command {
	var socket, tokenFile string
	cmd := &cobra.Command{
		Use:   "stop",
		Short: "Ask a running daemon to shut down (best effort)",
		Long: `Send server.shutdown to the daemon on --socket, with the token from
--token-file (read, not deleted), else SOUS_TOKEN, else CLAUDE_RPC_TOKEN.
Without a daemon this is a silent no-op that exits 0, as claustrum -stop is.
A daemon that answers instead of stopping (a refused token) keeps running:
its reply is printed on stdout, as claustrum prints it, and sous exits 1
with a line on stderr saying so.`,
		Example: `  SOUS_TOKEN=$TOKEN sous daemon stop --socket /tmp/sous.sock
  sous daemon stop --socket /tmp/sous.sock --token-file ~/.config/sous/token`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			token := client.TokenFromEnv(os.Getenv)
			if tokenFile != "" {
				var err error
				if token, err = client.ReadTokenFile(tokenFile); err != nil {
					return usageErrorf("--token-file: %v", err)
				}
			}
			if socket == "" {
				return usageErrorf("stop: --socket must name the daemon's socket")
			}
			return stopDaemon(streams, socket, token)
		},
	}
	cmd.Flags().StringVar(&socket, "socket", defaultSocket(), "the daemon's Unix socket ($SOUS_SOCKET, else claustrum's default)")
	cmd.Flags().StringVar(&tokenFile, "token-file", "", "read the token from this file (else SOUS_TOKEN, then CLAUDE_RPC_TOKEN)")
	return cmd
}

func stopDaemon(streams *IO, socket, token string) error {
	conn, err := net.DialTimeout("unix", socket, 2*time.Second)
	if err != nil {
		return nil // no daemon: nothing to stop
	}
	defer conn.Close()
	req := fmt.Sprintf(`{"jsonrpc":"2.0","id":1,"method":"server.shutdown","auth":%s}`+"\n", strconv.Quote(token))
	if _, err := conn.Write([]byte(req)); err != nil {
		return nil
	}
	// A stopping daemon closes the connection without a reply; a refusing
	// one answers. Either way, wait briefly for whichever comes.
	conn.SetReadDeadline(time.Now().Add(5 * time.Second))
	line, _ := bufio.NewReader(conn).ReadString('\n')
	if line == "" {
		return nil
	}
	fmt.Fprint(streams.Out, line)
	var resp wire.Response
	why := "it answered instead of stopping"
	if json.Unmarshal([]byte(line), &resp) == nil && resp.Error != nil {
		why = resp.Error.Message
		if resp.Error.Code == wire.CodeUnauthorized {
			why += " (set --token-file, SOUS_TOKEN or CLAUDE_RPC_TOKEN to the daemon's token)"
		}
	}
	return fmt.Errorf("the daemon on %s is still running: %s", socket, why)
}

func newDaemonBridgeCmd(streams *IO) *cobra.Command {
	var socket string
	cmd := &cobra.Command{
		Use:   "bridge",
		Short: "Relay stdin/stdout to a daemon's socket (for ssh)",
		Long: `Relay bytes between stdin/stdout and the daemon's socket, unchanged: no auth
is injected, so whatever speaks through the bridge sends its own token. This is
what sous runs on the far side of an ssh connection.`,
		Example: `  ssh build-host sous daemon bridge --socket /run/sous.sock`,
		Args:    cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			return bridge(streams, socket)
		},
	}
	cmd.Flags().StringVar(&socket, "socket", defaultSocket(), "the daemon's Unix socket ($SOUS_SOCKET, else claustrum's default)")
	return cmd
}

func bridge(streams *IO, socket string) error {
	conn, err := net.Dial("unix", socket)
	if err != nil {
		return fmt.Errorf("dial server: %w", err)
	}
	defer conn.Close()
	done := make(chan struct{})
	go func() {
		io.Copy(conn, streams.In)
		// The client finished sending; let the daemon finish answering.
		if uc, ok := conn.(*net.UnixConn); ok {
			uc.CloseWrite()
		}
		close(done)
	}()
	if _, err := io.Copy(streams.Out, conn); err != nil && !errors.Is(err, net.ErrClosed) {
		return fmt.Errorf("bridge: %w", err)
	}
	return nil
}
