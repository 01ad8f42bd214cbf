package runtime

import (
	"context"
	"errors"
	"fmt"
	"os"

	"go.starlark.net/starlark"
)

// recipeRun is one run of a compiled recipe, in three parts: execute runs
// the recipe, cleanup its deferred calls, close ends its agent sessions
// and daemon connections. Everything here happens on the goroutine that
// called Run, the recipe thread.
type recipeRun struct {
	opt         Options
	out         *output
	b           *bundle
	hosts       Connector
	env         *Env
	appr        *approver
	predeclared starlark.StringDict
	load        func(*starlark.Thread, string) (starlark.StringDict, error)

	// stopBuiltins ends the context the builtins see while the recipe runs.
	stopBuiltins context.CancelFunc
	// callCancels end the contexts of the deferred calls made so far: they
	// stay open until close, as the recipe's does, for what a call started.
	callCancels []context.CancelFunc

	// What an abort (a policy failed while an agent waited for its answer)
	// stops: the thread running now, the recipe's or a deferred call's, and
	// its builtins' context; abortErr is the first abort's error.
	thread   *starlark.Thread
	cancel   context.CancelFunc
	abortErr error
}

// prepare compiles the recipe and sets up what it runs with. No daemon is
// started yet: the default host connects on first use.
func prepare(opt Options, out *output, budget *Budget, jnl *Journal) (*recipeRun, error) {
	b, err := compile(opt.Recipe, opt.Table.IsPredeclared)
	if err != nil {
		return nil, err
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
	r := &recipeRun{opt: opt, out: out, b: b, hosts: opt.Connector}
	if r.hosts == nil {
		r.hosts = newHosts(host, opt.HostConn)
	}
	r.appr = &approver{rules: opt.Approvals, ask: opt.Ask, ui: opt.UI, timeout: opt.AskTimeout,
		run: opt.RunID, recipe: opt.Recipe, hosts: r.hosts, bus: out.bus}
	if opt.Prompt != nil {
		r.appr.prompt = newPrompter(out, opt.Prompt)
	}
	r.env = &Env{
		Table:    opt.Table,
		Loop:     NewLoop(),
		Workers:  NewWorkers(),
		Output:   out,
		Hosts:    r.hosts,
		Args:     opt.Args,
		Getenv:   getenv,
		Dir:      opt.Dir,
		Approver: r.appr,
		AgentEnv: opt.AgentEnv,
		Abort:    r.abort,
		Shard:    opt.Shard.orWhole(),
		Budget:   budget,
		Journal:  jnl,
	}
	budget.OnExceeded(func() {
		r.env.Loop.Post(func() {
			// Only while the recipe runs: after it, the run fails at its
			// end anyway, and a deferred call (a cleanup) should not be
			// stopped by what the recipe spent.
			if !r.env.RecipeEnded() {
				r.abort(budget.Err())
			}
		})
	})
	r.predeclared = opt.Table.StartUsing(r.env, b.predeclared)
	r.load = (&loader{b: b, predeclared: r.predeclared, done: make(map[*unit]starlark.StringDict)}).load
	return r, nil
}

// abort is the Env's Abort: it stops whatever runs now, the recipe or a
// deferred call, with err.
func (r *recipeRun) abort(err error) {
	if r.abortErr != nil {
		return
	}
	r.abortErr = err
	r.cancel()
	r.thread.Cancel("a policy failed")
}

func (r *recipeRun) newThread(name string) *starlark.Thread {
	return &starlark.Thread{
		Name: name,
		Print: func(_ *starlark.Thread, msg string) {
			r.out.Settle() // print is a builtin call too: after what was spawned before it
			if r.env.Journal != nil {
				r.env.Journal.Print(msg, r.out.Log)
				return
			}
			r.out.Log(msg)
		},
		Load: r.load,
	}
}

// execute runs the recipe until it finishes, fails, or ctx ends.
func (r *recipeRun) execute(ctx context.Context) error {
	// The builtins see a context of their own: it also ends when the recipe
	// is aborted (a policy failed while an agent waited for its answer), so
	// that whatever the recipe thread waits for returns at once. The run's
	// ctx still says whether the run was interrupted.
	bctx, cancel := context.WithCancel(ctx)
	r.stopBuiltins = cancel
	thread := r.newThread("sous run " + r.opt.Recipe)
	r.enter(bctx, cancel, thread)
	stop := context.AfterFunc(ctx, func() { thread.Cancel("interrupted") })
	defer stop()
	_, err := r.b.root.prog.Init(thread, r.predeclared)
	if r.abortErr != nil {
		// Whatever the recipe was doing stopped because of the abort; the
		// abort's error (a policy's traceback) is why the recipe failed.
		return r.abortedAt(err)
	}
	return err
}

// abortedAt is why an aborted recipe failed, given what its thread
// returned. A policy's error carries its own traceback. A spent budget
// has none: it keeps the place where the recipe was stopped (the call
// stack of the builtin it waited in) with the budget's message, so that
// the failure names the recipe's line and says the same whichever way
// it was stopped (the turn that spent the rest fails with the budget's
// error too, prefixed by its builtin's name).
func (r *recipeRun) abortedAt(threadErr error) error {
	var be *BudgetError
	ee := innermostEvalError(threadErr)
	if !errors.As(r.abortErr, &be) || ee == nil {
		return r.abortErr
	}
	msg := be.Error()
	if last := len(ee.CallStack) - 1; last >= 0 && ee.CallStack[last].Pos.Filename() == "<builtin>" {
		msg = ee.CallStack[last].Name + ": " + msg // as the builtin's own errors say it
	}
	return &starlark.EvalError{Msg: msg, CallStack: ee.CallStack}
}

// enter makes thread the one running, with ctx (which cancel ends) the
// context of its builtins and of the approval prompt.
func (r *recipeRun) enter(ctx context.Context, cancel context.CancelFunc, thread *starlark.Thread) {
	r.env.Ctx, r.appr.ctx = ctx, ctx
	r.thread, r.cancel, r.abortErr = thread, cancel, nil
}

// close ends what the plugins hold for the run (agent sessions), then the
// requests still waiting for a person, then its daemon connections: the
// sessions end while their daemons are still there to reap them.
func (r *recipeRun) close() {
	if err := r.env.closeStates(); err != nil {
		r.out.Error(fmt.Sprintf("sous: %v", err))
	}
	// The sessions are gone: what still waits for a person is denied and
	// withdrawn from the daemon's queue while the connection is up.
	r.appr.close()
	if r.stopBuiltins != nil {
		r.stopBuiltins()
	}
	for _, cancel := range r.callCancels {
		cancel()
	}
	if err := r.hosts.Close(); err != nil {
		r.out.Error(fmt.Sprintf("sous: closing daemon connections: %v", err))
	}
	// Last: every builtin call, a deferred one's too, is over.
	r.env.Workers.Close()
}
