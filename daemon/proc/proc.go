// Package proc runs the daemon's child processes: each in its own process
// group, its stdout and stderr read into a streamlog.Log as frames, its stdin
// fed through an exactly-once offset queue, and its reaping ordered with
// signalling so that a reaped group is never signalled (its pgid could belong
// to someone else by then).
package proc

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"sort"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"golang.org/x/sys/unix"

	"github.com/seed5ad92d46/sous/daemon/sandbox"
	"github.com/seed5ad92d46/sous/daemon/streamlog"
	"github.com/seed5ad92d46/sous/daemon/wire"

	"github.com/seed5ad92d46/sous/internal/envlist"
)

// Options configure a Registry.
type Options struct {
	Log      streamlog.Options // per process
	Env      []string          // the environment children inherit (default os.Environ())
	Dir      string            // the default working directory (default the daemon's)
	Logger   *slog.Logger
	StdinMax int // bytes of stdin queued per process before writers wait (default 8 MiB)
	// DrainAfterExit is how long output keeps being read after the child
	// exits while descendants still hold its pipes and stay quiet (default 250 ms).
	DrainAfterExit time.Duration
	// OnExit, when set, is called after a process's exit frame is appended.
	OnExit func(*Process)
	// RetainExited is how many exited processes stay reattachable (default
	// 1000); RetainFor how long after exiting (default 1 h). See retain.go.
	RetainExited int
	RetainFor    time.Duration
	// ReplayDiskTotal bounds the replay spilled to disk by all processes
	// together (default 4 GiB); past it, the spill of the processes that
	// exited longest ago is dropped. See retain.go.
	ReplayDiskTotal int64
	// ReplayMemTotal bounds the replay that exited processes keep in memory,
	// all together (default 64 MiB); past it, the processes that exited
	// longest ago move theirs to disk, or drop it where nothing spills
	// (streamlog.Log.Shed). Running processes keep their own windows
	// (Log.MemLimit each). See retain.go.
	ReplayMemTotal int
	// OnOutput, when set, is called with the byte count of every output read.
	OnOutput func(n int)
	// TimeoutGrace is how long a group killed for its Spec.Timeout gets
	// between SIGTERM and SIGKILL (default DefaultGrace, 3 s).
	TimeoutGrace time.Duration
	// DieWithDaemon has the kernel SIGKILL every child (each stage of a
	// pipeline) when the daemon's process dies, even by SIGKILL, when no
	// shutdown can run: for an embedded daemon, whose processes nobody can
	// reach once it is gone. Grandchildren are not covered.
	DieWithDaemon bool
}

// Registry holds the daemon's processes by id.
type Registry struct {
	opt Options

	mu    sync.Mutex
	procs map[string]*Process
	wg    sync.WaitGroup // every process's goroutines
	bufs  sync.Pool      // *frameBuf: see getBuf
	// stdinBufs holds *stdinBuf: see StdinBuffer.
	stdinBufs sync.Pool
	// bigPipes counts the output pipes grown beyond the default (pipereader.go).
	bigPipes atomic.Int64
	// spilled is the replay on disk across every log; reclaiming is set
	// while a goroutine frees some of it (retain.go).
	spilled      atomic.Int64
	reclaiming   atomic.Bool
	reclaimFloor atomic.Int64 // no reclaim below this: the last one found nothing more

	// exited queues exited processes in exit order, nexited counts the
	// entries still retained (retain.go); both guarded by mu.
	exited  []exitedProc
	nexited int
	// exitedMem is the replay memory of the retained exited processes
	// (Options.ReplayMemTotal); guarded by mu.
	exitedMem int
	// expiry forgets exited processes once RetainFor has passed although
	// nothing else exits (retain.go); noExpiry once the registry shut down.
	// Both guarded by mu.
	expiry   *time.Timer
	noExpiry bool

	// stopping is closed when Shutdown starts: readers waiting for a full
	// mirror (a consumer that stopped reading) give up on it then, or
	// Shutdown would wait for them forever.
	stopping     chan struct{}
	stoppingOnce sync.Once

	// spawning counts the spawns between their start and their entry in
	// procs, so that Shutdown waits for them before it decides what to stop:
	// a child started just before would otherwise be neither killed nor
	// kept, only leaked. shutting, once set, refuses new spawns. Add and
	// the flag are guarded by mu.
	spawning sync.WaitGroup
	shutting bool

	// strays are the groups reaped leaders left members in, for Shutdown
	// (strays.go); guarded by mu.
	strays []*strayGroup
}

// NewRegistry returns an empty registry.
func NewRegistry(opt Options) *Registry {
	if opt.Env == nil {
		opt.Env = os.Environ()
	}
	if opt.Logger == nil {
		opt.Logger = slog.New(slog.DiscardHandler)
	}
	if opt.DrainAfterExit <= 0 {
		opt.DrainAfterExit = 250 * time.Millisecond
	}
	if opt.RetainExited <= 0 {
		opt.RetainExited = defaultRetainExited
	}
	if opt.RetainFor <= 0 {
		opt.RetainFor = defaultRetainFor
	}
	if opt.ReplayDiskTotal <= 0 {
		opt.ReplayDiskTotal = defaultReplayDiskTotal
	}
	if opt.ReplayMemTotal <= 0 {
		opt.ReplayMemTotal = defaultReplayMemTotal
	}
	r := &Registry{opt: opt, procs: make(map[string]*Process), stopping: make(chan struct{})}
	r.opt.Log.Recycle = r.putBuf
	r.opt.Log.OnDisk = r.spilledChanged
	if r.opt.Log.WriteSlots == nil {
		r.opt.Log.WriteSlots = streamlog.NewWriteSlots(maxStreamingSpills)
	}
	return r
}

// maxStreamingSpills bounds the processes whose replay spills through 4 MiB
// write buffers at once (streamlog.WriteSlots): each holds two while it
// spills (the next spill file takes them over from a full one), until it
// exits or goes Options.IdleRelease without spilling; the others write
// 1 MiB at a time.
const maxStreamingSpills = 4

// frameBuf is one read's worth of output. Buffers go round from readPipe to
// the stream log and back (streamlog.Options.Recycle): a fresh 32 KiB buffer
// per read cost a third of the daemon's time in clearing memory, faulting in
// pages and collecting garbage.
type frameBuf = [wire.MaxFrameData]byte

func (r *Registry) getBuf() []byte {
	if b, ok := r.bufs.Get().(*frameBuf); ok {
		return b[:]
	}
	return new(frameBuf)[:]
}

// putBuf takes back a frame's data; only whole buffers that came from getBuf
// (the small reads readPipe copies out are smaller) are kept.
func (r *Registry) putBuf(b []byte) {
	if cap(b) == wire.MaxFrameData {
		r.bufs.Put((*frameBuf)(b[:wire.MaxFrameData]))
	}
}

// StdinBufSize is the most data one process.stdin request can carry: the
// decoding of a request line's worth (wire.MaxLine) of base64.
const StdinBufSize = wire.MaxLine / 4 * 3

// stdinBuf is a pooled buffer for process.stdin data (StdinBuffer).
type stdinBuf = [StdinBufSize]byte

// pooledStdin is the smallest request data StdinBuffer takes from the pool:
// below it, a buffer of its own costs little, where pinning a pooled one
// would keep StdinBufSize queued for each small write.
const pooledStdin = 64 << 10

// StdinBuffer returns n bytes to decode process.stdin data into, for
// WriteStdin, which takes the buffer over: large ones come from a pool the
// stdin writer refills as it writes them to the child.
func (r *Registry) StdinBuffer(n int) []byte {
	if n < pooledStdin || n > StdinBufSize {
		return make([]byte, n)
	}
	if b, ok := r.stdinBufs.Get().(*stdinBuf); ok {
		return b[:n]
	}
	return new(stdinBuf)[:n]
}

// putStdinBuf takes back a buffer from StdinBuffer once it is written.
func (r *Registry) putStdinBuf(b []byte) {
	if cap(b) == StdinBufSize {
		r.stdinBufs.Put((*stdinBuf)(b[:StdinBufSize]))
	}
}

// Spec describes a process to spawn.
type Spec struct {
	ID      string
	Command string
	Args    []string
	Cwd     string
	Env     map[string]*string // merged over the inherited environment; nil unsets

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
	// is read (see Mirror): pipes it passed with process.spawn.
	Mirror Mirror
}

// Mirror names pipes that a child's output is written to as the daemon
// reads it, ahead of its frames, which are logged and delivered as always
// but marked Frame.Mirrored. It is how `sous exec` streams a child to its
// own stdout (process.spawn.mirror): tee(2) shares the pipe's pages with
// the mirror, so the bytes are not copied on the way, and there is no
// hand-over between goroutines. Only pipes can be mirrored to: output
// that tee cannot take (a terminal's, or after the mirror's reader went
// away) simply arrives unmarked, for the caller to write as usual.
//
// Stdin is not a mirror but rides along with one: a pipe or file the
// spawner passed to be the child's stdin itself, as a shell's redirection
// would make it, so that `sous exec` does not relay its own stdin through
// process.stdin. Nothing can be written to such a process's stdin then.
//
// Direct goes further for Stdout and Stderr: they are the child's own
// stdout and stderr (pipes or regular files), which the daemon never
// reads, so those streams have no frames and no replay. It is for a
// spawner that is the only one who could ever follow the process, as
// `sous exec` on its embedded daemon is: the bytes then go from the child
// to their reader as they would from a shell.
type Mirror struct {
	Stdout, Stderr *os.File // nil: that stream is not mirrored
	Stdin          *os.File // nil: the daemon's pipe, fed by process.stdin
	Direct         bool     // Stdout and Stderr are the child's own (see above)
}

// MsgStdioToTerminal says why a terminal's child cannot take passed stdio
// (Mirror.Stdin, Mirror.Direct).
const MsgStdioToTerminal = "a terminal's child reads and writes its terminal: its stdio cannot be passed to it"

// childOwn lists the passed descriptors that become the child's own (see
// Stdin and Direct), rather than pipes the daemon tees to.
func (m Mirror) childOwn() []*os.File {
	own := []*os.File{m.Stdin}
	if m.Direct {
		own = append(own, m.Stdout, m.Stderr)
	}
	return slices.DeleteFunc(own, func(f *os.File) bool { return f == nil })
}

// Tees reports whether any output is teed to a pipe of the spawner's: the
// daemon holds those until the output is read (the descriptors that are
// the child's own it closes as soon as the child has them).
func (m Mirror) Tees() bool { return m.of(wire.Stdout) != nil || m.of(wire.Stderr) != nil }

// IsPipe reports whether f is a pipe: what output can be teed to. (Stat,
// unlike Fd, leaves a non-blocking file as it is: the description is the
// spawner's too.)
func IsPipe(f *os.File) bool {
	fi, err := f.Stat()
	return err == nil && fi.Mode()&os.ModeNamedPipe != 0
}

// IsPipeOrRegular reports whether f can be a child's stdio as it is, a
// stdin or a Direct output: a pipe or a regular file. A terminal cannot:
// the child runs in a process group of its own, which the terminal would
// stop (SIGTTIN) as it reads, and it would find a terminal where sous
// otherwise gives a pipe.
func IsPipeOrRegular(f *os.File) bool {
	fi, err := f.Stat()
	return err == nil && (fi.Mode()&os.ModeNamedPipe != 0 || fi.Mode().IsRegular())
}

// of is the pipe stream s is teed to, if any.
func (m Mirror) of(s wire.Stream) *os.File {
	if m.Direct {
		return nil
	}
	switch s {
	case wire.Stdout:
		return m.Stdout
	case wire.Stderr:
		return m.Stderr
	}
	return nil
}

// Process is one child.
type Process struct {
	ID        string
	Command   string
	Args      []string
	Pid       int
	StartTime float64 // the daemon's wall clock at spawn, epoch seconds
	Log       *streamlog.Log

	cmds    []*exec.Cmd // one per pipeline stage, else one; cmds[0] leads the group
	outputs []output    // the daemon's read ends: stdout and stderr, a pipeline's or a terminal's
	ext     extState    // pipeline, terminal and timeout state (ext.go)
	stdin   *stdinQueue
	ctx     context.Context // ends when the process is discarded
	cancel  context.CancelFunc

	mu          sync.Mutex
	reaped      bool
	exitCode    int
	stageCodes  []int         // a pipeline's, set when reaped
	timedOut    bool          // killed because Spec.Timeout passed
	signal      int           // the signal that ended it (its last stage); in the exit frame when Spec.ExitSignal asked
	reapedCh    chan struct{} // closed once reaped
	strays      *strayGroup   // what the leader left of its group, once reaped (strays.go)
	exitedAt    time.Time     // when the exit frame went in (retain.go)
	queued      bool          // in the registry's exit queue; guarded by the registry's mu
	retainedMem int           // its log's memory while queued, in Registry.exitedMem; guarded likewise
	doneCh      chan struct{} // closed once the exit frame is in the log
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
func (r *Registry) SpawnFollowed(spec Spec) (*Process, *streamlog.Cursor, error) {
	return r.spawn(spec, true)
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
	own := spec.Mirror.childOwn()
	if spec.TTY != nil && len(own) > 0 {
		return nil, nil, errors.New("spawn: " + MsgStdioToTerminal)
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
	path, err := lookPath(spec.Command, env, dir)
	if err != nil {
		return nil, nil, err
	}

	// A passed stdin (Mirror.Stdin) is the child's own; the daemon's copy
	// is closed with the child's ends below, and nothing writes to it.
	stdinR, stdinW := spec.Mirror.Stdin, (*os.File)(nil)
	if stdinR == nil {
		if stdinR, stdinW, err = childPipe(daemonWrites); err != nil {
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
	closeAll(stdinR, outW, errW) // the child's ends
	outputs := readOutputs(output{f: outR, stream: wire.Stdout}, output{f: errR, stream: wire.Stderr})
	return r.launch(spec, []*exec.Cmd{cmd}, outputs, writeEnd(stdinW), follow)
}

// writeEnd is the daemon's end of a child's stdin pipe for launch: nil,
// not a nil *os.File in an interface, when the stdin was passed.
func writeEnd(f *os.File) io.WriteCloser {
	if f == nil {
		return nil
	}
	return f
}

func setBlocking(f *os.File) error {
	rc, err := f.SyscallConn()
	if err != nil {
		return err
	}
	if cerr := rc.Control(func(fd uintptr) { err = unix.SetNonblock(int(fd), false) }); cerr != nil {
		return cerr
	}
	return err
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
	if err != nil && cmd.Dir != "" {
		if _, serr := os.Stat(cmd.Dir); serr != nil {
			// The child's chdir failed, which exec reports as the
			// program's "fork/exec PATH: no such file or directory".
			err = fmt.Errorf("cwd: %w", serr)
		}
	}
	return err
}

// launch registers a started process and starts its goroutines: stdin,
// output, reaping (and its timeout).
func (r *Registry) launch(spec Spec, cmds []*exec.Cmd, outputs []output, stdinW io.WriteCloser, follow bool) (*Process, *streamlog.Cursor, error) {
	ctx, cancel := context.WithCancel(context.Background())
	p := &Process{
		ID:        spec.ID,
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
	for i := range p.outputs {
		p.outputs[i].mirror = spec.Mirror.of(p.outputs[i].stream)
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
	if stdinW != nil {
		p.stdin.recycle = r.putStdinBuf
		if f, ok := stdinW.(*os.File); ok && IsPipe(f) {
			if rc, err := f.SyscallConn(); err == nil {
				p.stdin.grow = func() bool { return r.growPipe(rc) }
				p.stdin.shrink = r.releasePipe
			}
		}
		r.wg.Add(1)
		go func() { defer r.wg.Done(); p.stdin.run(stdinW) }()
	} else {
		p.stdin.passed()
	}
	r.wg.Add(2)
	go func() { defer r.wg.Done(); r.supervise(p) }()
	go func() { defer r.wg.Done(); p.reap(r.addStrays) }()
	if spec.Timeout > 0 {
		r.wg.Add(1)
		go func() { defer r.wg.Done(); r.enforceTimeout(p, spec.Timeout) }() // ext.go
	}
	return p, cur, nil
}

// supervise reads the output pipes until they end, then appends the exit frame.
//
// After the child exits, descendants may still hold its pipes open (a shell
// that started something in the background). Output keeps flowing while they
// write; once they stay quiet for DrainAfterExit the pipes are abandoned, so
// the exit frame is not held hostage by a daemonized grandchild.
func (r *Registry) supervise(p *Process) {
	var wg sync.WaitGroup
	for _, o := range p.outputs {
		wg.Add(1)
		go func() { defer wg.Done(); r.readPipe(p, o) }()
	}
	<-p.reapedCh
	for _, o := range p.outputs {
		o.f.SetReadDeadline(time.Now().Add(r.opt.DrainAfterExit))
	}
	wg.Wait()
	p.stdin.stop()
	code, _ := p.ExitCode()
	p.Log.Append(p.ctx, p.exitFrame()) // fails only when discarded
	now := time.Now()
	p.markExited(now)
	r.queueExited(p, now)
	close(p.doneCh)
	r.opt.Logger.Info("exit", "id", p.ID, "pid", p.Pid, "exitCode", code)
	if r.opt.OnExit != nil {
		r.opt.OnExit(p)
	}
	r.prune(time.Now())
}

// readPipe turns one pipe into frames of at most 32 KiB each, until EOF,
// the drain deadline, or the process being discarded. Buffers go to the log
// without a copy and come back once nobody reads them (see pipeReader).
func (r *Registry) readPipe(p *Process, o output) {
	f := o.f
	defer f.Close()
	pr, err := newPipeReader(r, f, o.mirror, p.ctx.Done())
	if err != nil {
		r.opt.Logger.Error("read output", "id", p.ID, "err", err)
		return
	}
	defer pr.close()
	var (
		chunks [][]byte
		frames []wire.Frame
	)
	for {
		var (
			n        int
			mirrored bool
		)
		chunks, n, mirrored, err = pr.read(chunks[:0])
		if n > 0 && r.opt.OnOutput != nil {
			r.opt.OnOutput(n)
		}
		frames = frames[:0]
		for _, data := range chunks {
			frames = append(frames, wire.Frame{Stream: o.stream, Stage: o.stage, Data: data, Mirrored: mirrored})
		}
		if k, aerr := p.Log.AppendAll(p.ctx, frames); aerr != nil {
			for _, rest := range chunks[k:] {
				r.putBuf(rest)
			}
			return // discarded
		}
		clear(chunks)
		clear(frames)
		if n > 0 {
			select {
			case <-p.reapedCh: // draining: stay while the descendants still talk
				f.SetReadDeadline(time.Now().Add(r.opt.DrainAfterExit))
			default:
			}
		}
		if err != nil {
			return // EOF, the drain deadline, or released by discard
		}
	}
}

// reap waits for the child to exit without reaping it, then reaps it under
// the lock that signalling takes, so no signal can reach a recycled pgid.
// A pipeline's leader (its first stage, whose pid is the group's id) is
// reaped last, after the other stages: until then it holds the group's id,
// alive or as a zombie. What the leader left of its group, if anything,
// goes to keep before reapedCh closes (strays.go).
func (p *Process) reap(keep func(*strayGroup)) {
	n := len(p.cmds)
	codes, shell := make([]int, n), make([]int, n)
	for k := range n {
		i := (k + 1) % n // 1, 2, ..., n-1, then 0
		waitExited(p.cmds[i].Process.Pid)
		p.mu.Lock()
		err := p.cmds[i].Wait()
		code := 0
		if err != nil {
			var ee *exec.ExitError
			if errors.As(err, &ee) {
				if ws, ok := ee.Sys().(syscall.WaitStatus); ok && ws.Signaled() {
					code = -1
				} else {
					code = ee.ExitCode()
				}
			} else {
				code = -1
			}
		}
		codes[i], shell[i] = code, shellStatus(err)
		if i != 0 {
			p.mu.Unlock()
			continue
		}
		p.exitCode = codes[n-1]
		if p.ext.pipeline {
			p.stageCodes = shell
		}
		if codes[n-1] == -1 && shell[n-1] > 128 {
			p.signal = shell[n-1] - 128
		}
		p.reaped = true
		// Members left now hold the group's id, so it cannot have been
		// recycled yet: findStrays may look for them. Before reapedCh
		// closes, so that a kill right after wait() finds them.
		strays := findStrays(p.Pid)
		p.strays = strays
		p.mu.Unlock()
		keep(strays)
		close(p.reapedCh)
	}
}

// EndSignal is the signal that ended the process (its last stage), once
// reaped; 0 when it exited or the daemon cannot tell.
func (p *Process) EndSignal() int {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.signal
}

// Running reports whether the child has not been reaped yet.
func (p *Process) Running() bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	return !p.reaped
}

// ExitCode is the child's exit code (-1 when a signal ended it) once reaped.
func (p *Process) ExitCode() (int, bool) {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.exitCode, p.reaped
}

// waitExited waits until the child pid has exited, without reaping it. It
// waits on a pidfd through the runtime's poller where the kernel gives one
// (Linux 5.10), rather than in waitid: a blocked waitid holds an OS thread,
// so every running child cost the daemon a thread (300 quiet children, 307
// threads), and Go ends a program that reaches 10,000 of them.
func waitExited(pid int) {
	if fd, err := unix.PidfdOpen(pid, unix.PIDFD_NONBLOCK); err == nil {
		f := os.NewFile(uintptr(fd), "pidfd")
		defer f.Close()
		if rc, err := f.SyscallConn(); err == nil {
			exited := false
			rerr := rc.Read(func(fd uintptr) bool {
				for {
					var info unix.Siginfo // Signo stays 0 while the child runs
					err := unix.Waitid(unix.P_PIDFD, int(fd), &info, unix.WEXITED|unix.WNOWAIT|unix.WNOHANG, nil)
					if err == unix.EINTR {
						continue // not false: the poller reports the exit once
					}
					exited = err == nil && info.Signo != 0
					return exited || err != nil
				}
			})
			if rerr == nil && exited {
				return
			}
		}
	}
	var info unix.Siginfo
	for unix.Waitid(unix.P_PID, pid, &info, unix.WEXITED|unix.WNOWAIT, nil) == unix.EINTR {
	}
}

// Reaped is closed once the child has been reaped.
func (p *Process) Reaped() <-chan struct{} { return p.reapedCh }

// Done is closed once the exit frame is in the log.
func (p *Process) Done() <-chan struct{} { return p.doneCh }

// Signal sends sig to the child's process group unless the child has been
// reaped. It reports whether the signal was sent. Once the child has been
// reaped, what it left of its group, if anything, gets sig instead (and
// Signal reports false: the child itself is gone).
func (p *Process) Signal(sig syscall.Signal) bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.reaped {
		if p.strays != nil {
			p.strays.signal(sig)
		}
		return false
	}
	// The leader is at worst a zombie here, which keeps the pgid reserved.
	syscall.Kill(-p.Pid, sig)
	return true
}

// WriteStdin applies process.stdin to the child. The process takes data
// over (it is queued, not copied); a buffer from Registry.StdinBuffer goes
// back to the pool once written.
func (p *Process) WriteStdin(ctx context.Context, data []byte, offset *int64) (applied int64, duplicate bool, err error) {
	return p.stdin.Offer(ctx, data, offset)
}

// CloseStdin closes the child's stdin once the queued data is written.
func (p *Process) CloseStdin() { p.stdin.Close() }

// StdinApplied is the stdin high-water mark.
func (p *Process) StdinApplied() int64 { return p.stdin.Applied() }

// Grace bounds for KillAndWait, from docs/PROTOCOL.md.
const (
	DefaultGrace = 3000 * time.Millisecond
	MaxGrace     = 600000 * time.Millisecond
)

// KillAndWait sends sig to the group and waits up to grace for the child to be
// reaped, escalating to SIGKILL if asked. The kill does not depend on the
// caller staying: if ctx ends first (the client hung up, or half-closed
// and the daemon had to give up on it), the answer comes at once and the
// escalation still happens when the grace runs out.
func (p *Process) KillAndWait(ctx context.Context, sig syscall.Signal, grace time.Duration, escalate bool) wire.KillAndWaitResult {
	if !p.Signal(sig) {
		return wire.KillAndWaitResult{Found: true, Died: true, AlreadyExited: true}
	}
	if grace <= 0 {
		grace = DefaultGrace
	}
	grace = min(grace, MaxGrace)
	deadline := time.Now().Add(grace)
	t := time.NewTimer(grace)
	defer t.Stop()
	select {
	case <-p.reapedCh:
		// What the child left in its group got sig too, and the rest of the
		// grace; past it, SIGKILL, if asked.
		return wire.KillAndWaitResult{Found: true, Died: true, Escalated: escalate && p.escalateStrays(deadline)}
	case <-ctx.Done():
		if escalate {
			go p.escalateAt(deadline)
		}
		return wire.KillAndWaitResult{Found: true, Died: !p.Running()}
	case <-t.C:
	}
	if !escalate {
		return wire.KillAndWaitResult{Found: true, Died: !p.Running()}
	}
	p.Signal(syscall.SIGKILL)
	select {
	case <-p.reapedCh:
		return wire.KillAndWaitResult{Found: true, Died: true, Escalated: true}
	case <-ctx.Done():
		return wire.KillAndWaitResult{Found: true, Died: !p.Running(), Escalated: true}
	}
}

// escalateAt finishes a KillAndWait whose caller left: SIGKILL for the
// group at deadline unless the child is reaped first, and then for what it
// left in its group.
func (p *Process) escalateAt(deadline time.Time) {
	t := time.NewTimer(time.Until(deadline))
	defer t.Stop()
	select {
	case <-p.reapedCh:
		p.escalateStrays(deadline)
	case <-t.C:
		p.Signal(syscall.SIGKILL)
	}
}

// discard tears a replaced process down: its readers are dropped first so no
// stray frame arrives under the reused id, then its group is killed.
func (p *Process) discard() {
	p.release()
	p.Signal(syscall.SIGKILL)
}

// release lets go of the daemon's side of the process: readers of its log are
// dropped, its pipes abandoned, its stdin stopped.
func (p *Process) release() {
	p.Log.Close()
	p.cancel()
	for _, o := range p.outputs {
		o.f.SetReadDeadline(time.Now())
	}
	p.stdin.stop()
}

// Get returns the process with id, or nil.
func (r *Registry) Get(id string) *Process {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.procs[id]
}

// List returns every process, ordered by start time.
func (r *Registry) List() []*Process {
	r.mu.Lock()
	ps := make([]*Process, 0, len(r.procs))
	for _, p := range r.procs {
		ps = append(ps, p)
	}
	r.mu.Unlock()
	sort.Slice(ps, func(i, j int) bool { return ps[i].StartTime < ps[j].StartTime })
	return ps
}

// Shutdown stops every running child: SIGTERM to each group, SIGKILL after
// grace. With keep, children are left running (they lose their stdio) and
// only the daemon's side is released. It returns the number of children that
// were running, and waits for the registry's goroutines.
func (r *Registry) Shutdown(keep bool, grace time.Duration) int {
	r.stoppingOnce.Do(func() { close(r.stopping) })
	r.mu.Lock()
	r.shutting = true
	r.mu.Unlock()
	r.spawning.Wait() // every child started is in procs now
	r.mu.Lock()
	r.noExpiry = true
	if r.expiry != nil {
		r.expiry.Stop()
		r.expiry = nil
	}
	r.mu.Unlock()
	running := 0
	var wg sync.WaitGroup
	for _, p := range r.List() {
		if !p.Running() {
			continue
		}
		running++
		if keep {
			p.release()
			continue
		}
		wg.Add(1)
		go func() {
			defer wg.Done()
			p.KillAndWait(context.Background(), syscall.SIGTERM, grace, true)
		}()
	}
	if keep {
		r.releaseStrays()
	} else {
		r.stopStrays(&wg, grace)
	}
	wg.Wait()
	if !keep {
		// Children that died of the SIGTERM just now may have left members
		// that ignore it (their reap recorded them before KillAndWait
		// returned). Before waiting for the registry's goroutines: a member
		// that keeps writing keeps its process's reader draining.
		r.stopStrays(&wg, grace)
		wg.Wait()
		r.wg.Wait()
	}
	for _, p := range r.List() {
		p.Log.Close()
		p.cancel()
	}
	return running
}

// lookPath resolves command the way a shell would, with the child's PATH.
func lookPath(command string, env []string, dir string) (string, error) {
	if command == "" {
		return "", errors.New("spawn: empty command")
	}
	if strings.Contains(command, "/") {
		path := command
		if !filepath.IsAbs(path) && dir != "" {
			path = filepath.Join(dir, path)
		}
		if _, err := os.Stat(path); err != nil {
			return "", fmt.Errorf("spawn %s: %w", command, err)
		}
		// Exec the name as given: the child resolves a relative one after
		// its chdir, so it sees the same argv[0]/$0 a shell would give it.
		return command, nil
	}
	pathEnv, _ := envlist.Lookup(env, "PATH")
	for _, d := range filepath.SplitList(pathEnv) {
		if d == "" {
			d = "."
		}
		if !filepath.IsAbs(d) && dir != "" {
			d = filepath.Join(dir, d)
		}
		p := filepath.Join(d, command)
		if fi, err := os.Stat(p); err == nil && !fi.IsDir() && fi.Mode()&0o111 != 0 {
			return p, nil
		}
	}
	return "", fmt.Errorf("spawn %s: executable file not found in $PATH", command)
}

// outputPipe is a new pipe for one output stream, or, when m is Direct and
// passed is set, no read end and passed itself as the child's end.
func outputPipe(m Mirror, passed *os.File) (r, w *os.File, err error) {
	if m.Direct && passed != nil {
		return nil, passed, nil
	}
	return childPipe(daemonReads)
}

// pipeUse says which end of a pipe to children the daemon keeps.
type pipeUse int

const (
	daemonReads   pipeUse = iota // a child's output
	daemonWrites                 // a child's stdin
	betweenStages                // both ends go to children (a pipeline)
)

// childPipe is os.Pipe for a pipe to children: only the end the daemon
// keeps is non-blocking and in the runtime's poller. os.Pipe puts both ends
// there, so a child's end was switched back to blocking for exec and taken
// out of the poller again when closed: 11 syscalls a spawn (strace -c over
// 600 spawns).
func childPipe(use pipeUse) (r, w *os.File, err error) {
	var p [2]int
	if err := unix.Pipe2(p[:], unix.O_CLOEXEC); err != nil {
		return nil, nil, os.NewSyscallError("pipe2", err)
	}
	kept := -1
	switch use {
	case daemonReads:
		kept = p[0]
	case daemonWrites:
		kept = p[1]
	}
	if kept >= 0 {
		if err := unix.SetNonblock(kept, true); err != nil {
			unix.Close(p[0])
			unix.Close(p[1])
			return nil, nil, os.NewSyscallError("setnonblock", err)
		}
	}
	// os.NewFile makes a non-blocking descriptor pollable, a blocking one not.
	return os.NewFile(uintptr(p[0]), "|0"), os.NewFile(uintptr(p[1]), "|1"), nil
}

// readOutputs is outs without those the daemon does not read (no read end:
// the child's own, see Mirror.Direct).
func readOutputs(outs ...output) []output {
	return slices.DeleteFunc(outs, func(o output) bool { return o.f == nil })
}

func closeAll(fs ...*os.File) {
	for _, f := range fs {
		f.Close()
	}
}
