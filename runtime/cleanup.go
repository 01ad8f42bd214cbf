package runtime

import (
	"context"
	"errors"
	"fmt"
	"strings"

	"go.starlark.net/starlark"

	"github.com/seed5ad92d46/sous/builtins"
)

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
	r.env.EndRecipe()
	var first error
	for {
		d, ok := r.env.NextDeferred()
		if !ok {
			break
		}
		if ctx.Err() != nil {
			n := 1 + r.env.DropDeferred()
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
func (r *recipeRun) callDeferred(ctx context.Context, d builtins.Deferred) error {
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
