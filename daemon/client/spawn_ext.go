package client

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"sort"
	"strings"
	"time"

	"github.com/seed5ad92d46/sous/daemon/wire"
)

// The spawn extensions, against a daemon with and without them:
//
//   - Pipeline (process.spawn.pipeline): no honest emulation here (the
//     stages' own codes and stderr need the daemon), so Spawn fails naming
//     the feature; the recipe builtins fall back to sh with per-stage files.
//   - Timeout (process.spawn.timeout): emulated by the client, which stops
//     the group with process.killAndWait when the time passes (as long as the
//     client runs).
//   - Env entries set to nil (process.spawn.env.unset): emulated by running
//     the command under env -u NAME ... (claustrum itself would set them
//     to ""), so the command runs as "env" on the daemon.
//   - TTY (process.spawn.tty): cannot be emulated: Spawn fails naming it.
//   - The spawn key (process.spawn.key), which makes Spawn's resend after a
//     lost connection idempotent: without it the resend is a plain spawn,
//     which replaces the first request's process if the daemon handled
//     that one late.
//   - StdinClosed (process.spawn.stdin.closed): emulated by sending
//     process.stdin {"close":true} once the spawn is answered, before
//     Spawn returns, as callers did themselves before the extension.

// spawnExt is what Spawn adds to process.spawn for the extensions.
type spawnExt struct {
	params   map[string]any
	pipeline bool
	tty      bool
	emulate  time.Duration // the timeout this client enforces itself
	closeIn  bool          // StdinClosed, which this client sends process.stdin {"close":true} for
	c        *Client
}

// TimeoutGrace is the time between SIGTERM and SIGKILL when a spawn's
// Timeout passes (the daemon's, or the client's emulation).
const TimeoutGrace = 3 * time.Second

// prepareSpawn checks spec's extensions against the daemon's features and
// rewrites spec where the client emulates one.
func (c *Client) prepareSpawn(ctx context.Context, spec *SpawnSpec) (spawnExt, error) {
	ext := spawnExt{params: map[string]any{}, c: c}
	if spec.Pipeline != nil {
		if spec.Command != "" || len(spec.Args) > 0 {
			return ext, errors.New("spawn: a pipeline replaces Command and Args")
		}
		if len(spec.Pipeline) == 0 {
			return ext, errors.New("spawn: a pipeline needs at least one stage")
		}
		if err := c.RequireFeature(ctx, wire.FeatureSpawnPipeline, "spawning a pipeline"); err != nil {
			return ext, err
		}
		ext.pipeline = true
	}
	if spec.TTY {
		if spec.Pipeline != nil {
			return ext, errors.New("spawn: a pipeline cannot have a terminal")
		}
		if err := c.RequireFeature(ctx, wire.FeatureSpawnTTY, "a process with a terminal (tty)"); err != nil {
			return ext, err
		}
		ext.tty = true
		ext.params["tty"] = true
		if spec.Size != (wire.TermSize{}) {
			ext.params["size"] = spec.Size
		}
	}
	if unset := unsetNames(spec.Env); len(unset) > 0 {
		ok, err := c.HasFeature(ctx, wire.FeatureSpawnEnvUnset)
		if err != nil {
			return ext, err
		}
		if !ok {
			if err := emulateUnset(spec, unset); err != nil {
				return ext, err
			}
		}
	}
	if spec.Timeout > 0 {
		ok, err := c.HasFeature(ctx, wire.FeatureSpawnTimeout)
		if err != nil {
			return ext, err
		}
		if ok {
			ext.params["timeoutMs"] = max(int64((spec.Timeout+time.Millisecond-1)/time.Millisecond), 1)
		} else {
			ext.emulate = spec.Timeout
		}
	}
	if spec.StdinClosed {
		switch {
		case spec.TTY:
			return ext, errors.New("spawn: StdinClosed cannot be combined with TTY (a terminal's input cannot be closed)")
		case spec.Mirror.Stdin != nil:
			return ext, errors.New("spawn: StdinClosed cannot be combined with Mirror.Stdin (the child reads that file)")
		}
		inSpawn, ok, err := c.stdinCloser(ctx)
		switch {
		case err != nil:
			return ext, err
		case !ok:
			// Refused before anything starts: a command run and then
			// stopped for want of a close would have done its work for
			// nothing, and maybe done it halfway.
			return ext, c.RequireFeature(ctx, wire.FeatureStdinClose, "closing the command's stdin")
		case inSpawn:
			ext.params["stdinClosed"] = true
		default:
			ext.closeIn = true
		}
	}
	if ext.pipeline {
		ext.params["pipeline"] = spec.Pipeline
	}
	// One key per Spawn, the same on its resend after a lost connection
	// (process.spawn.key): the daemon may handle the first request after
	// the reconnect looked for the process, and the resend must then find
	// that process rather than replace it. Without the feature the resend
	// is a plain spawn again, as it always was.
	if ok, err := c.HasFeature(ctx, wire.FeatureSpawnKey); err != nil {
		return ext, err
	} else if ok {
		ext.params["spawnKey"] = newSpawnKey()
	}
	// Always asked where the daemon can: which signal ended a process
	// (ExitSignal) is what tells a crash or the OOM killer from the rest.
	if ok, err := c.HasFeature(ctx, wire.FeatureSpawnExitSignal); err != nil {
		return ext, err
	} else if ok {
		ext.params["exitSignal"] = true
	}
	return ext, nil
}

// ClosesStdin reports whether SpawnSpec.StdinClosed can be honoured: the
// daemon closes a child's stdin in its spawn (process.spawn.stdin.closed)
// or on request (process.stdin.close, which Spawn then sends). A daemon
// with neither (claustrum's own) cannot close a child's stdin at all.
func (c *Client) ClosesStdin(ctx context.Context) (bool, error) {
	_, ok, err := c.stdinCloser(ctx)
	return ok, err
}

// stdinCloser says how the daemon closes a child's stdin: inSpawn, else
// by request when ok.
func (c *Client) stdinCloser(ctx context.Context) (inSpawn, ok bool, err error) {
	if inSpawn, err = c.HasFeature(ctx, wire.FeatureSpawnStdinClosed); err != nil || inSpawn {
		return inSpawn, inSpawn, err
	}
	ok, err = c.HasFeature(ctx, wire.FeatureStdinClose)
	return false, ok, err
}

// newSpawnKey returns a process.spawn.key: 16 random hex digits, which no
// other spawn of the id will pick.
func newSpawnKey() string {
	var b [8]byte
	rand.Read(b[:]) // never fails (crypto/rand)
	return hex.EncodeToString(b[:])
}

// apply adds the extension members to process.spawn's params.
func (e spawnExt) apply(params map[string]any) {
	if e.pipeline {
		delete(params, "command")
		delete(params, "args")
	}
	for k, v := range e.params {
		params[k] = v
	}
}

// started records what the spawn asked for, starts an emulated timeout
// and closes an emulated StdinClosed's stdin. It returns Spawn's answer: p,
// or why its stdin could not be closed (the process is then killed, as
// nobody will wait for it).
func (e spawnExt) started(ctx context.Context, p *Proc) (*Proc, error) {
	p.mu.Lock()
	p.tty = e.tty
	p.mu.Unlock()
	if e.emulate > 0 {
		p.heed() // its watch on p.done needs the exit read when it comes
		go p.enforceTimeout(e.emulate)
	}
	if !e.closeIn {
		return p, nil
	}
	err := p.CloseStdin(ctx)
	if err == nil || wire.IsNotRunning(err) { // a child that is gone already read all it would
		return p, nil
	}
	settle, cancel := context.WithTimeout(context.WithoutCancel(ctx), spawnSettle)
	defer cancel()
	p.KillAndWait(settle, "SIGKILL", time.Second, true)
	e.c.unregister(p)
	return nil, fmt.Errorf("spawn: closing the stdin of %s: %w", p.ID, err)
}

func unsetNames(env map[string]*string) []string {
	var names []string
	for k, v := range env {
		if v == nil {
			names = append(names, k)
		}
	}
	sort.Strings(names)
	return names
}

// emulateUnset runs spec's command (or each pipeline stage) under
// env -u NAME... -- so that the variables are unset, and drops them from
// the env sent to the daemon.
func emulateUnset(spec *SpawnSpec, unset []string) error {
	env := make(map[string]*string, len(spec.Env))
	for k, v := range spec.Env {
		if v != nil {
			env[k] = v
		}
	}
	spec.Env = env
	wrap := func(argv []string) ([]string, error) {
		if strings.Contains(argv[0], "=") {
			return nil, fmt.Errorf("spawn: unsetting variables of %q needs the daemon extension %q (env(1) would read the command as an assignment)", argv[0], wire.FeatureSpawnEnvUnset)
		}
		out := []string{"env"}
		for _, name := range unset {
			out = append(out, "-u", name)
		}
		return append(append(out, "--"), argv...), nil
	}
	if spec.Pipeline != nil {
		stages := make([][]string, len(spec.Pipeline))
		for i, st := range spec.Pipeline {
			w, err := wrap(st)
			if err != nil {
				return err
			}
			stages[i] = w
		}
		spec.Pipeline = stages
		return nil
	}
	argv, err := wrap(append([]string{spec.Command}, spec.Args...))
	if err != nil {
		return err
	}
	spec.Command, spec.Args = argv[0], argv[1:]
	return nil
}

// enforceTimeout is the client's emulation of process.spawn.timeout: once d
// passes, the group gets SIGTERM (and SIGCONT, should it be paused), then
// SIGKILL after TimeoutGrace.
func (p *Proc) enforceTimeout(d time.Duration) {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-p.done:
		return
	case <-p.c.closeCh:
		return
	case <-t.C:
	}
	p.mu.Lock()
	if p.exited || p.err != nil {
		p.mu.Unlock()
		return
	}
	p.timedOut = true
	p.mu.Unlock()
	ctx, cancel := context.WithTimeout(context.Background(), TimeoutGrace+30*time.Second)
	defer cancel()
	go func() {
		select {
		case <-p.c.closeCh:
			cancel()
		case <-ctx.Done():
		}
	}()
	p.Kill(ctx, "TERM")
	p.Kill(ctx, "CONT")
	p.KillAndWait(ctx, "TERM", TimeoutGrace, true)
}

// StageExitCodes are a pipeline's stage statuses from its exit frame
// (128+n for a stage signal n ended), or nil.
func (p *Proc) StageExitCodes() []int {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.stageCodes
}

// ExitSignal is the signal that ended the process (its last stage, for a
// pipeline), from its exit frame, or 0: it exited, is still running, or the
// daemon does not say (without process.spawn.exitsignal, or for a process
// another client spawned without asking).
func (p *Proc) ExitSignal() int {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.signal
}

// TimedOut reports whether the process was stopped because its Timeout
// passed (by the daemon, or by this client's emulation).
func (p *Proc) TimedOut() bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.timedOut
}

// TTY reports whether this client spawned the process with a terminal.
func (p *Proc) TTY() bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.tty
}

// Resize sets the size of the process's terminal (process.resize).
func (p *Proc) Resize(ctx context.Context, rows, cols int) error {
	if err := p.c.RequireFeature(ctx, wire.FeatureSpawnTTY, "resizing a terminal"); err != nil {
		return err
	}
	return p.c.Call(ctx, "process.resize", map[string]any{"id": p.ID, "rows": rows, "cols": cols}, nil)
}
