package runtime

import (
	"context"
	"errors"
	"fmt"
	"strings"

	"go.starlark.net/starlark"
	"go.starlark.net/syntax"
)

// Deferred is a call to make when the recipe ends, however it ends: what
// defer() registers (Env.Defer).
type Deferred struct {
	Fn     starlark.Callable
	Args   starlark.Tuple
	Kwargs []starlark.Tuple
	At     syntax.Position // the defer() call, for the report of a failure
}

// Defer registers a call to make when the recipe ends. The calls run
// newest first, each on a thread of its own; one made during the cleanup
// (a deferred call that defers another) runs next. Recipe thread only.
func (e *Env) Defer(d Deferred) { e.deferred = append(e.deferred, d) }

// RecipeEnded reports whether the recipe has ended: its deferred calls run
// now. An agent's permission request is then denied at once ("the recipe
// is stopping") rather than handed to a policy of a recipe that has
// stopped (after an interrupt, on a cancelled thread). Recipe thread only.
func (e *Env) RecipeEnded() bool { return e.ended }

// nextDeferred removes and returns the call registered last, or false when
// none is left.
func (e *Env) nextDeferred() (Deferred, bool) {
	n := len(e.deferred)
	if n == 0 {
		return Deferred{}, false
	}
	d := e.deferred[n-1]
	e.deferred = e.deferred[:n-1]
	return d, true
}

// dropDeferred forgets the calls not made (a second Ctrl-C abandoned the
// cleanup) and says how many there were.
func (e *Env) dropDeferred() int {
	n := len(e.deferred)
	e.deferred = nil
	return n
}

// errAbandoned is why a cleanup stopped before its last deferred call.
var errAbandoned = errors.New("cleanup abandoned")

// cleanup makes the calls the recipe deferred, newest first, once the
// recipe has ended however it ended. Each runs on a thread of its own (the
// recipe's may be cancelled) with builtins whose context is ctx, so they
// work after an interrupt; ctx ending (a second Ctrl-C) stops the one
// running and abandons the rest. A call that fails is reported in one line
// and the others still run. It returns the first failure's report, or
// errAbandoned.
func (r *recipeRun) cleanup(ctx context.Context) error {
	r.env.ended = true
	var first error
	for {
		d, ok := r.env.nextDeferred()
		if !ok {
			break
		}
		if ctx.Err() != nil {
			n := 1 + r.env.dropDeferred()
			r.out.Error(fmt.Sprintf("sous: cleanup abandoned: %d deferred %s not run", n, plural(n, "call", "calls")))
			return errAbandoned
		}
		if err := r.callDeferred(ctx, d); err != nil {
			report := fmt.Sprintf("deferred %s (%s) failed: %s", d.Fn.Name(), d.At, joinLines(errorMessage(err)))
			r.out.Failure("sous: " + report)
			if first == nil {
				first = errors.New(report)
			}
		}
	}
	if ctx.Err() != nil {
		return errAbandoned // during the last call
	}
	return first
}

// callDeferred makes one deferred call on a thread of its own.
func (r *recipeRun) callDeferred(ctx context.Context, d Deferred) error {
	callCtx, cancel := context.WithCancel(ctx)
	r.callCancels = append(r.callCancels, cancel)
	thread := r.newThread("sous cleanup")
	r.enter(callCtx, cancel, thread)
	stop := context.AfterFunc(callCtx, func() { thread.Cancel("cleanup abandoned") })
	defer stop()
	_, err := starlark.Call(thread, d.Fn, d.Args, d.Kwargs)
	if r.abortErr != nil {
		return r.abortErr
	}
	return err
}

// errorMessage is what went wrong, without the traceback: the innermost
// Starlark error's message.
func errorMessage(err error) string {
	if ee := innermostEvalError(err); ee != nil {
		return ee.Msg
	}
	return err.Error()
}

// joinLines joins a message's lines with "; " (a failed command's message
// carries the last lines of its stderr).
func joinLines(s string) string {
	var parts []string
	for _, l := range strings.Split(strings.TrimSpace(s), "\n") {
		if l = strings.TrimSpace(l); l != "" {
			parts = append(parts, l)
		}
	}
	return strings.Join(parts, "; ")
}

func plural(n int, one, many string) string {
	if n == 1 {
		return one
	}
	return many
}
