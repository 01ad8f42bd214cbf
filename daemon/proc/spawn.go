package proc

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"time"

	"github.com/seed5ad92d46/sous/daemon/envlist"
	"github.com/seed5ad92d46/sous/daemon/mirror"
	"github.com/seed5ad92d46/sous/daemon/sandbox"
	"github.com/seed5ad92d46/sous/daemon/streamlog"
	"github.com/seed5ad92d46/sous/daemon/wire"
)

// Spec describes a process to spawn.
type Spec struct {
	ID      string
	Command string
	Args    []string
	Cwd     string
	Env     map[string]*string // merged over the inherited environment; nil unsets

	// Program is the path to exec for Command, as Registry.Resolve found
	// it with this Env and Cwd (the daemon's allowed-commands check); ""
	// looks it up. A pipeline or a terminal ignores it.
	Program string

	// Extensions (see ext.go): at most one of Pipeline and TTY.
	Pipeline [][]string     // stages [command, args...] joined by pipes in one group; Command and Args unused
	TTY      *wire.TermSize // a pseudo-terminal of this size as the child's controlling terminal
	Timeout  time.Duration  // kill the group (TERM, KILL after the grace) once this passes; 0: never
	// ExitSignal puts the signal that ended the process (its last stage)
	// on the exit frame (Frame.Signal).
	ExitSignal bool

	// Sandbox confines the child (every stage of a pipeline, a terminal's
	// child too); nil: unsandboxed. See package sandbox.
	Sandbox *sandbox.Policy

	// Mirror is where the spawner wants the child's output written as it
	// is read (see mirror.Spec): pipes it passed with process.spawn.
	Mirror mirror.Spec

	// StdinClosed closes the child's stdin (a pipeline's first stage's) as
	// it starts, as CloseStdin at once would (process.spawn.stdin.closed).
	// Not with TTY, nor with a passed stdin (Mirror.Stdin): the daemon
	// refuses those combinations before it gets here.
	StdinClosed bool

	// Key, when set, makes the spawn idempotent (process.spawn.key): a
	// process the registry still has under ID with the same Key is the one
	// this spawn meant, and nothing starts (see SpawnFollowed).
	Key string
}

// Spawn starts a process. A live process with the same id is torn down first
// (its subscribers dropped, its group killed) and replaced.
func (r *Registry) Spawn(spec Spec) (*Process, error) {
	p, _, err := r.spawn(spec, false)
	return p, err
}

// SpawnFollowed is Spawn that also returns a cursor from seq 1, taken before
// any output is read: however fast the child writes, and however long the
// caller takes to start reading, nothing is dropped before the caller's
// subscription (the log holds the child back instead). The caller must
// close the cursor.
//
// With spec.Key set, a process the registry has under spec.ID (running or
// exited and retained) that was spawned with the same key is returned
// instead, with again set and a cursor from its first retained frame:
// nothing is started, and spec's passed descriptors are the caller's to
// close.
func (r *Registry) SpawnFollowed(spec Spec) (p *Process, cur *streamlog.Cursor, again bool, err error) {
	r.mu.Lock()
	if err := r.awaitSpawnOf(spec); err != nil {
		r.mu.Unlock()
		return nil, nil, false, err
	}
	if old := r.procs[spec.ID]; spec.Key != "" && old != nil && old.key == spec.Key {
		r.mu.Unlock()
		r.opt.Logger.Info("spawn answered again", "id", spec.ID, "pid", old.Pid)
		return old, old.Log.NewCursor(0), true, nil
	}
	done := r.claimSpawnOf(spec.ID)
	r.mu.Unlock()
	defer done()
	p, cur, err = r.spawn(spec, true)
	return p, cur, false, err
}

// awaitSpawnOf waits, with r.mu held (it lets go of it meanwhile), until no
// spawn of spec.ID is under way: spawns of one id are serialised, so that
// two requests with one key (a client's spawn and its resend) cannot both
// start a process, the second replacing the first. It fails once the
// registry is shutting down.
func (r *Registry) awaitSpawnOf(spec Spec) error {
	for {
		if r.shutting {
			return fmt.Errorf("spawn %s: the daemon is shutting down", spec.Command)
		}
		busy, ok := r.starting[spec.ID]
		if !ok {
			return nil
		}
		r.mu.Unlock()
		<-busy
		r.mu.Lock()
	}
}

// claimSpawnOf marks a spawn of id under way, with r.mu held, and returns
// what ends it (called without r.mu).
func (r *Registry) claimSpawnOf(id string) (done func()) {
	busy := make(chan struct{})
	r.starting[id] = busy
	return func() {
		r.mu.Lock()
		delete(r.starting, id)
		r.mu.Unlock()
		close(busy)
	}
}

func (r *Registry) spawn(spec Spec, follow bool) (*Process, *streamlog.Cursor, error) {
	r.mu.Lock()
	if r.shutting {
		r.mu.Unlock()
		return nil, nil, fmt.Errorf("spawn %s: the daemon is shutting down", spec.Command)
	}
	r.spawning.Add(1)
	r.mu.Unlock()
	defer r.spawning.Done() // launch has put the process in procs by then, or it never started
	env := envlist.Merge(r.opt.Env, spec.Env)
	dir := spec.Cwd
	if dir == "" {
		dir = r.opt.Dir
	}
	own := spec.Mirror.ChildOwn()
	if spec.TTY != nil && len(own) > 0 {
		return nil, nil, errors.New("spawn: " + MsgStdioToTerminal)
	}
	if spec.StdinClosed && (spec.TTY != nil || spec.Mirror.Stdin != nil) {
		return nil, nil, errors.New("spawn: a closed stdin cannot be a terminal's or a passed one")
	}
	for _, f := range own {
		// Programs expect blocking stdio (cat fails on EAGAIN), and a Go
		// spawner's pipes are non-blocking. The spawner has given the
		// descriptor up, so the change to the shared description is the
		// child's to have.
		if err := setBlocking(f); err != nil {
			return nil, nil, fmt.Errorf("spawn %s: passed descriptor: %w", spec.Command, err)
		}
	}
	if spec.Pipeline != nil || spec.TTY != nil {
		return r.spawnExt(spec, env, dir, follow) // ext.go
	}
	path, err := r.program(spec, env, dir)
	if err != nil {
		return nil, nil, err
	}

	// A passed stdin (mirror.Spec.Stdin) is the child's own; the daemon's copy
	// is closed with the child's ends below, and nothing writes to it.
	stdinR, stdinW := spec.Mirror.Stdin, (*os.File)(nil)
	if stdinR == nil {
		if stdinR, stdinW, err = quietPipe(); err != nil {
			return nil, nil, fmt.Errorf("spawn %s: %w", spec.Command, err)
		}
	}
	outR, outW, err := outputPipe(spec.Mirror, spec.Mirror.Stdout)
	if err != nil {
		closeAll(stdinR, stdinW)
		return nil, nil, fmt.Errorf("spawn %s: %w", spec.Command, err)
	}
	errR, errW, err := outputPipe(spec.Mirror, spec.Mirror.Stderr)
	if err != nil {
		closeAll(stdinR, stdinW, outR, outW)
		return nil, nil, fmt.Errorf("spawn %s: %w", spec.Command, err)
	}

	cmd := &exec.Cmd{
		Path:        path,
		Args:        append([]string{spec.Command}, spec.Args...),
		Env:         env,
		Dir:         dir,
		Stdin:       stdinR,
		Stdout:      outW,
		Stderr:      errW,
		SysProcAttr: &syscall.SysProcAttr{Setpgid: true},
	}
	if err := r.start(cmd, spec.Sandbox); err != nil {
		closeAll(stdinR, stdinW, outR, outW, errR, errW)
		return nil, nil, fmt.Errorf("spawn %s: %w", spec.Command, err)
	}
	// The child's ends: stdin's goes now; the output pipes' are kept
	// (output.held) until the child is reaped, or closed now when the
	// child writes into a passed descriptor itself.
	stdinR.Close()
	if outR == nil {
		outW.Close()
		outW = nil
	}
	if errR == nil {
		errW.Close()
		errW = nil
	}
	outputs := readOutputs(output{f: outR, stream: wire.Stdout, held: outW}, output{f: errR, stream: wire.Stderr, held: errW})
	return r.launch(spec, []*exec.Cmd{cmd}, outputs, writeEnd(stdinW), follow)
}

// pipeGrows lets q grow f, the daemon's end of a child's stdin, for a
// large write, when f is a pipe in the runtime's poller.
func (r *Registry) pipeGrows(q *stdinQueue, f *os.File) {
	if q.grow != nil || !mirror.IsPipe(f) {
		return
	}
	if rc, err := f.SyscallConn(); err == nil {
		q.grow = func() bool { return r.growPipe(rc) }
		q.shrink = r.releasePipe
	}
}

// writeEnd is the daemon's end of a child's stdin pipe for launch: nil,
// not a nil *os.File in an interface, when the stdin was passed.
func writeEnd(f *os.File) io.WriteCloser {
	if f == nil {
		return nil
	}
	return f
}

// start starts cmd, confined by sb when that is set, and with
// Options.DieWithDaemon tied to the daemon's life.
func (r *Registry) start(cmd *exec.Cmd, sb *sandbox.Policy) error {
	if r.opt.DieWithDaemon {
		if cmd.SysProcAttr == nil {
			cmd.SysProcAttr = &syscall.SysProcAttr{}
		}
		// The kernel sends it when the thread that forked the child ends,
		// not only the process. Go's threads live as long as the process
		// unless a goroutine ends while locked to one (LockOSThread), which
		// nothing in sous does.
		cmd.SysProcAttr.Pdeathsig = syscall.SIGKILL
	}
	err := sandbox.Start(cmd, sb) // cmd.Start() when sb is nil
	if err != nil {
		err = startErr(cmd, err)
	}
	return err
}

// startErr words a failed start as before the program's stat moved after
// it (Registry.program): a program that is not there as its stat's error,
// which lookPath gave before the fork; then a cwd that is not there, whose
// failed chdir exec reports as the program's "fork/exec PATH: no such file
// or directory".
func startErr(cmd *exec.Cmd, err error) error {
	prog := cmd.Path
	if !filepath.IsAbs(prog) && cmd.Dir != "" {
		prog = filepath.Join(cmd.Dir, prog)
	}
	if _, serr := os.Stat(prog); serr != nil && strings.Contains(cmd.Path, "/") {
		return serr
	}
	if cmd.Dir != "" {
		if _, serr := os.Stat(cmd.Dir); serr != nil {
			return fmt.Errorf("cwd: %w", serr)
		}
	}
	return err
}

// launch registers a started process and has it read and reaped: by the
// child poller, or by goroutines of its own (stdin, output and reaping, and
// its timeout).
func (r *Registry) launch(spec Spec, cmds []*exec.Cmd, outputs []output, stdinW io.WriteCloser, follow bool) (*Process, *streamlog.Cursor, error) {
	// A plain child is reaped and read through the registry's child poller
	// (childpoll.go); a pipeline or a terminal by a goroutine of its own.
	plain := spec.Pipeline == nil && spec.TTY == nil
	ctx, cancel := context.WithCancel(context.Background())
	p := &Process{
		ID:        spec.ID,
		key:       spec.Key,
		Command:   spec.Command,
		Args:      append([]string(nil), spec.Args...),
		Pid:       cmds[0].Process.Pid,
		StartTime: float64(time.Now().UnixNano()) / 1e9,
		Log:       streamlog.New(r.opt.Log),
		cmds:      cmds,
		outputs:   outputs,
		stdin:     newStdinQueue(r.opt.StdinMax),
		ctx:       ctx,
		cancel:    cancel,
		reapedCh:  make(chan struct{}),
		doneCh:    make(chan struct{}),
	}
	p.ext.init(spec, outputs)
	if spec.StdinClosed && stdinW != nil {
		// The child still gets a pipe, not /dev/null: it sees what it sees
		// after process.stdin {"close":true} (a FIFO at end-of-file, which
		// a program that stats its stdin tells from a device), only sooner.
		// No writer ever starts.
		stdinW.Close()
		p.stdin.closedAtSpawn()
	}
	for i := range p.outputs {
		p.outputs[i].mirror = spec.Mirror.TeeOf(p.outputs[i].stream)
		// Only a plain spawn's pipes are quiet (quietPipe): a terminal's
		// master stays the file Resize uses (extState.tty).
		p.outputs[i].quiet = plain && !inPoller(p.outputs[i].f)
	}

	r.mu.Lock()
	old := r.procs[spec.ID]
	r.procs[spec.ID] = p
	if old != nil {
		r.dequeue(old)
	}
	r.mu.Unlock()
	if old != nil {
		old.discard()
	}

	var cur *streamlog.Cursor
	if follow {
		cur = p.Log.NewCursor(0) // before the readers start
	}
	r.opt.Logger.Info("spawn", append([]any{"id", spec.ID, "command", p.Command, "args", len(p.Args), "pid", p.Pid}, p.ext.logAttrs(spec)...)...)
	switch {
	case stdinW == nil:
		p.stdin.passed()
	case spec.StdinClosed:
		// Closed above, before anyone could find the process.
	default:
		p.stdin.recycle = r.putStdinBuf
		// A quiet pipe (quietPipe) goes into the runtime's poller when its
		// writer starts, with the first data.
		quiet := false
		if f, ok := stdinW.(*os.File); ok {
			if quiet = plain && !inPoller(f); !quiet {
				r.pipeGrows(p.stdin, f)
			}
		}
		r.wg.Add(1) // the writer's, or the pipe's close if it never starts
		writer := func() {
			go func() {
				defer r.wg.Done()
				w := stdinW
				if quiet {
					f := pollable(stdinW.(*os.File))
					r.pipeGrows(p.stdin, f)
					w = f
				}
				p.stdin.run(w)
			}()
		}
		if _, ok := stdinW.(*os.File); ok {
			// A pipe: closing it never blocks, so a writer that never
			// started can have it closed under the queue's lock. (A
			// terminal's input is closed by writing ^D, which may wait.)
			p.stdin.deferWriter(writer, func() { stdinW.Close(); r.wg.Done() })
		} else {
			writer()
		}
	}
	r.wg.Add(1) // the child's: released once its exit frame is in
	if r.poller == nil || !plain || !r.poller.watch(p) {
		for i := range p.outputs {
			p.readable(i) // a reader each, from now
		}
		p.closeHeld()                                     // supervise reads until the pipes end
		go func() { defer r.wg.Done(); r.supervise(p) }() // reaps it too
	}
	if spec.Timeout > 0 {
		r.wg.Add(1)
		go func() { defer r.wg.Done(); r.enforceTimeout(p, spec.Timeout) }() // ext.go
	}
	return p, cur, nil
}
