package runtime

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"

	"go.starlark.net/starlark"

	"github.com/seed5ad92d46/sous/builtins"
	"github.com/seed5ad92d46/sous/daemon/client"
)

// Options configure one run of a recipe.
type Options struct {
	Recipe         string            // path of the .star file
	Args           map[string]string // the recipe's args (-a key=value)
	Stdout, Stderr io.Writer
	JSON           bool // stdout carries JSON events only
	// Host is the default host: URL "embedded" (or "") for the daemon
	// inside sous, configured by Host.Embedded, else a socket daemon.
	// host("embedded") in a recipe reaches the same embedded daemon.
	Host client.Target
	// Getenv reads the runner's environment (default os.LookupEnv).
	Getenv func(string) (string, bool)
	Table  *builtins.Table
}

// ExitError says how a run that did not finish ended. What went wrong has
// been written to Stderr (and the end event) already.
type ExitError struct {
	Code int // 1 failed, 2 usage error, 130 interrupted
	Err  error
}

func (e *ExitError) Error() string { return e.Err.Error() }
func (e *ExitError) Unwrap() error { return e.Err }

// Interrupt is the cause to cancel a run's context with when a signal
// stops it; its code becomes the exit code (130 for SIGINT).
type Interrupt struct {
	Signal os.Signal
	Code   int
}

func (i *Interrupt) Error() string { return "interrupted by " + i.Signal.String() }

// Exit codes of a run that did not finish.
const (
	CodeFailed      = 1
	CodeUsage       = 2
	CodeInterrupted = 130
)

// Run compiles the recipe and everything it loads, then runs it on its
// own thread until it finishes, fails, or ctx ends (an interrupt: the
// thread is cancelled and the embedded daemon's processes stopped). It
// returns nil when the recipe finished, else an *ExitError.
func Run(ctx context.Context, opt Options) error {
	out := newOutput(opt.Stdout, opt.Stderr, opt.JSON)
	out.start(opt.Recipe, opt.Args)
	err := execute(ctx, opt, out)
	status, code, report, summary := outcome(ctx, err)
	if report != "" {
		out.Error(report)
	}
	out.end(status, code, summary)
	if code == 0 {
		return nil
	}
	return &ExitError{Code: code, Err: err}
}

// Check compiles a recipe and every file it loads without running
// anything: the errors `sous run` would stop at before starting. The error
// is a *CompileError.
func Check(path string, table *builtins.Table) error {
	_, err := compile(path, table.IsPredeclared)
	return err
}

func execute(ctx context.Context, opt Options, out *output) (err error) {
	b, err := compile(opt.Recipe, opt.Table.IsPredeclared)
	if err != nil {
		return err
	}
	getenv := opt.Getenv
	if getenv == nil {
		getenv = os.LookupEnv
	}
	hosts := newHosts(opt.Host)
	defer func() {
		if cerr := hosts.Close(); cerr != nil {
			out.Error(fmt.Sprintf("sous: closing daemon connections: %v", cerr))
		}
	}()
	env := &builtins.Env{
		Ctx:    ctx,
		Table:  opt.Table,
		Loop:   NewLoop(),
		Output: out,
		Hosts:  hosts,
		Args:   opt.Args,
		Getenv: getenv,
	}
	predeclared := opt.Table.Predeclared(env)
	ld := &loader{b: b, predeclared: predeclared, done: make(map[*unit]starlark.StringDict)}
	thread := &starlark.Thread{
		Name:  "sous run " + opt.Recipe,
		Print: func(_ *starlark.Thread, msg string) { out.Log(msg) },
		Load:  ld.load,
	}
	stop := context.AfterFunc(ctx, func() { thread.Cancel("interrupted") })
	defer stop()
	_, err = b.root.prog.Init(thread, predeclared)
	return err
}

// outcome classifies how the run ended: the end event's status, the exit
// code, the report for stderr and the error summary for the end event.
func outcome(ctx context.Context, err error) (status string, code int, report, summary string) {
	var ce *CompileError
	switch {
	case err == nil:
		return "ok", 0, "", "" // even if a signal came as the last line finished
	case ctx.Err() != nil:
		code = CodeInterrupted
		var in *Interrupt
		if errors.As(context.Cause(ctx), &in) {
			code = in.Code
		}
		return "interrupted", code, "sous: interrupted", "interrupted"
	case errors.As(err, &ce):
		return "error", CodeUsage, err.Error(), err.Error()
	}
	if ee := innermostEvalError(err); ee != nil {
		return "failed", CodeFailed, ee.Backtrace(), ee.Msg
	}
	return "failed", CodeFailed, "sous: " + err.Error(), err.Error()
}

// innermostEvalError finds the deepest Starlark error in err's chain. An
// error inside a loaded file surfaces wrapped in the load statement's
// ("cannot load lib.star: ..."); the innermost one carries the whole call
// stack, from the recipe's load statement down to the failing line.
func innermostEvalError(err error) *starlark.EvalError {
	var found *starlark.EvalError
	for {
		var ee *starlark.EvalError
		if !errors.As(err, &ee) {
			return found
		}
		found = ee
		err = ee.Unwrap()
	}
}
