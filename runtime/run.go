package runtime

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"sync/atomic"
	"syscall"
	"time"

	"go.starlark.net/starlark"

	"github.com/seed5ad92d46/sous/daemon/client"
	"github.com/seed5ad92d46/sous/daemon/envlist"
	"github.com/seed5ad92d46/sous/daemon/wire"
	"github.com/seed5ad92d46/sous/runtime/event"
	"github.com/seed5ad92d46/sous/runtime/notify"
	"github.com/seed5ad92d46/sous/runtime/rules"
)

// Options configure one run of a recipe.
type Options struct {
	Recipe         string            // path of the .star file
	Args           map[string]string // the recipe's args (-a key=value)
	Stdout, Stderr io.Writer
	JSON           bool // stdout carries JSON events only
	// View is how the human output looks (ignored with JSON but for
	// GitHub).
	View View
	// Host is the default host: URL "embedded" (or "") for the daemon
	// inside sous, which Host.Embedded.New builds (the program composes
	// it: the runtime never builds a daemon), else a socket daemon.
	// host("embedded") in a recipe reaches the same embedded daemon.
	Host client.Target
	// HostConn, when set, is a connection to Host the caller opened
	// already and closes after Run returns: the run uses it as the
	// default host's. A durable run on a standalone daemon keeps its
	// journal over the same connection, so that a record goes in the
	// same stream as the request of the effect it precedes.
	HostConn *client.Conn
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
	Dir string
	// Table is the builtins the recipe runs with: the plugins' entries
	// (cmd/sous gives builtins.DefaultTable()).
	Table *Table
	// Connector, when set, is the run's daemon connections instead of the
	// runtime's own (which connect to Host and to what host() names): how
	// a test runs recipes against an in-memory daemon. The run closes it.
	Connector Connector
	// Approvals are the command line's --allow and --deny rules, asked after
	// the recipe's policies.
	Approvals rules.Set
	// Prompt, when set, is the terminal to read answers from when no rule
	// decided a permission request (the question goes to Stderr).
	Prompt io.Reader
	// Ask says a person answers the requests no rule decided from
	// elsewhere (sous run --ask): `sous approvals` against the run's
	// default daemon. UI says a web page of the run can answer them (sous
	// run --ui). With neither and no Prompt, such requests are denied at
	// once by "default": a CI job never hangs.
	Ask, UI bool
	// AskTimeout bounds the wait for a person (--ask-timeout); then
	// "default" denies. 0: no bound.
	AskTimeout time.Duration
	// Steer, when set, is called once the run's event bus exists, before
	// its first event, so that a sink (the web page) can Subscribe to it.
	// answer answers a request that waits for a person, by id, through the
	// run's queue (the first answer wins): By defaults to "remote"; a
	// request decided already or unknown gives the queue's *wire.Error
	// with code wire.CodeApprovalDecided or wire.CodeApprovalUnknown.
	// The answer's decision is published on bus: a sink calls answer from
	// a goroutine of its own, never from its Handle (which holds the bus).
	// An error from Steer stops the run before the recipe starts.
	Steer func(bus *event.Bus, answer func(ctx context.Context, a wire.AskAnswer) error) error
	// Cleanup is the context the recipe's deferred calls run under, after
	// the recipe ended: it ends when they are to be abandoned (a second
	// Ctrl-C). Nil: they run to the end.
	Cleanup context.Context
	// Shard is the run's part of a CI matrix (sous run --shard I/N); the
	// zero value is the whole run (index 0 of 1).
	Shard Shard
	// AgentEnv, when set, is environment every agent session of the run
	// gets, whatever its own env= says (sous run --fake-model: the
	// scripted model's URL).
	AgentEnv *AgentEnv
	// MaxCost caps what the run's agent sessions may cost, in dollars
	// (sous run --max-cost; 0: no cap). Once spent, the running turns
	// are interrupted, new ones refused and the run fails (budget.go).
	MaxCost float64
	// Notify, with URLs, POSTs a JSON notification to each when a request
	// waits for a person and when the run ends (sous run --notify;
	// runtime/notify), without ever holding the run up.
	Notify notify.Options
	// RunID names the run in its notifications and in the requests it
	// publishes for a person to answer ("": 16 random hex digits).
	RunID string
	// AnnounceRun says "sous: run RUN_ID" on stderr as the run starts, as a
	// journaled run always does (sous run: a run on a standalone daemon).
	AnnounceRun bool
	// Journal, when set, makes the run durable (durable.go): its builtin
	// calls are journaled in Journal.Dir, or it resumes Journal.Resumed.
	Journal *JournalOptions
}

// AgentEnv is environment for every agent session of a run. Its values
// name this machine (a loopback URL), so a session on a host elsewhere (ssh,
// ws) fails to start rather than run without them.
type AgentEnv struct {
	Vars map[string]string
	// Source is what set Vars, for errors: "--fake-model".
	Source string
}

// ExitError says how a run that did not finish ended. What went wrong has
// been written to Stderr (and the end event) already. Its message has the
// run's secrets replaced, as everything the run wrote has: a program that
// embeds Run and prints the error must not print a token the recipe read
// with getenv(secret=True). Unwrap gives the error itself, for errors.Is.
type ExitError struct {
	Code int // 1 failed, 2 usage error, 130 interrupted
	Err  error
	msg  string // Err's message, redacted; "" before redaction
}

func (e *ExitError) Error() string {
	if e.msg != "" {
		return e.msg
	}
	return e.Err.Error()
}

func (e *ExitError) Unwrap() error { return e.Err }

// exitError is the ExitError of a run that ended with code, its message
// redacted by the run's bus.
func (o *output) exitError(code int, err error) *ExitError {
	return &ExitError{Code: code, Err: err, msg: o.bus.RedactText(err.Error())}
}

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
// thread is cancelled). Then the calls the recipe deferred run, and last
// the run's daemon connections close: the embedded daemon's processes are
// stopped. It returns nil when the recipe and its deferred calls finished,
// else an *ExitError.
func Run(ctx context.Context, opt Options) error {
	if opt.RunID == "" {
		opt.RunID = newRunID()
	}
	out := newOutput(opt, nil)
	budget := NewBudget(opt.MaxCost)
	out.bus.Subscribe(&budgetSink{budget: budget, state: out.bus.State()})
	finishNotify := startNotify(opt, out)
	var appr atomic.Pointer[approver]
	if opt.Steer != nil {
		answer := func(ctx context.Context, a wire.AskAnswer) error {
			if ap := appr.Load(); ap != nil {
				return ap.answer(ctx, a)
			}
			return wire.Errorf(wire.CodeApprovalUnknown, "no pending request %q (the run has not started)", a.ID)
		}
		if err := opt.Steer(out.bus, answer); err != nil {
			out.start(opt)
			out.Error("sous: " + err.Error())
			out.end(&event.End{Status: "failed", ExitCode: CodeFailed, Error: err.Error()})
			finishNotify()
			return out.exitError(CodeFailed, err)
		}
	}
	out.start(opt)
	var jnl *Journal
	if opt.Journal != nil {
		var err error
		if jnl, err = startJournal(opt, out.Error); err != nil {
			out.Error("sous: " + err.Error())
			out.end(&event.End{Status: "failed", ExitCode: CodeFailed, Error: err.Error()})
			finishNotify()
			return out.exitError(CodeFailed, err)
		}
	}
	if opt.Journal != nil && opt.Journal.Resumed != nil {
		out.Error(fmt.Sprintf("sous: resuming run %s (%d calls journaled)", opt.RunID, opt.Journal.Resumed.Calls()))
	} else if opt.Journal != nil || opt.AnnounceRun {
		// The id `sous runs` and `sous resume` know the run by when it is
		// journaled, the one its requests for a person and its
		// notifications carry either way.
		out.Error("sous: run " + opt.RunID)
	}
	r, err := prepare(opt, out, budget, jnl)
	if r != nil {
		appr.Store(r.appr)
	}
	if err == nil {
		err = r.execute(ctx)
		// The recipe's end settles what it spawned last, before its
		// report and its deferred calls' output.
		out.Settle()
		if cerr := jnl.changedErr(); cerr != nil {
			err = cerr
		}
	}
	if err == nil {
		// The turn that spent the rest may have ended as the recipe did,
		// before its abort could stop it: the run still failed.
		err = budget.Err()
	}
	status, code, report, summary := outcome(ctx, err)
	if report != "" {
		out.Error(report)
	}
	if r != nil {
		cleanup := opt.Cleanup
		if cleanup == nil {
			cleanup = context.WithoutCancel(ctx)
		}
		cerr := r.cleanup(cleanup)
		if cerr == nil && code == 0 {
			cerr = budget.Err() // spent by a deferred call
		}
		if cerr != nil && code == 0 {
			// The recipe finished; its cleanup did not.
			err = cerr
			status, code, summary = "failed", CodeFailed, cerr.Error()
			if errors.Is(cerr, errAbandoned) {
				status, code = "interrupted", interruptCode(ctx)
			}
		}
		r.close()
	}
	if jnl != nil {
		if r == nil && opt.Journal.Resumed != nil {
			// The recipe no longer compiles: the journal stays as it was,
			// to resume once it does.
			jnl.changed = err
		}
		if jerr := jnl.end(status, code); jerr != nil && code == 0 {
			// (A run that failed said why already: a daemon lost is
			// the journal's loss too.)
			out.Error("sous: " + jerr.Error())
		}
	}
	end := &event.End{Status: status, ExitCode: code, Error: summary}
	if code != 0 {
		end.File, end.Line, end.Col, end.Source = failurePlace(err)
	}
	out.end(end)
	finishNotify()
	if code == 0 {
		return nil
	}
	return out.exitError(code, err)
}

// Refuse reports a usage error the caller found before the recipe could
// run (a bad -a or rule flag) as Run reports one it finds itself: on stderr
// and, with JSON, between a start and an end event, so that the event
// stream always has both. It returns the *ExitError (code 2).
func Refuse(opt Options, err error) error {
	out := newOutput(opt, nil)
	out.start(opt)
	out.Error("sous: " + err.Error())
	out.end(&event.End{Status: "error", ExitCode: CodeUsage, Error: err.Error()})
	return out.exitError(CodeUsage, err)
}

// Check compiles a recipe and every file it loads without running
// anything: the errors `sous run` would stop at before starting, and the
// keyword arguments of builtin calls that the builtin does not take, which
// a run finds only when the call runs (keywords.go). The error is a
// *CompileError.
func Check(path string, table *Table) error {
	b, err := compile(path, table.IsPredeclared)
	errs := &CompileError{}
	if err != nil && !errors.As(err, &errs) {
		return err
	}
	if b != nil {
		for _, u := range b.order {
			if u.file != nil {
				errs.Errs = append(errs.Errs, checkKeywords(u.file, table)...)
			}
		}
	}
	if len(errs.Errs) > 0 {
		return errs
	}
	return nil
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
	var changed *ResumeStopped
	switch {
	case err == nil:
		return "ok", 0, "", "" // even if a signal came as the last line finished
	case ctx.Err() != nil:
		report := "sous: interrupted"
		var in *Interrupt
		if errors.As(context.Cause(ctx), &in) && in.Signal == syscall.SIGPIPE {
			report = "sous: stopped: the reader of its output went away"
		}
		return "interrupted", interruptCode(ctx), report, "interrupted"
	case errors.As(err, &ce):
		return "error", CodeUsage, err.Error(), err.Error()
	case errors.As(err, &changed):
		return "error", CodeUsage, "sous: " + changed.Msg, changed.Msg
	}
	if ee := innermostEvalError(err); ee != nil {
		return "failed", CodeFailed, backtrace(ee), ee.Msg
	}
	return "failed", CodeFailed, "sous: " + err.Error(), err.Error()
}

// interruptCode is the exit code of a run stopped by ctx's interrupt:
// 128+signal, as its cause says.
func interruptCode(ctx context.Context) int {
	var in *Interrupt
	if errors.As(context.Cause(ctx), &in) {
		return in.Code
	}
	return CodeInterrupted
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
