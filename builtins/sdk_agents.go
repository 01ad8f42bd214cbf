package builtins

import (
	"context"
	"errors"
	"fmt"
	"io"
	"sync"
	"time"

	"go.starlark.net/starlark"
)

// The run's registry of agent sessions: which are open, which a resumed
// run rebuilt and adopted, all closed at the end; and when the recipe
// thread may wait for a turn.

// agents is the run's agent state, the agents plugin's (runtime.Env.State).
// The recipe-wide policy is only touched on the recipe thread; the
// sessions are also closed from the runtime's goroutine at the end, hence
// the lock.
type agents struct {
	policy starlark.Callable // set by approvals(); nil: none
	// inPolicy counts the policies and hooks running on the recipe thread
	// (they can nest through a builtin that waits), inTool the tool
	// functions. Waiting for a turn then would never end: the loop runs no
	// other callback while one runs, so the turn's own permission requests,
	// hooks and tool calls could not be answered.
	inPolicy, inTool int

	mu       sync.Mutex
	sessions map[*Session]struct{}
	closed   bool
	// orphans are the sessions a resumed run rebuilt and has not taken
	// over: their CLI, on a daemon that outlives the runner, is ended
	// with the run (sdk_durable.go).
	orphans map[*Session]struct{}
}

func (a *agents) orphan(s *Session) {
	a.mu.Lock()
	defer a.mu.Unlock()
	if a.orphans == nil {
		a.orphans = make(map[*Session]struct{})
	}
	a.orphans[s] = struct{}{}
}

func (a *agents) adopted(s *Session) {
	a.mu.Lock()
	defer a.mu.Unlock()
	delete(a.orphans, s)
}

var _ io.Closer = (*agents)(nil)

// track registers a session so that the run closes it; false when the run
// is over.
func (a *agents) track(s *Session) bool {
	a.mu.Lock()
	defer a.mu.Unlock()
	if a.closed {
		return false
	}
	if a.sessions == nil {
		a.sessions = make(map[*Session]struct{})
	}
	a.sessions[s] = struct{}{}
	return true
}

func (a *agents) untrack(s *Session) {
	a.mu.Lock()
	defer a.mu.Unlock()
	delete(a.sessions, s)
}

// Close ends every agent session of the run, whose CLI process tree is
// killed and reaped. The runtime calls it when the recipe ends, however it
// ends, before it closes the daemon connections (a CLI on a socket daemon
// would outlive them).
func (a *agents) Close() error {
	a.mu.Lock()
	a.closed = true
	sessions := a.sessions
	a.sessions = nil
	orphans := a.orphans
	a.orphans = nil
	a.mu.Unlock()
	for s := range orphans {
		if s.s == nil && !s.replayed.closed && s.host.Outlives() {
			ctx, cancel := context.WithTimeout(context.Background(), 15*time.Second)
			if d, err := s.host.Connect(ctx); err == nil {
				_ = killOnDaemon(ctx, d, s.replayed.cli)
			}
			cancel()
		}
	}
	var (
		wg   sync.WaitGroup
		mu   sync.Mutex
		errs []error
	)
	for s := range sessions {
		wg.Add(1)
		go func() {
			defer wg.Done()
			if err := s.s.Close(); err != nil {
				mu.Lock()
				errs = append(errs, fmt.Errorf("session %s: %w", s.s.ID(), err))
				mu.Unlock()
			}
		}()
	}
	wg.Wait()
	if err := errors.Join(errs...); err != nil {
		return fmt.Errorf("closing agent sessions: %w", err)
	}
	return nil
}

// Why a callback cannot wait for an agent's turn.
var (
	errInPolicy = errors.New("a policy or hook cannot wait for an agent's turn: no permission request or hook could be answered meanwhile")
	errInTool   = errors.New("a tool's function cannot wait for an agent's turn: no tool call or permission request could be answered meanwhile")
)

// turnWaitRefused says why the recipe thread cannot wait for a turn now
// (it runs a callback), or nil.
func (a *agents) turnWaitRefused() error {
	switch {
	case a.inPolicy > 0:
		return errInPolicy
	case a.inTool > 0:
		return errInTool
	}
	return nil
}
