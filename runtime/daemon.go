package runtime

import (
	"context"
	"time"

	"github.com/seed5ad92d46/sous/daemon/client"
	"github.com/seed5ad92d46/sous/daemon/wire"
)

// Connector opens daemon connections for a run and owns them: the runtime
// closes every one when the run ends (Close). The runtime's own connects to
// Options.Host and the targets of host(); a test gives its own
// (Options.Connector), such as an in-memory daemon.
type Connector interface {
	// Default is the run's default host, connected on first use so that a
	// recipe that never touches a process, file or repository starts no
	// daemon.
	Default(ctx context.Context) (Daemon, error)
	// DefaultTarget names the default host ("embedded", "unix:///path").
	DefaultTarget() string
	// Open connects to target ("embedded" or "unix:///path") with token.
	Open(ctx context.Context, target, token string) (Daemon, error)
	// Close ends every connection; the runtime calls it once, when the run
	// ends. The builtins never do.
	Close() error
}

// Daemon is a connection to a daemon as the builtins use it: the part of
// *client.Client they call, so that a test can stand an in-memory daemon
// in for it. ClientDaemon makes one of a *client.Client.
type Daemon interface {
	// Call makes one JSON-RPC call (files.stat, git.info, process.list...).
	Call(ctx context.Context, method string, params, result any) error
	HasFeature(ctx context.Context, feature string) (bool, error)
	// Spawn starts a process and follows its output from the first frame,
	// handing each to h (see client.FrameHandler).
	Spawn(ctx context.Context, spec client.SpawnSpec, h client.FrameHandler) (Proc, error)
	// Reattach follows a process already on the daemon; a nil Proc with
	// res.Found false when there is none.
	Reattach(ctx context.Context, id string, fromSeq int64, h client.FrameHandler) (Proc, wire.ReattachResult, error)
	CreateWorktree(ctx context.Context, p wire.GitParams) (wire.WorktreeResult, error)
	RemoveWorktree(ctx context.Context, p wire.GitParams, force bool) (wire.WorktreeResult, error)
	// Client is the client library's connection behind the Daemon, for
	// what speaks the protocol itself (the agent engine); nil when there
	// is none (a test's in-memory daemon).
	Client() *client.Client
}

// Proc is a process a Daemon follows: the part of *client.Proc the
// builtins use.
type Proc interface {
	Pid() int // 0 when unknown
	// Lost counts the frames of a reattach's replay the daemon no longer had.
	Lost() int64
	// Done is closed once the process has ended or following it failed.
	Done() <-chan struct{}
	Exited() (code int, ok bool)
	Err() error // why following failed
	ExitSignal() int
	TimedOut() bool
	StageExitCodes() []int
	Write(ctx context.Context, data []byte) (int64, error)
	WriteAt(ctx context.Context, data []byte, offset int64) (applied int64, duplicate bool, err error)
	CloseStdin(ctx context.Context) error
	Kill(ctx context.Context, signal string) error
	KillAndWait(ctx context.Context, signal string, grace time.Duration, escalate bool) (wire.KillAndWaitResult, error)
	Resize(ctx context.Context, rows, cols int) error
}

// ClientDaemon is c as a Daemon. Wrap each connection once and keep the
// result: the builtins tell connections apart by their Daemon value.
func ClientDaemon(c *client.Client) Daemon { return clientDaemon{c} }

type clientDaemon struct{ c *client.Client }

func (d clientDaemon) Call(ctx context.Context, method string, params, result any) error {
	return d.c.Call(ctx, method, params, result)
}

func (d clientDaemon) HasFeature(ctx context.Context, feature string) (bool, error) {
	return d.c.HasFeature(ctx, feature)
}

func (d clientDaemon) Spawn(ctx context.Context, spec client.SpawnSpec, h client.FrameHandler) (Proc, error) {
	p, err := d.c.Spawn(ctx, spec, h)
	if p == nil {
		return nil, err // not a nil *client.Proc in a non-nil Proc
	}
	return clientProc{p}, err
}

func (d clientDaemon) Reattach(ctx context.Context, id string, fromSeq int64, h client.FrameHandler) (Proc, wire.ReattachResult, error) {
	p, res, err := d.c.Reattach(ctx, id, fromSeq, h)
	if p == nil {
		return nil, res, err
	}
	return clientProc{p}, res, err
}

func (d clientDaemon) CreateWorktree(ctx context.Context, p wire.GitParams) (wire.WorktreeResult, error) {
	return d.c.CreateWorktree(ctx, p)
}

func (d clientDaemon) RemoveWorktree(ctx context.Context, p wire.GitParams, force bool) (wire.WorktreeResult, error) {
	return d.c.RemoveWorktree(ctx, p, force)
}

func (d clientDaemon) Client() *client.Client { return d.c }

// clientProc is a *client.Proc as a Proc.
type clientProc struct{ *client.Proc }

func (p clientProc) Pid() int { return p.Proc.Pid }
