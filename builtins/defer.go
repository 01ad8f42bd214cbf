package builtins

import (
	"go.starlark.net/starlark"
	"go.starlark.net/syntax"
)

func deferEntries() []Entry {
	return []Entry{
		{Name: "defer", Sig: "defer(fn, *args, **kwargs)",
			Doc: "Registers fn(*args, **kwargs) to be called when the recipe ends, however it ends: when it finishes, " +
				"fails (fail(), a failing builtin, an error) or is interrupted (Ctrl-C, SIGTERM). The deferred calls " +
				"run newest first, after the recipe stopped and before the run's daemon connections close and the " +
				"embedded daemon stops its processes, so they can still remove worktrees or run commands: " +
				"defer(git.worktree_remove, wt.path, repo=root). The arguments are the values given to defer. A " +
				"deferred call that fails is reported in one line (a log event in --json mode) and the others still " +
				"run; the exit code stays the recipe's own failure's, or is 1 when only cleanup failed. A second " +
				"Ctrl-C abandons the calls not yet run.",
			Fn: deferBuiltin},
	}
}

// Deferred is a call registered with defer(), made when the recipe ends.
type Deferred struct {
	Fn     starlark.Callable
	Args   starlark.Tuple
	Kwargs []starlark.Tuple
	At     syntax.Position // the defer() call, for the report of a failure
}

func deferBuiltin(c *Call) (starlark.Value, error) {
	if len(c.Args) == 0 {
		return nil, c.errorf("missing argument for fn")
	}
	fn, ok := c.Args[0].(starlark.Callable)
	if !ok {
		return nil, c.errorf("fn: %v", want("a function", c.Args[0]))
	}
	c.Env.deferred = append(c.Env.deferred, Deferred{
		Fn: fn, Args: c.Args[1:], Kwargs: c.Kwargs, At: callerPosition(c.Thread),
	})
	return starlark.None, nil
}

// callerPosition is where the innermost Starlark function called the
// running builtin.
func callerPosition(thread *starlark.Thread) syntax.Position {
	for i := 0; i < thread.CallStackDepth(); i++ {
		if pos := thread.CallFrame(i).Pos; pos.Filename() != "<builtin>" {
			return pos
		}
	}
	return syntax.Position{}
}

// NextDeferred removes and returns the call registered last, or false when
// none is left. The runtime calls it once the recipe has ended, until it
// returns false: a deferred call may defer another, which runs next.
func (e *Env) NextDeferred() (Deferred, bool) {
	n := len(e.deferred)
	if n == 0 {
		return Deferred{}, false
	}
	d := e.deferred[n-1]
	e.deferred = e.deferred[:n-1]
	return d, true
}

// DropDeferred forgets the calls not made (a second Ctrl-C abandoned the
// cleanup) and says how many there were.
func (e *Env) DropDeferred() int {
	n := len(e.deferred)
	e.deferred = nil
	return n
}

// EndRecipe marks the recipe as over: its deferred calls run next. From
// then on an agent's permission request is denied at once ("the recipe is
// stopping") rather than handed to a policy of a recipe that has stopped
// (after an interrupt, on a cancelled thread).
func (e *Env) EndRecipe() { e.ended = true }
