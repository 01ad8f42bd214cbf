// Package daemon implements claustrum's JSON-RPC protocol (docs/PROTOCOL.md): the
// server that owns processes, files, git and archives, reached over a Unix
// socket (NDJSON lines) or in process by the embedded client (no encoding at
// all: frames are handed over as Go values).
//
// The wire types live in daemon/wire, processes in daemon/proc, replay in
// daemon/streamlog, files and archives in daemon/fileops, git in
// daemon/gitops. This package binds them to the protocol: validation order,
// error codes, subscriptions, lifecycle.
package daemon

import (
	"context"
	"crypto/sha256"
	"crypto/subtle"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"os"
	"path/filepath"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"golang.org/x/sys/unix"

	"github.com/seed5ad92d46/sous/daemon/approvals"
	"github.com/seed5ad92d46/sous/daemon/envlist"
	"github.com/seed5ad92d46/sous/daemon/fileops"
	"github.com/seed5ad92d46/sous/daemon/gitops"
	"github.com/seed5ad92d46/sous/daemon/proc"
	"github.com/seed5ad92d46/sous/daemon/streamlog"
	"github.com/seed5ad92d46/sous/daemon/wire"
)

// Config configures a Server.
type Config struct {
	// Token is the shared secret every request must carry in "auth". The
	// embedded (in-process) sessions do not authenticate.
	Token string
	// Version is what server.version and server.capabilities report.
	Version string
	// StateDir receives spilled replay frames. Empty: replay is kept in
	// memory only and honestly truncated (firstSeq) beyond ReplayMemLimit.
	StateDir string
	// RunsDir keeps the journals of durable runs (the run.journal
	// extension, runjournal.go). Empty: StateDir/runs, or, without a
	// StateDir, none: the daemon does not advertise the extension.
	RunsDir string
	// ReplayMemLimit is the per-process bytes of frames kept in memory.
	ReplayMemLimit int
	// ReplayDiskLimit is the per-process bytes of frames spilled to StateDir.
	ReplayDiskLimit int64
	// ReplayDiskTotal bounds the spill of all processes together (default
	// 4 GiB): past it, exited processes lose their spilled replay, those
	// that exited longest ago first.
	ReplayDiskTotal int64
	// ReplayMemTotal bounds the replay exited processes keep in memory, all
	// together (default 64 MiB): past it, those that exited longest ago
	// move theirs to StateDir, or drop it without one (keeping the exit).
	ReplayMemTotal int
	// KeepChildren leaves children running across a graceful shutdown.
	KeepChildren bool
	// RetainExited and RetainFor bound how many exited processes stay
	// reattachable and for how long (defaults 1000 and 1 h).
	RetainExited int
	RetainFor    time.Duration
	// ShutdownGrace is how long children get between SIGTERM and SIGKILL at
	// shutdown (default 2 s).
	ShutdownGrace time.Duration
	// Dir is the daemon's working directory: the default cwd of children and
	// the default repo of git worktree ops (default: the process's cwd).
	Dir string
	// Env is the environment children inherit (default os.Environ()),
	// less wire.CredentialEnv: a spawn that wants those passes them in env.
	Env []string
	// Logger receives structured logs; never tokens or output.
	Logger *slog.Logger

	// AllowCommands, when not empty, are the only programs process.spawn
	// runs (every stage of a pipeline included); others are refused with
	// -32602. An entry is a program name, matching a command with that base
	// name however it is given, or an absolute path, matching a command
	// that resolves to the same file (see spawn_ext.go).
	AllowCommands []string
	// TimeoutGrace is how long a process killed for its timeoutMs gets
	// between SIGTERM and SIGKILL (default 3 s).
	TimeoutGrace time.Duration
	// DieWithDaemon has the kernel kill the daemon's children when its
	// process dies, even by SIGKILL (proc.Options.DieWithDaemon). For an
	// in-process daemon: its processes are unreachable once it is gone.
	DieWithDaemon bool
	// ExtractMaxBytes and ExtractMaxRatio bound what one files.extract_tar
	// may unpack: bytes in all, and bytes per byte of archive (extract.go).
	// An archive past either fails and leaves destDir empty. 0 means the
	// default (16 GiB, 200); a negative value, no limit.
	ExtractMaxBytes int64
	ExtractMaxRatio float64
	// DisableFeatures are extensions this daemon neither advertises nor
	// honours, as a daemon from before them (for testing clients' fallbacks):
	// process.spawn.pipeline, process.spawn.timeout, process.spawn.env.unset,
	// process.spawn.tty, process.spawn.key, process.spawn.stdin.closed,
	// process.stdin.close (a close param then does nothing),
	// git.worktree_remove.strict, git.worktree_create.newbranch,
	// files.extract_tar.options, git.worktree_create.include, and the
	// methods git.diff, git.commit, git.merge and git.push (each its own
	// feature).
	DisableFeatures []string
}

// Server is a claustrum daemon.
type Server struct {
	cfg       Config
	tokenHash [sha256.Size]byte
	log       *slog.Logger
	reg       *proc.Registry
	git       *gitops.Git
	approvals *approvals.Queue // approval.*: requests waiting for a person
	runs      *runJournals     // run.*: the journals of durable runs (runjournal.go)
	stats     Stats
	// extractLimits are Config's, defaults applied.
	extractLimits fileops.Limits

	mu        sync.Mutex
	listeners map[net.Listener]struct{}
	conns     map[*conn]struct{}
	closed    bool

	wsListeners     atomic.Int32  // WebSocket listeners being served (ws.go)
	sessions        atomic.Uint64 // sessions opened: the last one's Session.seq
	weakSandboxOnce sync.Once     // logs once that sandboxes lack mount isolation (spawn_sandbox.go)
	lines           sync.Pool     // *bigLine: the buffers long request lines are read into (lineReader)

	shutdownOnce sync.Once
	shutdownReq  chan struct{} // closed by server.shutdown
	closeOnce    sync.Once
	closeErr     error
	connWG       sync.WaitGroup
}

// Stats are the daemon's counters, read at scrape time by daemon/metrics
// (which exports every field; a new counter needs a line there for its name).
type Stats struct {
	Connections     atomic.Int64 // connections accepted, every transport
	ConnectionsOpen atomic.Int64 // connections open now (a gauge)
	Spawns          atomic.Int64
	Exits           atomic.Int64
	Reattaches      atomic.Int64
	StreamBytes     atomic.Int64 // child output bytes read
	StdinBytes      atomic.Int64 // stdin bytes accepted
	Refused         atomic.Int64 // requests refused for auth
	RefusedSpawns   atomic.Int64 // spawns refused: a command not in AllowCommands
	// MirroredBytes counts the output bytes of StreamBytes that the daemon
	// teed or wrote into a pipe or file its spawner passed
	// (process.spawn.mirror, .mirror.files): output that reached the
	// spawner without crossing the connection.
	MirroredBytes atomic.Int64
	// FramePumps counts the goroutines started to deliver a
	// subscription's frames (subscribe.go): a socket's frames are written
	// where they are made while the socket takes them at once
	// (inlineframes.go), so this grows with the streams whose readers
	// fell behind, and the spawners that mirror their output.
	FramePumps atomic.Int64

	// WebSocket transport (ws.go).
	WebSocketsOpen    atomic.Int64 // WebSocket connections open now (a gauge; what --max-connections bounds)
	UpgradesRefused   atomic.Int64 // upgrades refused with 401 (bad or missing bearer token)
	UpgradesOverLimit atomic.Int64 // upgrades refused with 503 (--max-connections)
	HeartbeatDrops    atomic.Int64 // WebSocket peers dropped for not answering a ping
	WebSocketsPending atomic.Int64 // TCP connections not upgraded yet (a gauge; what MaxPending bounds)
	WebSocketsShed    atomic.Int64 // TCP connections closed at once: MaxPending others were pending
}

// New returns a Server ready to Serve.
func New(cfg Config) (*Server, error) {
	if cfg.Logger == nil {
		cfg.Logger = slog.New(slog.DiscardHandler)
	}
	if cfg.Dir == "" {
		wd, err := os.Getwd()
		if err != nil {
			return nil, fmt.Errorf("daemon: %w", err)
		}
		cfg.Dir = wd
	}
	if cfg.ShutdownGrace <= 0 {
		cfg.ShutdownGrace = 2 * time.Second
	}
	if cfg.Version == "" {
		cfg.Version = "dev"
	}
	if err := CheckAllowCommands(cfg.AllowCommands); err != nil { // spawn_ext.go
		return nil, fmt.Errorf("daemon: %w", err)
	}
	s := &Server{
		cfg:           cfg,
		tokenHash:     sha256.Sum256([]byte(cfg.Token)),
		log:           cfg.Logger,
		git:           &gitops.Git{Dir: cfg.Dir},
		approvals:     approvals.New(nil, 0),
		extractLimits: extractLimits(cfg), // extract.go
		listeners:     make(map[net.Listener]struct{}),
		conns:         make(map[*conn]struct{}),
		shutdownReq:   make(chan struct{}),
	}
	runsDir := cfg.RunsDir
	if runsDir == "" && cfg.StateDir != "" {
		runsDir = filepath.Join(cfg.StateDir, "runs")
	}
	if runsDir == "" {
		// Nowhere to keep journals: the daemon does not offer to.
		s.cfg.DisableFeatures = append(slices.Clone(cfg.DisableFeatures), wire.FeatureRunJournal)
	}
	s.runs = newRunJournals(runsDir)
	logOpt := streamlog.Options{MemLimit: cfg.ReplayMemLimit, DiskLimit: cfg.ReplayDiskLimit}
	if cfg.StateDir != "" {
		spill := filepath.Join(cfg.StateDir, "replay")
		if err := os.MkdirAll(spill, 0o700); err != nil {
			return nil, fmt.Errorf("daemon: state dir: %w", err)
		}
		logOpt.SpillDir = spill
	}
	childEnv := cfg.Env
	if childEnv == nil {
		childEnv = os.Environ()
	}
	s.reg = proc.NewRegistry(proc.Options{
		Log:    logOpt,
		Env:    envlist.Without(childEnv, wire.CredentialEnv...),
		Dir:    cfg.Dir,
		Logger: cfg.Logger,
		OnExit: func(*proc.Process) { s.stats.Exits.Add(1) },

		RetainExited:    cfg.RetainExited,
		RetainFor:       cfg.RetainFor,
		ReplayDiskTotal: cfg.ReplayDiskTotal,
		ReplayMemTotal:  cfg.ReplayMemTotal,
		OnOutput: func(n, mirrored int) {
			s.stats.StreamBytes.Add(int64(n))
			if mirrored > 0 {
				s.stats.MirroredBytes.Add(int64(mirrored))
			}
		},

		TimeoutGrace:  cfg.TimeoutGrace,
		DieWithDaemon: cfg.DieWithDaemon,
	})
	return s, nil
}

// Stats returns the daemon's counters.
func (s *Server) Stats() *Stats { return &s.stats }

// Registry exposes the process registry (for tests and the CLI).
func (s *Server) Registry() *proc.Registry { return s.reg }

// authorized compares a token with the daemon's in constant time. Hashing
// first makes the comparison independent of the token's length too.
func (s *Server) authorized(token string) bool {
	h := sha256.Sum256([]byte(token))
	return subtle.ConstantTimeCompare(h[:], s.tokenHash[:]) == 1
}

// ListenUnix creates the daemon's socket at path with mode 0600. A stale
// socket file (nobody accepting) is replaced; a live one is an error.
func ListenUnix(path string) (net.Listener, error) {
	if err := CheckSocketPath(path); err != nil {
		return nil, err
	}
	if len(path) > maxSocketPath {
		// It could be bound (listenPrivate), but no client could dial it.
		return nil, fmt.Errorf("listen unix %s: the path is %d bytes long; a Unix socket's may be %d at most", path, len(path), maxSocketPath)
	}
	// Absolute, for the listener's Addr: sandboxed children, which may
	// run elsewhere, are kept from the socket by its path (spawn_sandbox.go).
	if abs, err := filepath.Abs(path); err == nil {
		path = abs
	}
	if _, err := os.Lstat(path); err == nil {
		os.Remove(path) // a stale socket: nobody accepts on it
	}
	ln, err := listenPrivate(path)
	if err != nil {
		return nil, fmt.Errorf("listen unix: %w", err)
	}
	return ln, nil
}

// CheckSocketPath reports whether ListenUnix could serve on path: a daemon
// already accepting there, or a file that is not a socket, are refused. A
// command line checks it before it consumes a token file.
func CheckSocketPath(path string) error {
	if c, err := net.DialTimeout("unix", path, time.Second); err == nil {
		c.Close()
		return fmt.Errorf("listen unix %s: a daemon is already serving this socket", path)
	}
	if fi, err := os.Lstat(path); err == nil && fi.Mode()&os.ModeSocket == 0 {
		// Never replace a user's file (and delete it at shutdown)
		// because a flag named it.
		return fmt.Errorf("listen unix %s: the path exists and is not a socket", path)
	}
	return nil
}

// listenPrivate binds the socket inside a fresh 0700 directory, makes it 0600
// and renames it into place, so there is no moment when another user could
// connect. (Changing the umask instead would race with children forked by an
// embedded daemon.) When the directory's path is too long for sun_path, the
// socket is bound through /proc/self/fd/N/s, N a descriptor of the
// directory: never at its final path.
func listenPrivate(path string) (net.Listener, error) {
	dir, err := os.MkdirTemp(filepath.Dir(path), ".sous-")
	if err != nil {
		return nil, err
	}
	defer os.RemoveAll(dir)
	tmp := filepath.Join(dir, "s")
	bindAt := tmp
	if len(tmp) >= maxSocketPath {
		d, err := os.OpenFile(dir, os.O_RDONLY|unix.O_PATH|unix.O_DIRECTORY, 0)
		if err != nil {
			return nil, err
		}
		defer d.Close()
		bindAt = fmt.Sprintf("/proc/self/fd/%d/s", d.Fd())
	}
	ln, err := net.Listen("unix", bindAt)
	if err != nil {
		if bindAt != tmp {
			return nil, fmt.Errorf("%w (binding through %s, as %s is too long: is /proc mounted?)", err, bindAt, tmp)
		}
		return nil, err
	}
	ul := ln.(*net.UnixListener)
	ul.SetUnlinkOnClose(false)
	if err := os.Chmod(tmp, 0o600); err != nil {
		ln.Close()
		return nil, err
	}
	if err := renameNoReplace(tmp, path); err != nil {
		ln.Close()
		return nil, err
	}
	return &unlinkListener{UnixListener: ul, path: path}, nil
}

// maxSocketPath is the longest path bind(2) takes for a Unix socket: the
// 108 bytes of sun_path, less the NUL.
const maxSocketPath = 107

// renameNoReplace renames from to to unless to exists: a file that
// appeared there since ListenUnix looked is not overwritten.
func renameNoReplace(from, to string) error {
	err := unix.Renameat2(unix.AT_FDCWD, from, unix.AT_FDCWD, to, unix.RENAME_NOREPLACE)
	switch {
	case err == nil:
		return nil
	case errors.Is(err, unix.EEXIST):
		return fmt.Errorf("%s appeared while the daemon was starting: %w", to, os.ErrExist)
	case errors.Is(err, unix.EINVAL), errors.Is(err, unix.ENOSYS):
		return os.Rename(from, to) // a filesystem without RENAME_NOREPLACE
	}
	return &os.LinkError{Op: "rename", Old: from, New: to, Err: err}
}

// unlinkListener removes the socket file it was renamed to when closed.
type unlinkListener struct {
	*net.UnixListener
	path string
	once sync.Once
}

// Addr is the socket's path, not the temporary one it was bound at.
func (l *unlinkListener) Addr() net.Addr { return &net.UnixAddr{Name: l.path, Net: "unix"} }

func (l *unlinkListener) Close() error {
	err := l.UnixListener.Close()
	l.once.Do(func() { os.Remove(l.path) })
	return err
}

// trackListener registers ln so that Close closes it; the caller runs
// untrack once it stops serving. A closed server refuses it.
func (s *Server) trackListener(ln net.Listener) (untrack func(), err error) {
	if s.cfg.Token == "" {
		// A request without "auth" would match an empty token: such a
		// daemon would serve anyone who can reach it.
		return nil, errors.New("daemon: refusing to serve without a token (it is empty)")
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closed {
		return nil, net.ErrClosed
	}
	s.listeners[ln] = struct{}{}
	return func() {
		s.mu.Lock()
		delete(s.listeners, ln)
		s.mu.Unlock()
	}, nil
}

// Serve accepts connections on ln until the server is closed or ln fails.
func (s *Server) Serve(ln net.Listener) error {
	untrack, err := s.trackListener(ln)
	if err != nil {
		return err
	}
	defer untrack()
	var delay time.Duration
	for {
		nc, err := ln.Accept()
		if err != nil {
			if s.isClosed() || errors.Is(err, net.ErrClosed) {
				return nil
			}
			var ne net.Error
			if errors.As(err, &ne) && ne.Timeout() || errors.Is(err, os.ErrDeadlineExceeded) || isTemporary(err) {
				// Out of file descriptors and the like: back off, keep serving.
				delay = min(max(2*delay, 5*time.Millisecond), time.Second)
				s.log.Warn("accept", "err", err, "retry", delay)
				time.Sleep(delay)
				continue
			}
			return fmt.Errorf("accept: %w", err)
		}
		delay = 0
		s.ServeConn(nc)
	}
}

func isTemporary(err error) bool {
	var t interface{ Temporary() bool }
	return errors.As(err, &t) && t.Temporary()
}

// ServeConn serves one NDJSON connection in the background (Unix socket,
// ssh bridge, or a test's net.Pipe).
func (s *Server) ServeConn(nc net.Conn) {
	s.serveTransport(newStreamTransport(nc, &s.lines), nil)
}

// serveTransport serves one connection in the background; done, when set,
// runs once it has ended (also when the daemon is closed already).
func (s *Server) serveTransport(t transport, done func()) {
	c := newConn(s, t)
	s.mu.Lock()
	if s.closed {
		s.mu.Unlock()
		t.close(errShutdown)
		if done != nil {
			done()
		}
		return
	}
	s.conns[c] = struct{}{}
	s.connWG.Add(1)
	s.mu.Unlock()
	s.stats.Connections.Add(1)
	s.stats.ConnectionsOpen.Add(1)
	go func() {
		defer s.connWG.Done()
		c.serve()
		s.mu.Lock()
		delete(s.conns, c)
		s.mu.Unlock()
		s.stats.ConnectionsOpen.Add(-1)
		if done != nil {
			done()
		}
	}()
}

// socketPaths are the absolute paths of the Unix sockets the daemon
// serves.
func (s *Server) socketPaths() []string {
	s.mu.Lock()
	defer s.mu.Unlock()
	var paths []string
	for ln := range s.listeners {
		if a := ln.Addr(); a.Network() == "unix" && a.String() != "" && a.String()[0] != '@' {
			if p, err := filepath.Abs(a.String()); err == nil {
				paths = append(paths, p)
			}
		}
	}
	return paths
}

func (s *Server) isClosed() bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.closed
}

// ShutdownRequested is closed when a client called server.shutdown.
func (s *Server) ShutdownRequested() <-chan struct{} { return s.shutdownReq }

func (s *Server) requestShutdown() {
	s.shutdownOnce.Do(func() { close(s.shutdownReq) })
}

// Close shuts the daemon down: listeners and connections close, then every
// child process group is stopped (SIGTERM, SIGKILL after the grace) unless
// KeepChildren is set. It waits for the server's goroutines.
func (s *Server) Close() error {
	s.closeOnce.Do(func() {
		s.mu.Lock()
		s.closed = true
		for ln := range s.listeners {
			ln.Close()
		}
		conns := make([]*conn, 0, len(s.conns))
		for c := range s.conns {
			conns = append(conns, c)
		}
		s.mu.Unlock()
		for _, c := range conns {
			c.close(errShutdown)
		}
		s.runs.closeAll()
		n := s.reg.Shutdown(s.cfg.KeepChildren, s.cfg.ShutdownGrace)
		if s.cfg.KeepChildren && n > 0 {
			s.log.Info(fmt.Sprintf("[Server] -keep-children: leaving %d running child process(es) alive across shutdown", n))
		}
		s.connWG.Wait()
		s.requestShutdown()
	})
	return s.closeErr
}

// Local returns an in-process session for the embedded client. Frames for
// the processes it follows are handed to sink as Go values.
//
// With Close, it is what the client takes of an in-process daemon
// (client.LocalServer): the program that composes them hands it a *Server.
func (s *Server) Local(sink FrameSink) LocalSession {
	return newSession(s, sink)
}

// CallContext is the context a handler runs under; it ends when the
// session's connection goes away or the daemon closes.
type CallContext = context.Context
