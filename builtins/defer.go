package builtins

import (
	"go.starlark.net/starlark"
	"go.starlark.net/syntax"

	"github.com/seed5ad92d46/sous/runtime"
)

func deferEntries() []runtime.Entry {
	return []runtime.Entry{
		{Name: "defer", Journal: runtime.JournalPure, Sig: "defer(fn, *args, **kwargs)",
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

func deferBuiltin(c *runtime.Call) (starlark.Value, error) {
	if len(c.Args) == 0 {
		return nil, c.Errorf("missing argument for fn")
	}
	fn, ok := c.Args[0].(starlark.Callable)
	if !ok {
		return nil, c.Errorf("fn: %v", want("a function", c.Args[0]))
	}
	c.Env.Defer(runtime.Deferred{Fn: fn, Args: c.Args[1:], Kwargs: c.Kwargs, At: callerPosition(c.Thread)})
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
