package proc

import (
	"errors"
	"fmt"
	"os"
	"os/exec"
	"strings"
	"syscall"
	"time"

	"github.com/seed5ad92d46/sous/daemon/streamlog"
	"github.com/seed5ad92d46/sous/daemon/wire"
)

// This file holds what the spawn extensions add to a process: pipelines
// (pipeline.go), pseudo-terminals (tty.go) and timeouts. The plain spawn of
// proc.go hands its children to the same launch, so every kind of process
// is reaped, read, signalled and replayed the same way.

// output is one read end the daemon turns into frames.
type output struct {
	f      *os.File
	stream wire.Stream
	stage  int      // 1 + the pipeline stage of a stderr pipe (Frame.Stage); 0 otherwise
	mirror *os.File // Spec.Mirror's pipe for this stream, or nil
	// held is the child's end of the pipe, kept by the daemon until the
	// child is reaped when the child poller watches it (childpoll.go);
	// nil otherwise.
	held *os.File
	// quiet says f is a quiet pipe's end (quietPipe), not yet in the
	// runtime's poller: Process.readable puts it there for a reader.
	quiet bool
}

// extState is what the extensions record about a process; set by launch,
// read-only afterwards.
type extState struct {
	pipeline   bool
	stages     [][]string // a pipeline's stages, as spawned
	tty        *os.File   // the terminal's master side (also the stdout output), for resize
	exitSignal bool       // Spec.ExitSignal
}

func (e *extState) init(spec Spec, outputs []output) {
	e.exitSignal = spec.ExitSignal
	if spec.Pipeline != nil {
		e.pipeline = true
		e.stages = make([][]string, len(spec.Pipeline))
		for i, st := range spec.Pipeline {
			e.stages[i] = append([]string(nil), st...)
		}
	}
	if spec.TTY != nil {
		e.tty = outputs[0].f
	}
}

// logAttrs are the extensions' attributes of the spawn log line (none for
// a plain process).
func (e *extState) logAttrs(spec Spec) []any {
	var attrs []any
	if e.pipeline {
		attrs = append(attrs, "stages", len(e.stages))
	}
	if spec.TTY != nil {
		attrs = append(attrs, "tty", fmt.Sprintf("%dx%d", spec.TTY.Rows, spec.TTY.Cols))
	}
	if spec.Timeout > 0 {
		attrs = append(attrs, "timeout", spec.Timeout.String())
	}
	return attrs
}

// spawnExt starts a pipeline or a process with a terminal.
func (r *Registry) spawnExt(spec Spec, env []string, dir string, follow bool) (*Process, *streamlog.Cursor, error) {
	if spec.Pipeline != nil && spec.TTY != nil {
		return nil, nil, errors.New("spawn: a pipeline cannot have a terminal")
	}
	if spec.Pipeline != nil {
		cmds, outputs, stdinW, err := r.startPipeline(spec.Pipeline, spec.Mirror, env, dir, spec.Sandbox)
		if err != nil {
			return nil, nil, err
		}
		spec.Command, spec.Args = spec.Pipeline[0][0], spec.Pipeline[0][1:]
		return r.launch(spec, cmds, outputs, writeEnd(stdinW), follow)
	}
	cmd, master, stdinW, err := r.startTTY(spec, env, dir)
	if err != nil {
		return nil, nil, err
	}
	return r.launch(spec, []*exec.Cmd{cmd}, []output{{f: master, stream: wire.Stdout}}, stdinW, follow)
}

// exitFrame is the process's last frame: its exit code, and for the
// extensions the stages' codes, whether the timeout ended it and the signal
// that did.
func (p *Process) exitFrame() wire.Frame {
	p.mu.Lock()
	defer p.mu.Unlock()
	f := wire.Frame{Stream: wire.Exit, ExitCode: p.exitCode, StageCodes: p.stageCodes, TimedOut: p.timedOut}
	if p.ext.exitSignal { // a default exit frame stays as claustrum has it (docs/PROTOCOL.md §4.1)
		f.Signal = p.signal
	}
	return f
}

// shellStatus is a stage's status as a shell reports it: the exit code, or
// 128+n for a stage that signal n ended (so a producer ended by SIGPIPE is
// 141, like $? in sh), -1 when it is unknown.
func shellStatus(err error) int {
	if err == nil {
		return 0
	}
	var ee *exec.ExitError
	if !errors.As(err, &ee) {
		return -1
	}
	if ws, ok := ee.Sys().(syscall.WaitStatus); ok && ws.Signaled() {
		return 128 + int(ws.Signal())
	}
	return ee.ExitCode()
}

// enforceTimeout kills p's group once d passes: SIGTERM (and SIGCONT, so a
// paused group can act on it), then SIGKILL after the grace. The exit frame
// then says timedOut.
func (r *Registry) enforceTimeout(p *Process, d time.Duration) {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-p.reapedCh:
		return
	case <-p.ctx.Done(): // discarded or released
		return
	case <-t.C:
	}
	p.mu.Lock()
	if p.reaped {
		p.mu.Unlock()
		return
	}
	p.timedOut = true
	syscall.Kill(-p.Pid, syscall.SIGTERM)
	syscall.Kill(-p.Pid, syscall.SIGCONT)
	p.mu.Unlock()
	grace := r.opt.TimeoutGrace
	if grace <= 0 {
		grace = DefaultGrace
	}
	r.opt.Logger.Info("timeout", "id", p.ID, "pid", p.Pid, "after", d.String(), "grace", grace.String())
	deadline := time.Now().Add(grace)
	t.Reset(grace)
	select {
	case <-p.reapedCh:
		// What it left in its group that ignores SIGTERM still gets the
		// SIGKILL: a timeout ends the whole group.
		if p.escalateStrays(deadline) {
			r.opt.Logger.Info("timeout: killed what it left", "id", p.ID, "pid", p.Pid)
		}
	case <-p.ctx.Done():
	case <-t.C:
		if p.Signal(syscall.SIGKILL) {
			r.opt.Logger.Info("timeout: killed", "id", p.ID, "pid", p.Pid)
		}
	}
}

// TimedOut reports whether the daemon killed the process for its timeout.
func (p *Process) TimedOut() bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.timedOut
}

// Stages returns a pipeline's stages, or nil for any other process.
func (p *Process) Stages() [][]string { return p.ext.stages }

// StagePids returns the pid of every stage of a pipeline (of the process
// itself otherwise), in order.
func (p *Process) StagePids() []int {
	pids := make([]int, len(p.cmds))
	for i, c := range p.cmds {
		pids[i] = c.Process.Pid
	}
	return pids
}

// HasTTY reports whether the process was given a terminal.
func (p *Process) HasTTY() bool { return p.ext.tty != nil }

// Errors of Resize.
var (
	ErrNoTerminal     = errors.New("process has no terminal (it was spawned without tty)")
	ErrNotRunning     = errors.New("process not running")
	ErrTerminalClosed = errors.New("the process's terminal is closed")
)

// Resize sets the size of the process's terminal; the kernel sends SIGWINCH
// to the terminal's foreground process group.
func (p *Process) Resize(size wire.TermSize) error {
	if p.ext.tty == nil {
		return ErrNoTerminal
	}
	if !p.Running() {
		return ErrNotRunning
	}
	if err := setWinsize(p.ext.tty, size); err != nil {
		// The daemon closes its side once the terminal hung up (every
		// descriptor of it in the child's tree closed), which is usually
		// the child exiting.
		if !p.Running() {
			return ErrNotRunning
		}
		if errors.Is(err, os.ErrClosed) || strings.Contains(err.Error(), "closed file") {
			return ErrTerminalClosed
		}
		return fmt.Errorf("resize: %w", err)
	}
	return nil
}
