package builtins

import (
	"context"
	"errors"
	"time"

	"go.starlark.net/starlark"

	"github.com/seed5ad92d46/sous/daemon/wire"
	"github.com/seed5ad92d46/sous/runtime"
)

// runKeywordsSig is the keyword part of the signatures of run, sh and
// pipeline.
const runKeywordsSig = "cwd=None, env=None, stdin=None, timeout=None, check=True, echo=True, output_cap=16777216, privileged=False, reason=None, sandbox=None"

const runDoc = "Starts the command on the host, writes stdin (a string) and closes the child's stdin (at once when stdin is None), " +
	"and waits. timeout (seconds) kills the whole process group (TERM, then KILL after 3 s) and gives status \"timeout\"; " +
	"the daemon enforces it where it has the process.spawn.timeout extension, else sous does while it runs. " +
	"The Result keeps exactly the first output_cap bytes of stdout and of stderr (the live echo is never cut). " +
	"With check=True any status but \"ok\" fails the recipe with the command, the status and the last lines of stderr. " +
	"A command the host cannot start (no such program, no such cwd) gives status \"failed\", exit code 127 and the reason as stderr, " +
	"so check=False can probe for a tool; a sandbox the host cannot set up fails the recipe even with check=False. " +
	"privileged=True first asks the approvers (a Request of kind \"privileged\", tool \"Sudo\", input {\"command\": [...], \"reason\": reason}): " +
	"approved, the command runs under sudo -n (directly where the host's user is root), or the command of the approver's " +
	"approve(input={\"command\": [...]}) instead; denied, it never starts and the status is \"denied\". " + sandboxDoc

func runEntries() []runtime.Entry {
	return []runtime.Entry{
		{Name: "run", Journal: runtime.JournalEffect, Rejoin: true, Host: true, Sig: "run(cmd, args=[], *, " + runKeywordsSig + ") -> Result",
			Doc: "Runs a command to completion: cmd is a program or a list of program and arguments. " + runDoc,
			Fn:  runBuiltin},
		{Name: "sh", Journal: runtime.JournalEffect, Rejoin: true, Host: true, Sig: "sh(script, *, " + runKeywordsSig + ") -> Result",
			Doc: "Runs script with sh -c. " + runDoc,
			Fn:  shBuiltin},
	}
}

// runOptions are the keywords shared by run, sh and pipeline.
type runOptions struct {
	cwd        string
	env        map[string]*string
	stdin      []byte
	timeout    *time.Duration
	check      bool
	echo       bool
	outputCap  int64
	privileged bool
	reason     string
	sandbox    *wire.Sandbox // sandbox.go
}

func defaultRunOptions() runOptions {
	return runOptions{check: true, echo: true, outputCap: DefaultOutputCap}
}

func (o *runOptions) bindings() []binding {
	return []binding{
		opt("cwd", optStr(&o.cwd)), opt("env", envDict(&o.env)), opt("stdin", optData(&o.stdin)),
		opt("timeout", optSeconds(&o.timeout)), opt("check", boolean(&o.check)), opt("echo", boolean(&o.echo)),
		opt("output_cap", integer(&o.outputCap, 0)), opt("privileged", boolean(&o.privileged)),
		opt("reason", optStr(&o.reason)), opt("sandbox", sandboxArg(&o.sandbox)),
	}
}

func runBuiltin(c *runtime.Call) (starlark.Value, error) {
	var cmd, args []string
	var cmdList bool
	o := defaultRunOptions()
	if err := bind(c, 2, append([]binding{req("cmd", command(&cmd, &cmdList)), opt("args", strList(&args))}, o.bindings()...)...); err != nil {
		return nil, err
	}
	argv, err := commandLine(c, cmd, cmdList, args)
	if err != nil {
		return nil, err
	}
	argv, denied, err := o.authorize(c, argv)
	if err != nil || denied != nil {
		if err != nil {
			return nil, err
		}
		return denied, denied.check(c, &o, describe(argv))
	}
	run := argv
	if o.privileged {
		run = asRoot(argv)
	}
	r, err := execute(c, c.Host, run, &o)
	if err != nil {
		return nil, err
	}
	return r, r.check(c, &o, describe(argv))
}

func shBuiltin(c *runtime.Call) (starlark.Value, error) {
	var script string
	o := defaultRunOptions()
	if err := bind(c, 1, append([]binding{req("script", str(&script))}, o.bindings()...)...); err != nil {
		return nil, err
	}
	argv, denied, err := o.authorize(c, []string{"sh", "-c", script})
	if err != nil || denied != nil {
		if err != nil {
			return nil, err
		}
		return denied, denied.check(c, &o, "`"+script+"`")
	}
	cmdline := "`" + script + "`"
	if len(argv) != 3 || argv[2] != script { // an approver replaced it
		cmdline = describe(argv)
	}
	if o.privileged {
		argv = asRoot(argv)
	}
	r, err := execute(c, c.Host, argv, &o)
	if err != nil {
		return nil, err
	}
	return r, r.check(c, &o, cmdline)
}

// check applies check=True.
func (r *Result) check(c *runtime.Call, o *runOptions, cmdline string) error {
	if o.check && r.status != StatusOK {
		return c.Errorf("%s", r.failure(cmdline))
	}
	return nil
}

// execute starts argv, feeds its stdin, waits for it (its group killed on
// timeout) and returns its Result, whatever the status.
func execute(c *runtime.Call, host *runtime.Host, argv []string, o *runOptions) (*Result, error) {
	return executeSpec(c, host, spawnSpec{argv: argv}, o)
}

// executeSpec is execute for a spawnSpec (a command or a pipeline) with o's
// cwd, env, sandbox and timeout. The timeout is the daemon's
// (process.spawn.timeout: TERM, KILL 3 s later), or the client's where the
// daemon has no such extension.
func executeSpec(c *runtime.Call, host *runtime.Host, spec spawnSpec, o *runOptions) (*Result, error) {
	spec.cwd, spec.env, spec.sandbox = o.cwd, o.env, o.sandbox
	if o.timeout != nil {
		spec.ext.timeout = max(*o.timeout, time.Nanosecond) // 0: at once
	}
	// Without stdin, the spawn itself closes it: no hand-off to a worker
	// and back, and over a daemon with process.spawn.stdin.closed no
	// process.stdin request and answer, per command.
	spec.noStdin = len(o.stdin) == 0
	started := time.Now()
	p, err := startProcess(c, host, spec,
		procOptions{echo: o.echo, showPid: true, limit: int(min(o.outputCap, int64(maxCap)))})
	var notStarted *notStartedError
	if errors.As(err, &notStarted) && !o.check {
		return notStartedResult(c, spec, notStarted.msg, time.Since(started)), nil
	}
	if err != nil {
		return nil, err
	}
	stdin := p.fed
	if stdin == nil { // stdin to write, or a process taken over
		stdin = p.feed(c.Env.Ctx, o.stdin)
	}

	if err := wait(c.Env, p.ended, nil); err != nil {
		p.abandon()
		return nil, c.Errorf("%v", err)
	}
	timedOut := p.proc.TimedOut()
	// The child is gone, so the daemon answers what is left of the feed at
	// once; waiting for it keeps every call of this command inside it.
	if err := wait(c.Env, stdin.done, nil); err != nil {
		return nil, c.Errorf("%v", err)
	}
	if stdin.err != nil && !timedOut {
		return nil, c.Errorf("writing the stdin of %s: %s", spec.ext.describe(spec.argv), daemonMessage(stdin.err))
	}
	r, err := p.result()
	if err != nil {
		return nil, c.Errorf("%v", err)
	}
	if timedOut {
		r.status, r.timeout = StatusTimeout, *o.timeout
	}
	return r, nil
}

// notStartedResult is the failed Result of a command the daemon could not
// start: exit code 127 (for every stage of a pipeline) and why as its
// stderr.
func notStartedResult(c *runtime.Call, spec spawnSpec, why string, took time.Duration) *Result {
	r := &Result{env: c.Env, status: StatusFailed, exitCode: 127, stderr: why + "\n", duration: took}
	r.stages = make([]Stage, max(len(spec.ext.pipeline), 1))
	for i := range r.stages {
		r.stages[i].ExitCode = 127
	}
	r.stages[len(r.stages)-1].Stderr = r.stderr // which stage failed is not known
	return r
}

// maxCap bounds output_cap to what fits in an int everywhere.
const maxCap = 1<<31 - 1

// stdinFeed is a command's stdin being written on another goroutine, one
// of the run's workers: the child may read it slowly, or not at all, while
// the recipe thread waits for its exit.
type stdinFeed struct {
	done chan struct{}
	err  error // set before done is closed
}

// closedFeed is the feed of a stdin the spawn closed (spawnSpec.noStdin):
// done, nothing to report.
func closedFeed() *stdinFeed {
	f := &stdinFeed{done: make(chan struct{})}
	close(f.done)
	return f
}

// feed writes data to the process's stdin, then closes it.
func (p *Process) feed(ctx context.Context, data []byte) *stdinFeed {
	f := &stdinFeed{done: make(chan struct{})}
	p.env.Workers.Go(func() {
		defer close(f.done)
		f.err = p.writeStdin(ctx, data)
	})
	return f
}

// writeStdin writes data and closes stdin. A child that exits without
// reading it all is not an error, as with a pipe. Any other failure stops
// the process: it would otherwise wait for input that never comes.
func (p *Process) writeStdin(ctx context.Context, data []byte) error {
	err := func() error {
		if len(data) > 0 && p.rejoined {
			// Taken over after the runner died in the call: what it
			// had written is not applied twice.
			if _, _, err := p.proc.WriteAt(ctx, data, 0); err != nil {
				return err
			}
		} else if len(data) > 0 {
			if _, err := p.proc.Write(ctx, data); err != nil {
				return err
			}
		}
		return p.proc.CloseStdin(ctx)
	}()
	if err == nil || wire.IsNotRunning(err) {
		return nil
	}
	p.proc.Kill(ctx, "TERM")
	return err
}

// abandonGrace bounds the best-effort kill of an interrupted command.
const abandonGrace = time.Second

// abandon stops a command whose run was interrupted. The run's context is
// cancelled by then, so this uses its own short one.
func (p *Process) abandon() {
	ctx, cancel := context.WithTimeout(context.WithoutCancel(p.env.Ctx), abandonGrace)
	defer cancel()
	p.proc.Kill(ctx, "TERM")
}
