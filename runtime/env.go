package runtime

import (
	"context"
	"encoding/json"
	"errors"
	"io"
	"slices"

	"github.com/seed5ad92d46/sous/daemon/wire"
)

// Env is what the builtins of one run share: the run's context, event
// loop, output, daemon connections and approver, and the state each
// plugin keeps for the run (State). The runtime makes one per run;
// nothing in it outlives the run.
type Env struct {
	// Ctx ends when the run is interrupted. It lives here rather than in
	// each call because Starlark threads carry no context. Once the recipe
	// has ended, the runtime sets it to each deferred call's own context.
	Ctx    context.Context
	Table  *Table
	Loop   Waiter
	Output Output
	Hosts  Connector
	Args   map[string]string
	Getenv func(name string) (string, bool)
	// Shard is this run's part of a CI matrix (sous run --shard I/N):
	// parallel() starts only the items whose index % Count == Index.
	Shard Shard
	// Budget is what the run's agent sessions spent and its --max-cost
	// (budget.go): the sessions' builtins refuse turns once it is
	// exceeded, and stop the running ones.
	Budget *Budget
	// Dir is the recipe's working directory: relative paths a recipe gives
	// a local host are taken from it (builtins' hostpath.go). Empty: the
	// process's working directory.
	Dir string
	// Approver decides the permission requests that no recipe policy
	// decided: the command line's rules, a prompt, the default. Nil denies
	// them all (by "default").
	Approver Approver
	// AgentEnv is the run's Options.AgentEnv (nil: none): the sessions'
	// builtin sets it in every session's environment.
	AgentEnv *AgentEnv
	// Abort stops the run because of err, an error of the recipe's own code
	// that surfaced outside the builtin it was running in (a policy that
	// raised while an agent waited for its answer): the recipe fails with
	// err, whatever the builtin then running returns. Ctx must end soon
	// after, so that every wait returns. Nil: such errors only deny.
	Abort func(err error)
	// Journal is the journal of a durable run (sous run --journal), which
	// every builtin call goes through; nil: the run keeps none.
	Journal *Journal
	// Workers run the calls a builtin waits for through Loop (nil: a
	// goroutine per call); the run closes them at its end.
	Workers *Workers

	// The plugins' states (Table.Start), by plugin name, and the names of
	// the plugins that have one, in table order.
	states     map[string]any
	stateOrder []string
	// The calls Defer registered, oldest first, and whether the recipe has
	// ended (cleanup.go). Recipe thread only.
	deferred []Deferred
	ended    bool
}

// State is what the plugin named plugin keeps for this run: what its
// OnStart returned (nil when it has no OnStart or returned nil).
func (e *Env) State(plugin string) any { return e.states[plugin] }

// closeStates closes the plugins' states that are io.Closers, in the
// reverse of the order they were made, and joins their errors.
func (e *Env) closeStates() error {
	var errs []error
	for _, name := range slices.Backward(e.stateOrder) {
		if c, ok := e.states[name].(io.Closer); ok {
			if err := c.Close(); err != nil {
				errs = append(errs, err)
			}
		}
	}
	return errors.Join(errs...)
}

// Waiter lets the recipe thread block without stalling the run: while it
// waits it runs the callbacks other goroutines posted for the recipe thread
// (agent permission callbacks). Loop implements it.
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
	// EchoBeside is Echo for a process that runs beside the recipe (one
	// spawn started): the human output holds its lines until the recipe
	// settles (Settle), so that whether they carry "[id] " is decided
	// with the processes spawned next to it, whichever printed first.
	EchoBeside(id string) Echo
	// Settle says the recipe moved on from what it spawned: the runtime
	// calls it before each builtin call but spawn's, and at the recipe's
	// end; the echo held goes out. Else it goes out once the recipe
	// computed HoldLimit without calling a builtin, time spent in spawn
	// calls aside (SpawnStarts, SpawnEnds), and at most MaxHold after the
	// hold began (hold.go).
	Settle()
	SpawnStarts()
	SpawnEnds()
	// Pending is a permission request that waits for a decision: the
	// Approval with the same kind, session, tool and tool use id ends it.
	// The status area on a terminal shows it meanwhile.
	Pending(ApprovalInfo)
	// Agent is one protocol message of an agent session, in (from the
	// CLI) or out (to it). It is called on the session's goroutines and
	// must return promptly.
	Agent(session, dir string, message json.RawMessage)
	// Approval is one decision on a permission request.
	Approval(ApprovalInfo)
	// Hook is one answer of a recipe's agent hook (hookline.go).
	Hook(HookInfo)
	// Tool is one call of a session's own tool answered (tool is the name
	// the model used, mcp__sous__NAME); ok is false when its function
	// failed.
	Tool(session, tool string, ok bool)
	// Progress is where a parallel() fan-out stands (progress.go).
	Progress(ProgressInfo)
	// Redact replaces secret with event.Marker in everything the run
	// writes from now on (redact.go). It reports false, doing nothing,
	// for a value shorter than event.MinSecret.
	Redact(secret string) bool
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
