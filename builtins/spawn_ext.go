package builtins

import (
	"context"
	"time"

	"go.starlark.net/starlark"

	"github.com/seed5ad92d46/sous/daemon/client"
	"github.com/seed5ad92d46/sous/daemon/wire"
	"github.com/seed5ad92d46/sous/runtime"
)

// ttyDoc documents spawn's tty and size.
const ttyDoc = "tty=True gives the process a pseudo-terminal of size=(rows, cols) (default (24, 80)) as its controlling " +
	"terminal, in a session of its own: what it writes to the terminal (stdout and stderr alike, with the terminal's \"\\r\\n\" " +
	"line ends) arrives as stdout, write() types into the terminal, close_stdin() sends ^D, resize() changes the size. " +
	"TERM is xterm-256color unless the environment sets one. It needs a daemon with the process.spawn.tty extension " +
	"(sous's own has it); with another the spawn fails, naming it."

// spawnExt carries the spawn extensions from a builtin to the client.
type spawnExt struct {
	tty      *wire.TermSize // spawn(tty=True, size=...)
	timeout  time.Duration  // run's timeout: the daemon's, else the client's
	pipeline [][]string     // pipeline() on a daemon that joins the stages itself
}

// terminalArg checks spawn's tty and size: size is (rows, cols), each 1 to
// 65535, and only with tty=True.
func terminalArg(c *runtime.Call, tty bool, size starlark.Value) (*wire.TermSize, error) {
	if size == starlark.None {
		if !tty {
			return nil, nil
		}
		s := wire.DefaultTermSize
		return &s, nil
	}
	seq, ok := size.(starlark.Indexable)
	if _, isStr := size.(starlark.String); !ok || isStr || seq.Len() != 2 {
		return nil, c.Errorf("size: want (rows, cols), got %s", size.Type())
	}
	var dims [2]int
	for i, name := range []string{"rows", "cols"} {
		n, err := starlark.AsInt32(seq.Index(i))
		if err != nil || n < 1 || n > 0xffff {
			return nil, c.Errorf("size: %s: want an int from 1 to 65535, got %s", name, seq.Index(i).String())
		}
		dims[i] = n
	}
	if !tty {
		return nil, c.Errorf("size: only valid with tty=True")
	}
	return &wire.TermSize{Rows: dims[0], Cols: dims[1]}, nil
}

// apply puts the extensions into the client's spawn and prepares p for
// them.
func (e *spawnExt) apply(req *client.SpawnSpec, p *Process) {
	if e.tty != nil {
		req.TTY, req.Size = true, *e.tty
		p.tty = true
	}
	req.Timeout = e.timeout
	if e.pipeline != nil {
		req.Command, req.Args, req.Pipeline = "", nil, e.pipeline
		p.stages = make([]capture, len(e.pipeline))
		for i := range p.stages {
			p.stages[i].limit = p.opt.limit
		}
	}
}

// describe names the command for messages.
func (e *spawnExt) describe(argv []string) string {
	if e.pipeline != nil {
		return describePipeline(e.pipeline)
	}
	return describe(argv)
}

// pipelineArgv is how a pipeline is shown where a command line is (the
// spawn event): the stages' words with "|" between them.
func pipelineArgv(stages [][]string) []string {
	var argv []string
	for i, st := range stages {
		if i > 0 {
			argv = append(argv, "|")
		}
		argv = append(argv, st...)
	}
	return argv
}

// hostHasFeature reports whether the call's host advertises an extension.
func hostHasFeature(c *runtime.Call, feature string) (bool, error) {
	cl, err := hostClient(c, c.Host)
	if err != nil {
		return false, err
	}
	var ok bool
	err = block(c.Env, c.Env.Ctx, func(ctx context.Context) (err error) {
		ok, err = cl.HasFeature(ctx, feature)
		return err
	})
	if err != nil {
		return false, c.Errorf("%s: %s", c.Host.Target(), daemonMessage(err))
	}
	return ok, nil
}

// pipelineResult fills in a pipeline's stages from the daemon's exit frame
// (each stage's status) and the stderr captured per stage. Called with
// p.mu held.
func (p *Process) pipelineResult(r *Result) {
	codes := p.proc.StageExitCodes()
	r.stages = make([]Stage, len(p.stages))
	for i := range p.stages {
		r.stages[i] = Stage{ExitCode: -1, Stderr: string(p.stages[i].buf)}
		if i < len(codes) {
			r.stages[i].ExitCode = codes[i]
		}
	}
	last := &p.stages[len(p.stages)-1]
	r.stderr, r.stderrTruncated = string(last.buf), last.truncated()
	if len(codes) == len(p.stages) {
		// The last stage's, as the contract says: 128+n when signal n
		// ended it, where the exit frame of the group says -1.
		r.exitCode = codes[len(codes)-1]
	}
	r.stageStatus()
}

func processResize(c *runtime.Call, p *Process) (starlark.Value, error) {
	var rows, cols int64
	if err := bind(c, 2, req("rows", integer(&rows, 1)), req("cols", integer(&cols, 1))); err != nil {
		return nil, err
	}
	if rows > 0xffff || cols > 0xffff {
		return nil, c.Errorf("rows and cols: want at most 65535, got (%d, %d)", rows, cols)
	}
	if err := p.ensureLive(c, true); err != nil { // process_durable.go
		return nil, err
	}
	p.mu.Lock()
	tty := p.tty
	p.mu.Unlock()
	if !tty && p.argv != nil { // spawned here without one (a reattached process asks the daemon)
		return nil, c.Errorf("process %s has no terminal: only a process spawned with tty=True can be resized", p.id)
	}
	err := block(c.Env, c.Env.Ctx, func(ctx context.Context) error { return p.proc.Resize(ctx, int(rows), int(cols)) })
	if err != nil {
		return nil, p.daemonErr(c, err)
	}
	return starlark.None, nil
}
