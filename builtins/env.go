package builtins

import (
	"context"

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
}

// Waiter lets the recipe thread block without stalling the run: while it
// waits it runs the callbacks other goroutines posted for the recipe thread
// (agent permission callbacks). runtime.Loop implements it.
type Waiter interface {
	// Wait returns nil once a receive from ready succeeds (a closed channel
	// or a signal), or ctx's error if ctx ends first. A nil ready waits for ctx.
	Wait(ctx context.Context, ready <-chan struct{}) error
}

// Output receives what a run's processes do. Implementations are safe for
// concurrent use.
type Output interface {
	Spawned(SpawnInfo)
	Exited(id string, exitCode int)
	// Echo returns the live echo of one process. Its Write is called on the
	// client's frame reader goroutine, so it must return promptly.
	Echo(id string) Echo
}

// SpawnInfo describes a process the run started or reattached to.
type SpawnInfo struct {
	ID         string
	Pid        int // 0 when unknown
	Command    []string
	Host       string
	Reattached bool
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
