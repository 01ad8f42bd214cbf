package proc

import (
	"errors"
	"fmt"
	"os"
	"os/exec"
	"syscall"

	"github.com/seed5ad92d46/sous/daemon/mirror"
	"github.com/seed5ad92d46/sous/daemon/sandbox"
	"github.com/seed5ad92d46/sous/daemon/wire"
)

// startPipeline starts stages as stage0 | stage1 | ... : each stage's
// stdout is the next one's stdin through an OS pipe, the first reads the
// process's stdin, the last writes its stdout, and every stage has a
// stderr pipe of its own (its frames carry the stage). All stages run in
// one process group led by the first, so a signal to the process reaches
// every stage and their descendants. A stdin given (m.Stdin) is the first
// stage's stdin itself, and stdinW is then nil; with m.Direct, m.Stdout is
// the last stage's stdout and m.Stderr every stage's stderr.
//
// Every command is resolved before anything starts; if a stage cannot
// start, the stages already running are killed and reaped.
func (r *Registry) startPipeline(stages [][]string, m mirror.Spec, env []string, dir string, sb *sandbox.Policy) (cmds []*exec.Cmd, outputs []output, stdinW *os.File, err error) {
	if len(stages) == 0 {
		return nil, nil, nil, errors.New("spawn: empty pipeline")
	}
	paths := make([]string, len(stages))
	for i, st := range stages {
		if len(st) == 0 || st[0] == "" {
			return nil, nil, nil, fmt.Errorf("spawn: pipeline stage %d: empty command", i+1)
		}
		if paths[i], err = lookPath(st[0], env, dir); err != nil {
			return nil, nil, nil, fmt.Errorf("pipeline stage %d: %w", i+1, err)
		}
	}

	// open holds every descriptor the daemon still has open, so a failure
	// can close them all.
	open := map[*os.File]bool{}
	pipe := func(use pipeUse) (*os.File, *os.File, error) {
		r, w, err := childPipe(use)
		if err == nil {
			open[r], open[w] = true, true
		}
		return r, w, err
	}
	closeChild := func(fs ...*os.File) { // the child's ends, once it has them
		for _, f := range fs {
			f.Close()
			delete(open, f)
		}
	}
	var started []*exec.Cmd
	defer func() {
		if err == nil {
			return
		}
		for f := range open {
			f.Close()
		}
		if len(started) > 0 {
			syscall.Kill(-started[0].Process.Pid, syscall.SIGKILL)
			for _, c := range started {
				c.Wait()
			}
		}
	}()

	in := m.Stdin
	if in == nil {
		if in, stdinW, err = pipe(daemonWrites); err != nil {
			return nil, nil, nil, fmt.Errorf("spawn pipeline: %w", err)
		}
	}
	directOut, directErr := (*os.File)(nil), (*os.File)(nil)
	if m.Direct {
		directOut, directErr = m.Stdout, m.Stderr
	}
	outW := directOut
	if outW == nil {
		var outR *os.File
		if outR, outW, err = pipe(daemonReads); err != nil {
			return nil, nil, nil, fmt.Errorf("spawn pipeline: %w", err)
		}
		outputs = append(outputs, output{f: outR, stream: wire.Stdout})
	}
	for i, st := range stages {
		errW := directErr
		if errW == nil {
			var errR *os.File
			if errR, errW, err = pipe(daemonReads); err != nil {
				return nil, nil, nil, fmt.Errorf("spawn pipeline: %w", err)
			}
			outputs = append(outputs, output{f: errR, stream: wire.Stderr, stage: i + 1})
		}
		out, next := outW, (*os.File)(nil)
		if i < len(stages)-1 {
			if next, out, err = pipe(betweenStages); err != nil {
				return nil, nil, nil, fmt.Errorf("spawn pipeline: %w", err)
			}
		}
		attr := &syscall.SysProcAttr{Setpgid: true}
		if i > 0 {
			// Join the leader's group. The leader is not reaped before every
			// stage has started, so its group exists even if it has exited.
			attr.Pgid = started[0].Process.Pid
		}
		cmd := &exec.Cmd{
			Path:        paths[i],
			Args:        append([]string(nil), st...),
			Env:         env,
			Dir:         dir,
			Stdin:       in,
			Stdout:      out,
			Stderr:      errW,
			SysProcAttr: attr,
		}
		if err := r.start(cmd, sb); err != nil {
			return nil, nil, nil, fmt.Errorf("pipeline stage %d: spawn %s: %w", i+1, st[0], err)
		}
		started = append(started, cmd)
		// Every stage shares a direct stderr: the passed descriptors are
		// closed once all stages have them.
		for _, f := range []*os.File{in, out, errW} {
			if f != m.Stdin && f != directOut && f != directErr {
				closeChild(f)
			}
		}
		in = next
	}
	closeAll(m.Stdin, directOut, directErr) // the children's now, as in spawn
	return started, outputs, stdinW, nil
}
