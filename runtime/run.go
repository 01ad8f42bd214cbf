package runtime

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"syscall"

	"go.starlark.net/starlark"

	"github.com/seed5ad92d46/sous/builtins"
	"github.com/seed5ad92d46/sous/daemon/client"
	"github.com/seed5ad92d46/sous/internal/envlist"
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
	// Env is the runner's environment (default os.Environ()): what getenv
	// reads and what the embedded daemon's processes inherit, so that an
	// agent's CLI finds ANTHROPIC_BASE_URL and the rest where the runner
	// set them.
	Env []string
	// Getenv reads the runner's environment (default: a lookup in Env).
	Getenv func(string) (string, bool)
	// Dir is the recipe's working directory (default: the process's):
	// relative paths of files.* and extract_tar on a local host are taken
	// from it, and it is the embedded daemon's directory unless
	// Host.Embedded.Dir says otherwise.
	Dir   string
	Table *builtins.Table
	// Lines bounds what a Process.lines() iteration holds (zero: the
	// documented bounds).
	Lines builtins.LinesLimits
	// Approvals are the command line's --allow and --deny rules, asked after
	// the recipe's policies.
	Approvals builtins.RuleSet
	// Prompt, when set, is the terminal to read answers from when no rule
	// decided a permission request (the question goes to Stderr). Nil: such
	// requests are denied.
	Prompt io.Reader
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

// Refuse reports a usage error the caller found before the recipe could
// run (a bad -a or rule flag) as Run reports one it finds itself: on stderr
// and, with JSON, between a start and an end event, so that the event
// stream always has both. It returns the *ExitError (code 2).
func Refuse(opt Options, err error) error {
	out := newOutput(opt.Stdout, opt.Stderr, opt.JSON)
	out.start(opt.Recipe, opt.Args)
	out.Error("sous: " + err.Error())
	out.end("error", CodeUsage, err.Error())
	return &ExitError{Code: CodeUsage, Err: err}
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
	environ := opt.Env
	if environ == nil {
		environ = os.Environ()
	}
	getenv := opt.Getenv
	if getenv == nil {
		getenv = lookupIn(environ)
	}
	host := opt.Host
	if host.Embedded.Env == nil {
		host.Embedded.Env = environ
	}
	if host.Embedded.Dir == "" {
		host.Embedded.Dir = opt.Dir
	}
	hosts := newHosts(host)
	defer func() {
		if cerr := hosts.Close(); cerr != nil {
			out.Error(fmt.Sprintf("sous: closing daemon connections: %v", cerr))
		}
	}()

	// The builtins see a context of their own: it also ends when the recipe
	// is aborted (a policy failed while an agent waited for its answer), so
	// that whatever the recipe thread waits for returns at once. The run's
	// ctx still says whether the run was interrupted.
	bctx, cancel := context.WithCancel(ctx)
	defer cancel()
	var thread *starlark.Thread
	var abortErr error // the first abort's error; recipe thread only
	appr := &approver{ctx: bctx, rules: opt.Approvals}
	if opt.Prompt != nil {
		appr.prompt = newPrompter(out, opt.Prompt)
	}
	env := &builtins.Env{
		Ctx:      bctx,
		Table:    opt.Table,
		Loop:     NewLoop(),
		Output:   out,
		Hosts:    hosts,
		Args:     opt.Args,
		Getenv:   getenv,
		Dir:      opt.Dir,
		Approver: appr,
		Lines:    opt.Lines,
		Abort: func(err error) {
			if abortErr != nil {
				return
			}
			abortErr = err
			cancel()
			thread.Cancel("a policy failed")
		},
	}
	// Registered after the hosts' Close, so it runs before it: the agent
	// sessions end while their daemons are still there to reap them.
	defer func() {
		if cerr := env.Close(); cerr != nil {
			out.Error(fmt.Sprintf("sous: closing agent sessions: %v", cerr))
		}
	}()
	predeclared := opt.Table.Predeclared(env)
	ld := &loader{b: b, predeclared: predeclared, done: make(map[*unit]starlark.StringDict)}
	thread = &starlark.Thread{
		Name:  "sous run " + opt.Recipe,
		Print: func(_ *starlark.Thread, msg string) { out.Log(msg) },
		Load:  ld.load,
	}
	stop := context.AfterFunc(ctx, func() { thread.Cancel("interrupted") })
	defer stop()
	_, err = b.root.prog.Init(thread, predeclared)
	if abortErr != nil {
		// Whatever the recipe was doing stopped because of the abort; the
		// abort's error (a policy's traceback) is why the recipe failed.
		return abortErr
	}
	return err
}

// lookupIn looks a variable up in an environment list; the last
// definition wins, as with os.Getenv.
func lookupIn(environ []string) func(string) (string, bool) {
	return func(name string) (string, bool) { return envlist.Lookup(environ, name) }
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
		report := "sous: interrupted"
		var in *Interrupt
		if errors.As(context.Cause(ctx), &in) {
			code = in.Code
			if in.Signal == syscall.SIGPIPE {
				report = "sous: stopped: the reader of its output went away"
			}
		}
		return "interrupted", code, report, "interrupted"
	case errors.As(err, &ce):
		return "error", CodeUsage, err.Error(), err.Error()
	}
	if ee := innermostEvalError(err); ee != nil {
		return "failed", CodeFailed, backtrace(ee), ee.Msg
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
