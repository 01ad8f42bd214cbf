package builtins

import (
	"fmt"
	"sync"
	"time"

	"go.starlark.net/starlark"

	"github.com/seed5ad92d46/sous/daemon/wire"
	"github.com/seed5ad92d46/sous/runtime"
)

// Process is a process the run started or reattached to: a starlark.Value
// whose attributes come from the "Process.*" entries of the table.
//
// Its output is recorded by onFrame on the client's frame reader goroutine
// and read on the recipe thread; mu guards what both touch. The end of the
// process is recorded by watch, on a goroutine of its own, so that the
// reader goroutine never waits for anything.
type Process struct {
	env     *runtime.Env
	host    *runtime.Host
	id      string
	argv    []string
	opt     procOptions
	started time.Time
	proc    runtime.Proc // set before announce; read-only afterwards
	unlist  func()       // takes it off the run's live processes (live.go); set before announce

	mu        sync.Mutex
	out       [2]capture     // stdout, stderr
	stages    []capture      // a pipeline's stderr, per stage (spawn_ext.go); nil otherwise
	readLines [2]*lineReader // read_line's position in stdout, stderr; nil until its first call
	tty       bool           // spawned with a terminal
	echo      runtime.Echo   // set by announce when echoing
	announced bool
	early     []chunk // echo held back until the spawn event is out
	closed    bool    // the end is recorded: late frames are dropped
	exited    bool
	exitCode  int
	err       error // why following failed, when it did
	finished  time.Time
	ended     chan struct{} // closed once the end is recorded and echoed

	// What a durable run keeps of it (process_durable.go).
	seen     int64            // the seq of the last frame received
	whole    int64            // the seq of the last output frame that ended a line: all before it can be shown
	shown    int64            // frames up to this seq were shown before the runner died: not echoed again
	catchUp  int64            // a takeover waits for the frame with this seq...
	caught   chan struct{}    // ...closed once it came
	replayed *replayedProcess // a handle rebuilt from a journal, not taken over yet; recipe thread only
	applied  int64            // stdin bytes the daemon had applied, as the last write said
	readSkip [2]int           // read_line's lines the journal answered, skipped once taken over
	rejoined bool             // taken over in the call that started it: stdin goes at offsets

	// fed is the stdin launch closed already (spawnSpec.noStdin): the
	// answer feed would give. Nil otherwise.
	fed *stdinFeed
}

// procOptions say how a process is followed.
type procOptions struct {
	echo     bool
	showPid  bool
	internal bool // a helper a builtin runs (pipeline's mktemp): no events, no echo
	// beside: spawn started it and returned, so it runs beside the recipe;
	// its echo is held until the recipe settles (runtime.Output.EchoBeside).
	beside bool
	limit  int // bytes kept per stream
}

// chunk is a copy of output held back from the echo.
type chunk struct {
	stream wire.Stream
	data   []byte
}

var (
	_ starlark.HasAttrs = (*Process)(nil)
	_ Awaitable         = (*Process)(nil)
)

func newProcess(env *runtime.Env, host *runtime.Host, id string, argv []string, opt procOptions) *Process {
	p := &Process{env: env, host: host, id: id, argv: argv, opt: opt, started: time.Now(), ended: make(chan struct{})}
	p.out[0].limit, p.out[1].limit = opt.limit, opt.limit
	return p
}

// streamIndex maps a stream to its capture.
func streamIndex(s wire.Stream) (int, bool) {
	switch s {
	case wire.Stdout:
		return 0, true
	case wire.Stderr:
		return 1, true
	}
	return 0, false
}

// onFrame is the client.FrameHandler: it runs on the client's reader
// goroutine, so it only copies and hands on. The exit frame is left to
// watch, which the client wakes by closing Proc.Done after this returns.
//
// It never waits: a lines() iteration past its bound puts the rest in its
// spill file (capture.go). Holding the child back here instead (the
// embedded daemon delivers on the goroutine that reads the child) hung
// recipes whose loop waits for something the child does later, such as
// a client run against a server the loop is watching.
func (p *Process) onFrame(f *wire.Frame) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.seen = max(p.seen, f.Seq)
	if p.caught != nil && f.Seq >= p.catchUp {
		close(p.caught)
		p.caught = nil
	}
	i, ok := streamIndex(f.Stream)
	if !ok || p.closed {
		return
	}
	if n := len(f.Data); n > 0 && f.Data[n-1] == '\n' {
		p.whole = f.Seq
	}
	if s := f.StageIndex(); s >= 0 && s < len(p.stages) {
		p.stages[s].add(f.Data)
	} else {
		p.out[i].add(f.Data)
	}
	switch {
	case f.Seq <= p.shown:
		// Shown by the run's runner before it died (a resumed run).
	case p.echo != nil:
		p.echo.Write(f.Stream, f.Data)
	case !p.announced && p.opt.echo && !p.opt.internal:
		p.early = append(p.early, chunk{f.Stream, append([]byte(nil), f.Data...)})
	}
}

// announce emits the spawn event, starts the echo (with whatever arrived
// before it) and starts watching for the end. Frames can arrive before the
// spawn call returns, so everything they trigger waits for this.
func (p *Process) announce(reattached bool) {
	if !p.opt.internal {
		info := runtime.SpawnInfo{ID: p.id, Pid: p.proc.Pid(), Command: p.argv, Host: p.host.Target(), Reattached: reattached}
		if reattached {
			info.Lost = p.proc.Lost()
		}
		p.env.Output.Spawned(info)
	}
	p.mu.Lock()
	if p.opt.echo && !p.opt.internal {
		if p.opt.beside {
			p.echo = p.env.Output.EchoBeside(p.id)
		} else {
			p.echo = p.env.Output.Echo(p.id)
		}
		for _, c := range p.early {
			p.echo.Write(c.stream, c.data)
		}
	}
	p.early = nil
	p.announced = true
	p.mu.Unlock()
	select {
	case <-p.proc.Done():
		// Already over: a reattach replayed the exit. Record it before the
		// recipe can ask, or a stopped process would read as running.
		p.watch()
	default:
		go p.watch()
	}
}

// watch records the end of the process: its exit, or the loss of the
// connection that followed it.
func (p *Process) watch() {
	<-p.proc.Done()
	code, exited := p.proc.Exited()
	p.mu.Lock()
	p.closed, p.exited, p.exitCode, p.finished = true, exited, code, time.Now()
	if !exited {
		p.err = p.proc.Err()
	}
	p.out[0].end()
	p.out[1].end()
	echo := p.echo
	p.mu.Unlock()
	if echo != nil {
		echo.Close()
	}
	if p.unlist != nil {
		p.unlist()
	}
	if exited && !p.opt.internal {
		p.env.Output.Exited(p.id, code)
	}
	close(p.ended)
}

// Ready implements Awaitable.
func (p *Process) Ready() <-chan struct{} { return p.ended }

// Outcome implements Awaitable: the Result of an ended process.
func (p *Process) Outcome() (starlark.Value, error) {
	r, err := p.result()
	if err != nil {
		return nil, err // not a nil *Result in a non-nil interface
	}
	return r, nil
}

// result builds the Result of an ended process.
func (p *Process) result() (*Result, error) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if !p.exited {
		return nil, fmt.Errorf("lost process %s: %w", p.id, p.err)
	}
	r := &Result{
		env:             p.env,
		exitCode:        p.exitCode,
		stdout:          string(p.out[0].buf),
		stderr:          string(p.out[1].buf),
		stdoutTruncated: p.out[0].truncated(),
		stderrTruncated: p.out[1].truncated(),
		duration:        p.finished.Sub(p.started),
	}
	if p.proc != nil {
		r.signal = p.proc.ExitSignal()
	}
	r.status = StatusOK
	if r.exitCode != 0 {
		r.status = StatusFailed
	}
	r.stages = []Stage{{ExitCode: r.exitCode, Stderr: r.stderr}}
	if p.stages != nil {
		p.pipelineResult(r) // spawn_ext.go
	}
	return r, nil
}

func (p *Process) String() string {
	p.mu.Lock()
	defer p.mu.Unlock()
	state := "running"
	switch {
	case p.exited:
		state = fmt.Sprintf("exit_code=%d", p.exitCode)
	case p.closed:
		state = "lost"
	}
	return fmt.Sprintf("<Process %s %s>", p.id, state)
}

func (p *Process) Type() string          { return "Process" }
func (p *Process) Freeze()               {} // a handle: its state is the process's, not the recipe's
func (p *Process) Truth() starlark.Bool  { return starlark.True }
func (p *Process) Hash() (uint32, error) { return starlark.String(p.id).Hash() }

func (p *Process) Attr(name string) (starlark.Value, error) {
	return p.env.Table.Attr(p.env, "Process", p, p.host, name)
}

func (p *Process) AttrNames() []string { return p.env.Table.AttrNames("Process") }

// state reads what the attributes report.
func (p *Process) state() (closed, exited bool, code int) {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.closed, p.exited, p.exitCode
}
