package builtins

import (
	"context"
	"encoding/json"
	"fmt"
	"time"

	"go.starlark.net/starlark"

	"github.com/seed5ad92d46/sous/daemon/wire"
	"github.com/seed5ad92d46/sous/runtime"
)

// Processes in a durable run (runtime/durablelive.go). The journal keeps
// a Process as what rebuilds its handle (its id, command and options);
// every call on it that reads or acts is journaled with its answer. A
// resumed run rebuilds the handle, answers the calls the journal holds,
// and takes the process over at the first call it does not hold:
//
//   - On a daemon that outlives the runner, the process is reattached
//     from its first frame, so that output(), lines() and read_line()
//     see all of it; what the runner had shown is not echoed again, and
//     read_line goes on after the lines the journal answered.
//   - On the embedded daemon the process died with the runner. If the
//     run had only spawned it (no call on it answered), it runs again,
//     with a notice, as a command the runner died in does. If the run had
//     waited for it, the journal's Result is its end, and what needs
//     only that (output, lines, read_line, wait) is answered from it.
//     Otherwise the resume stops with exit code 2: it would redo what
//     the run saw done.
//
// A call the runner died in (its answer missing) is done again by taking
// over: a spawn or run whose process is already on the daemon follows it
// rather than start it twice (its id is the call's, RUN-SEQ); a stdin
// write is sent again at its offset, which the daemon applies once.

// processKind names Process values in a journal.
const processKind = "Process"

var (
	_ runtime.Recordable = (*Process)(nil)
	_ runtime.Keyed      = (*Process)(nil)
	_ runtime.Marked     = (*Process)(nil)
	_ runtime.TakingOver = (*Process)(nil)
)

// replayedProcess is what a handle rebuilt from a journal knows until it
// takes the process over.
type replayedProcess struct {
	pid     int
	fromSeq int64 // reattach's from_seq: where its capture started
	// observed names the first call on the process that the journal
	// answered ("" for none): the run saw something of it.
	observed string
	// respawn starts the process again (a spawn's handle on the embedded
	// daemon, whose process died with the runner); nil for a reattach's.
	respawn func(c *runtime.Call) error
	ended   bool // a replayed wait gave its end: it is not taken over
}

// keptProcess is a Process as the journal keeps it.
type keptProcess struct {
	ID      string   `json:"id"`
	Argv    []string `json:"argv,omitempty"`
	Echo    bool     `json:"echo,omitempty"`
	ShowPid bool     `json:"show_pid,omitempty"`
	Limit   int      `json:"limit"`
	TTY     bool     `json:"tty,omitempty"`
	Pid     int      `json:"pid,omitempty"`
	FromSeq int64    `json:"from_seq,omitempty"`
	Beside  bool     `json:"beside,omitempty"`
}

// Record implements runtime.Recordable.
func (p *Process) Record() (string, any, error) {
	if p.opt.internal || p.stages != nil {
		return "", nil, fmt.Errorf("a pipeline's process")
	}
	p.mu.Lock()
	tty := p.tty
	p.mu.Unlock()
	k := keptProcess{ID: p.id, Argv: p.argv, Echo: p.opt.echo, ShowPid: p.opt.showPid, Limit: p.opt.limit,
		TTY: tty, Pid: p.pid(), Beside: p.opt.beside}
	if p.replayed != nil {
		k.FromSeq = p.replayed.fromSeq
	}
	return processKind, k, nil
}

// decodeProcess is the Decoder of Process values: a handle on the default
// host, which spawn's and reattach's Replayed set to the call's.
func decodeProcess(env *runtime.Env, data json.RawMessage) (starlark.Value, error) {
	var k keptProcess
	if err := json.Unmarshal(data, &k); err != nil {
		return nil, fmt.Errorf("a Process: %w", err)
	}
	p := newProcess(env, env.DefaultHost(), k.ID, k.Argv, procOptions{echo: k.Echo, showPid: k.ShowPid, limit: k.Limit, beside: k.Beside})
	p.tty = k.TTY
	p.replayed = &replayedProcess{pid: k.Pid, fromSeq: k.FromSeq}
	return p, nil
}

// JournalKey implements runtime.Keyed: a process's calls are keyed by its
// id, not by its state.
func (p *Process) JournalKey() string { return "<Process " + p.id + ">" }

// JournalMark implements runtime.Marked: the frames received up to the
// last whole line, which the echo has shown once the recipe made its next
// builtin call (the journal asks as a call starts). A frame shown after
// that may show again on a resume; none is lost.
func (p *Process) JournalMark() int64 {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.whole
}

// ReplayMark implements runtime.Marked.
func (p *Process) ReplayMark(mark int64) {
	p.mu.Lock()
	p.shown = max(p.shown, mark)
	p.mu.Unlock()
}

func (p *Process) pid() int {
	if p.proc != nil {
		return p.proc.Pid()
	}
	if p.replayed != nil {
		return p.replayed.pid
	}
	return 0
}

// spawnReplayed binds a replayed spawn's handle to the call's host, and
// keeps how to start it again.
func spawnReplayed(c *runtime.Call, v starlark.Value) {
	p, ok := v.(*Process)
	if !ok || p.replayed == nil {
		return
	}
	p.host = c.Host
	orig := *c
	p.replayed.respawn = func(now *runtime.Call) error {
		spec, _, err := spawnArgs(&orig)
		if err != nil {
			return err
		}
		spec.id = p.id
		if spec.cwd, err = hostPath(now, spec.cwd); err != nil {
			return err
		}
		cl, err := hostClient(now, p.host)
		if err != nil {
			return err
		}
		return p.launch(now, cl, spec)
	}
}

// reattachReplayed binds a replayed reattach's handle to the call's host.
func reattachReplayed(c *runtime.Call, v starlark.Value) {
	if p, ok := v.(*Process); ok && p.replayed != nil {
		p.host = c.Host
	}
}

// methodReplayed notes what a replayed call on a process tells of it: that
// the run saw it, its end (wait), its stdin mark (write), the lines
// read_line gave.
func methodReplayed(c *runtime.Call, v starlark.Value) {
	p, ok := c.Recv.(*Process)
	if !ok || p.replayed == nil {
		return
	}
	if p.replayed.observed == "" {
		p.replayed.observed = c.Name
	}
	switch c.Name {
	case "Process.wait":
		if r, ok := v.(*Result); ok {
			p.restore(r)
		}
	case "Process.write":
		if n, err := starlark.AsInt32(v); err == nil {
			p.applied = int64(n)
		} else if n, ok := v.(starlark.Int).Int64(); ok {
			p.applied = n
		}
	case "Process.read_line":
		stream := wire.Stdout
		var timeout *time.Duration
		if bind(c, 2, opt("stream", streamArg(&stream)), opt("timeout", optSeconds(&timeout))) == nil && v != starlark.None {
			i, _ := streamIndex(stream)
			p.readSkip[i]++
		}
	}
}

// restore ends a replayed handle as the journal's Result of its wait says.
func (p *Process) restore(r *Result) {
	if p.replayed.ended {
		return
	}
	p.replayed.ended = true
	p.mu.Lock()
	p.out[0].add([]byte(r.stdout))
	p.out[1].add([]byte(r.stderr))
	p.out[0].end()
	p.out[1].end()
	p.closed, p.exited, p.exitCode, p.finished = true, true, r.exitCode, p.started.Add(r.duration)
	p.mu.Unlock()
	close(p.ended)
}

// TakeOver implements runtime.TakingOver: the calls that only read need
// no process once the journal gave its end.
func (p *Process) TakeOver(c *runtime.Call) error {
	if c.Resuming() {
		return nil // answered from the journal
	}
	switch c.Name {
	case "Process.wait", "Process.output", "Process.read_line", "Process.lines.next":
		return p.ensureLive(c, false)
	}
	return p.ensureLive(c, true)
}

// ensureLive makes a handle rebuilt from a journal follow its process,
// for a call the journal does not answer; on any other handle it does
// nothing. A handle whose end the journal gave needs nothing more unless
// the call acts on the process (act).
func (p *Process) ensureLive(c *runtime.Call, act bool) error {
	rp := p.replayed
	if rp == nil || (rp.ended && !act) {
		return nil
	}
	if !p.host.Outlives() {
		if rp.observed != "" || rp.respawn == nil {
			what := "called " + rp.observed + " on it"
			if rp.observed == "" {
				what = "reattached to it"
			}
			return c.StopResume(fmt.Sprintf("process %s ran on the embedded daemon, which died with the runner, "+
				"and the run had %s: resuming would do again what the run saw done. "+
				"Run recipes with processes on a standalone daemon (--socket) to resume them", p.id, what))
		}
		c.Notice(fmt.Sprintf("sous: process %s died with the run's runner (on the embedded daemon): it runs again", p.id))
		p.replayed = nil
		return rp.respawn(c)
	}
	cl, err := hostClient(c, p.host)
	if err != nil {
		return err
	}
	var res wire.ReattachResult
	err = block(c.Env, c.Env.Ctx, func(ctx context.Context) (err error) {
		p.proc, res, err = cl.Reattach(ctx, p.id, rp.fromSeq, p.onFrame)
		return err
	})
	if err != nil {
		return c.Errorf("take over process %s: %s", p.id, daemonMessage(err))
	}
	if !res.Found {
		return c.StopResume(fmt.Sprintf("process %s is no longer on %s (forgotten after it ended, or the daemon "+
			"restarted): a resume cannot take it over", p.id, p.host.Target()))
	}
	p.replayed = nil
	procOf(c.Env).live.add(cl, p)
	p.announce(true)
	// Until the replay reaches what the daemon had, output() would see
	// less than the run did.
	p.mu.Lock()
	if p.seen < res.LastSeq {
		p.catchUp, p.caught = res.LastSeq, make(chan struct{})
	}
	caught := p.caught
	p.mu.Unlock()
	if caught != nil {
		if err := waitEither(c.Env, caught, p.ended); err != nil {
			return c.Errorf("%v", err)
		}
	}
	return nil
}

// waitEither waits through the event loop until a or b is closed.
func waitEither(env *runtime.Env, a, b <-chan struct{}) error {
	either := make(chan struct{})
	go func() {
		defer close(either)
		select {
		case <-a:
		case <-b:
		case <-env.Ctx.Done():
		}
	}()
	return wait(env, either, nil)
}

// rejoinProcess follows the process a call the runner died in had
// started, when the daemon has it: nil when it does not (the call starts
// it).
func rejoinProcess(c *runtime.Call, cl runtime.Daemon, host *runtime.Host, spec spawnSpec, opt procOptions) (*Process, error) {
	p := newProcess(c.Env, host, spec.id, spec.argv, opt)
	var res wire.ReattachResult
	err := block(c.Env, c.Env.Ctx, func(ctx context.Context) (err error) {
		p.proc, res, err = cl.Reattach(ctx, spec.id, 0, p.onFrame)
		return err
	})
	if err != nil {
		return nil, c.Errorf("take over process %s: %s", spec.id, daemonMessage(err))
	}
	if !res.Found {
		return nil, nil
	}
	p.rejoined = true
	procOf(c.Env).live.add(cl, p)
	p.announce(true)
	return p, nil
}
