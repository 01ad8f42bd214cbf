package builtins

import (
	"context"
	"encoding/json"
	"sync"

	"go.starlark.net/starlark"

	"github.com/seed5ad92d46/sous/daemon/client"
	"github.com/seed5ad92d46/sous/daemon/wire"
)

// Env is what the builtins of one run share. The runtime makes one per run;
// nothing in this package outlives it.
type Env struct {
	// Ctx ends when the run is interrupted. It lives here rather than in
	// each call because Starlark threads carry no context.
	Ctx    context.Context
	Table  *Table
	Loop   Waiter
	Output Output
	Hosts  Connector
	Args   map[string]string
	Getenv func(name string) (string, bool)
	// Dir is the recipe's working directory: relative paths given to
	// files.* and extract_tar on a local host are taken from it
	// (paths.go). Empty: the process's working directory.
	Dir string
	// Approver decides the permission requests that no recipe policy
	// decided: the command line's rules, a prompt, the default. Nil denies
	// them all (by "default").
	Approver Approver
	// Abort stops the run because of err, an error of the recipe's own code
	// that surfaced outside the builtin it was running in (a policy that
	// raised while an agent waited for its answer): the recipe fails with
	// err, whatever the builtin then running returns. Ctx must end soon
	// after, so that every wait returns. Nil: such errors only deny.
	Abort func(err error)
	// Lines bounds what a Process.lines() iteration holds; the zero value
	// is the documented bounds.
	Lines LinesLimits

	// What the agent builtins keep for the run; see agents.
	agents agents
}

// agents is the run's agent state. The recipe-wide policy is only touched
// on the recipe thread; the sessions are also closed from the runtime's
// goroutine at the end, hence the lock.
type agents struct {
	policy starlark.Callable // set by approvals(); nil: none
	// inPolicy counts the policies running on the recipe thread (they can
	// nest through a builtin that waits). Waiting for a turn then would
	// never end: the loop runs no other callback while one runs, so the
	// turn's own permission requests could not be answered.
	inPolicy int

	mu       sync.Mutex
	sessions map[*Session]struct{}
	closed   bool
}

// Waiter lets the recipe thread block without stalling the run: while it
// waits it runs the callbacks other goroutines posted for the recipe thread
// (agent permission callbacks). runtime.Loop implements it.
type Waiter interface {
	// Wait returns nil once a receive from ready succeeds (a closed channel
	// or a signal), or ctx's error if ctx ends first. A nil ready waits for ctx.
	Wait(ctx context.Context, ready <-chan struct{}) error
	// Post queues f to run on the recipe thread during a Wait. It never
	// blocks and is safe from any goroutine.
	Post(f func())
}

// Output receives what a run's processes do. Implementations are safe for
// concurrent use.
type Output interface {
	Spawned(SpawnInfo)
	Exited(id string, exitCode int)
	// Echo returns the live echo of one process. Its Write is called on the
	// client's frame reader goroutine, so it must return promptly.
	Echo(id string) Echo
	// Agent is one protocol message of an agent session, in (from the
	// CLI) or out (to it). It is called on the session's goroutines and
	// must return promptly.
	Agent(session, dir string, message json.RawMessage)
	// Approval is one decision on a permission request.
	Approval(ApprovalInfo)
}

// ApprovalInfo describes a decision for the log.
type ApprovalInfo struct {
	Kind      string // "tool" or "privileged"
	Session   string // "" for a privileged command
	Tool      string
	ToolUseID string
	Summary   string // what was asked, in one line (the command, the path)
	Allow     bool
	By        string // "session", "recipe", "flag", "prompt" or "default"
	Message   string // the deny message
}

// SpawnInfo describes a process the run started or reattached to.
type SpawnInfo struct {
	ID         string
	Pid        int // 0 when unknown
	Command    []string
	Host       string
	Reattached bool
	// Lost counts the frames of a reattach's replay that the daemon no
	// longer had: it keeps a bounded replay (a daemon without a state
	// dir, such as sous run's own, the newest 4 MiB of each process).
	Lost int64
}

// Echo streams one process's output to the runner, line by line.
type Echo interface {
	// Write takes a chunk of output; data is valid only during the call.
	Write(stream wire.Stream, data []byte)
	// Close flushes a last partial line; the process stops counting as
	// echoing.
	Close()
}

// Connector opens daemon connections for a run and owns them: the runtime
// closes every one when the run ends.
type Connector interface {
	// Default is the run's default host, connected on first use so that a
	// recipe that never touches a process, file or repository starts no
	// daemon.
	Default(ctx context.Context) (*client.Client, error)
	// DefaultTarget names the default host ("embedded", "unix:///path").
	DefaultTarget() string
	// Open connects to target ("embedded" or "unix:///path") with token.
	Open(ctx context.Context, target, token string) (*client.Client, error)
}

// DefaultHost is the host the top-level builtins act on.
func (e *Env) DefaultHost() *Host {
	return &Host{env: e, target: e.Hosts.DefaultTarget(), connect: e.Hosts.Default}
}

// block runs fn on its own goroutine and waits for it through the event
// loop, so that a daemon call that takes a while (a worktree, an archive, a
// kill with a grace) does not keep callbacks posted to the recipe thread
// from running. When ctx ends first, fn is left to finish on its own (it
// gets the same ctx) and its result is dropped.
func (e *Env) block(ctx context.Context, fn func(ctx context.Context) error) error {
	done := make(chan struct{})
	var err error
	go func() {
		defer close(done)
		err = fn(ctx)
	}()
	if werr := e.Loop.Wait(ctx, done); werr != nil {
		return werr
	}
	return err
}
