package client

import (
	"context"
	"errors"
	"fmt"
	"os"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/seed5ad92d46/sous/daemon/mirror"
	"github.com/seed5ad92d46/sous/daemon/wire"
)

// SpawnSpec describes a process to start.
type SpawnSpec struct {
	ID      string
	Command string
	Args    []string
	Cwd     string
	Env     map[string]*string // nil values unset inherited variables

	// Sandbox confines the process (extension process.spawn.sandbox, which
	// cannot be emulated: a daemon without it fails the spawn); nil:
	// unsandboxed.
	Sandbox *wire.Sandbox

	// Extensions (spawn_ext.go says which are emulated on an older daemon).
	Pipeline [][]string    // stages [cmd, args...] run as a | b | c, instead of Command and Args
	TTY      bool          // a pseudo-terminal
	Size     wire.TermSize // its size (zero: 24x80)
	Timeout  time.Duration // kill the group (TERM, KILL 3 s later) once this passes; 0: never
	// StdinClosed closes the child's stdin (a pipeline's first stage's) as
	// it starts: it reads end-of-file at once, as after CloseStdin. The
	// spawn says so itself where the daemon has process.spawn.stdin.closed;
	// elsewhere Spawn sends process.stdin {"close":true} before it returns.
	// Not with TTY, nor with Mirror.Stdin.
	StdinClosed bool

	// Mirror asks the daemon to write the child's output to these pipes
	// of this process as it reads it (process.spawn.mirror, see
	// mirror.Spec): the embedded daemon and one on a Unix socket can. The
	// frames it mirrored arrive marked Frame.Mirrored (over a socket,
	// without their data), for this handler to skip; other followers of
	// the process never see the mark. Over other links, or a relay that
	// drops descriptors, the spawn is unmirrored and nothing is marked.
	// The client keeps the files: the daemon gets copies.
	//
	// Mirror.Stdin, a pipe or regular file, is passed the same way to be
	// the child's stdin itself (process.spawn.mirror.stdin); whether it
	// was is Proc.StdinPassed. With Mirror.Direct, Stdout and Stderr
	// (pipes or regular files) are the child's own stdout and stderr
	// (process.spawn.mirror.direct): no frames, no replay of them, for
	// whoever follows the process; whether they were is Proc.OutputPassed.
	// Without that extension they are teed to as above (pipes only). A
	// regular file or the null device among Stdout and Stderr, without
	// Direct, the daemon writes itself as it reads the output, marked as a
	// tee's (process.spawn.mirror.files); without that extension the
	// frames carry it. None is passed to a terminal's child.
	Mirror mirror.Spec
}

// SpawnRefused reports whether err is a daemon's refusal to start program
// and gives why: no such program or a cwd that is not there, which the
// daemon words "spawn PROGRAM: why", or a program its --allow-command list
// leaves out ("Command not allowed: ...", the whole message).
func SpawnRefused(err error, program string) (why string, ok bool) {
	var we *wire.Error
	switch {
	case !errors.As(err, &we):
		return "", false
	case strings.HasPrefix(we.Message, wire.MsgCommandNotAllowed):
		return we.Message, true
	case strings.HasPrefix(we.Message, "spawn "):
		return strings.TrimPrefix(we.Message, "spawn "+program+": "), true
	}
	return "", false
}

// Spawn starts a process and follows its output from the first frame.
func (c *Client) Spawn(ctx context.Context, spec SpawnSpec, h FrameHandler) (*Proc, error) {
	if spec.ID == "" {
		return nil, errors.New("spawn: empty process id")
	}
	if err := checkID(spec.ID); err != nil {
		return nil, fmt.Errorf("spawn: %w", err)
	}
	if spec.Sandbox != nil {
		// No emulation is possible, and running unsandboxed is never an option.
		switch ok, err := c.HasFeature(ctx, wire.FeatureSpawnSandbox); {
		case err != nil:
			return nil, err
		case !ok:
			return nil, fmt.Errorf("a sandboxed process needs the daemon extension %q, which this daemon does not advertise: "+
				"its kernel cannot enforce a sandbox (Linux with Landlock ABI 3+), or it is an older sous or a claustrum; "+
				"the process was not started", wire.FeatureSpawnSandbox)
		}
	}
	ext, err := c.prepareSpawn(ctx, &spec) // spawn_ext.go
	if err != nil {
		return nil, err
	}
	c.useBinaryFrames(ctx) // binframes.go
	for attempt := 0; ; attempt++ {
		p := newProc(c, spec.ID, h)
		p.spawning = true
		_, p.keyedSpawn = ext.params["spawnKey"]
		c.register(p)
		// notifyGone, like wantPid, is ignored by a daemon without it.
		params := map[string]any{"id": spec.ID, "command": spec.Command, "wantPid": true, "notifyGone": true}
		if len(spec.Args) > 0 {
			params["args"] = spec.Args
		}
		if spec.Cwd != "" {
			params["cwd"] = spec.Cwd
		}
		if len(spec.Env) > 0 {
			params["env"] = spec.Env
		}
		if spec.Sandbox != nil {
			params["sandbox"] = spec.Sandbox
		}
		ext.apply(params)
		pass := c.mirror(ctx, spec, params)
		p.mu.Lock()
		p.teed = pass.tee
		p.mu.Unlock()
		var res wire.SpawnResult
		err := c.spawnCall(ctx, p, params, &res, pass.files)
		if pass.files != nil && mirrorRefused(err) {
			// Something between here and the daemon (a relay such as
			// socat) carries bytes but not descriptors. The daemon checks
			// the mirror before it starts anything: spawn unmirrored.
			c.noPassing.Store(true)
			delete(params, "mirror")
			delete(params, "direct")
			pass = passed{}
			p.mu.Lock()
			p.teed = false
			p.mu.Unlock()
			err = c.spawnCall(ctx, p, params, &res, nil)
		}
		p.stdinPassed, p.outputPassed = pass.stdin, pass.direct
		p.mu.Lock()
		p.spawning = false
		found := p.reattached
		p.mu.Unlock()
		if err == nil {
			p.identify(res.Pid, res.StartTime)
			return ext.started(ctx, p)
		}
		if errors.Is(err, ErrConnectionLost) && found {
			return ext.started(ctx, p) // the daemon had started it before the connection broke
		}
		var refused *wire.Error
		if errors.As(err, &refused) {
			c.forgetProc(p) // the daemon answered no: nothing started, nothing streams
		} else {
			c.unregister(p)
		}
		if errors.Is(err, ErrConnectionLost) && (attempt == 0 || p.keyedSpawn && attempt < maxSpawnResends) && c.Err() == nil {
			// Without a key: it never started, as the reconnect did not
			// find it (unless the daemon handles the first request late,
			// and then the resend replaces it). With one, the resend
			// answers with what the first request started, if it did, so
			// it is safe however often the connection breaks.
			continue
		}
		return nil, err
	}
}

// maxSpawnResends bounds how often Spawn sends a keyed spawn again after
// lost connections: a request that breaks every connection it is sent on
// would otherwise be sent forever.
const maxSpawnResends = 8

// spawnSettle bounds how long a cancelled spawn waits for the daemon's
// answer, to stop what it started.
const spawnSettle = 5 * time.Second

// spawnCall sends process.spawn. When ctx ends before the answer, the
// request may have reached the daemon already, and the process may start
// after the caller gave up on it: nobody would ever stop it. So the call
// goes on, detached from ctx, up to spawnSettle; a process it started is
// killed, and the caller gets ctx's error as if nothing started. (A kill
// sent at once could overtake the spawn: the daemon handles a
// connection's requests concurrently.)
//
// The caller waits for the answer itself, watching ctx, rather than on a
// goroutine of its own started per spawn: that goroutine cost a start and
// a wake-up (a futex call when it ran on the other CPU) on every spawn's
// path, and over a socket it, not the caller, read the answer.
func (c *Client) spawnCall(ctx context.Context, p *Proc, params map[string]any, res *wire.SpawnResult, files []*os.File) error {
	const method = "process.spawn"
	raw, err := spawnParams(params)
	if err != nil {
		return fmt.Errorf("%s: encode params: %w", method, err)
	}
	detached := context.WithoutCancel(ctx)
	callID, cl, err := c.start(detached, method, raw, files)
	if err != nil {
		return err
	}
	cl.spawning = p // only this goroutine reads it
	defer c.settle(callID, cl)
	if !c.awaitDone(ctx, cl) {
		settle, cancel := context.WithTimeout(detached, spawnSettle)
		defer cancel()
		if c.awaitDone(settle, cl) && cl.err == nil {
			c.Call(settle, "process.killAndWait", map[string]any{"id": p.ID, "signal": "SIGKILL", "escalate": true, "timeoutMs": 1000}, nil)
		}
		return ctx.Err()
	}
	if cl.err != nil {
		return cl.err
	}
	if err := decodeResult(cl.result, res); err != nil {
		return fmt.Errorf("%s: decode result: %w", method, err)
	}
	return nil
}

// Reattach follows a process already on the daemon, replaying its frames
// after fromSeq. A process the daemon does not know gives found=false and a
// nil Proc.
func (c *Client) Reattach(ctx context.Context, id string, fromSeq int64, h FrameHandler) (*Proc, wire.ReattachResult, error) {
	if err := checkID(id); err != nil {
		return nil, wire.ReattachResult{}, fmt.Errorf("reattach: %w", err)
	}
	// One reattach of an id at a time: a follower waiting for its replay
	// takes the first frame at or below what was seen as its start, and a
	// second replay in flight would be taken for it.
	unlock, err := c.lockReattach(ctx, id)
	if err != nil {
		return nil, wire.ReattachResult{}, err
	}
	defer unlock()
	c.useBinaryFrames(ctx) // binframes.go
	p := newProc(c, id, h)
	p.lastSeq = fromSeq
	askFrom, err := c.follow(p, fromSeq)
	if err != nil {
		return nil, wire.ReattachResult{}, err
	}
	params := map[string]any{"id": id, "fromSeq": askFrom, "wantPid": true, "notifyGone": true}
	call := func(params map[string]any, res *wire.ReattachResult) error {
		return c.Call(ctx, "process.reattach", params, res)
	}
	var res wire.ReattachResult
	if err := call(params, &res); err != nil {
		c.unregister(p)
		return nil, res, err
	}
	if !res.Found {
		c.forgetProc(p) // nothing to stream: the daemon does not know it
		return nil, res, nil
	}
	p.identify(res.Pid, res.StartTime)
	if err := askForTheEnd(call, params, max(askFrom, p.settleReplay(res)), res); err != nil {
		c.unregister(p)
		return nil, res, err
	}
	p.stdinMu.Lock()
	p.stdinOff = res.StdinApplied
	p.stdinMu.Unlock()
	return p, res, nil
}

// askForTheEnd makes sure a subscription from askFrom, which res answered,
// gets the process's exit frame, asking again through call when it would
// not:
//   - the process has stopped and askFrom skips its last frame, which the
//     daemon therefore never sends: ask for that frame itself. If it is the
//     exit frame, deliver passes it on (how the process ended is news
//     however far the caller skipped); if the daemon is still draining
//     output, deliver drops the frame and the exit frame follows;
//   - askFrom is past the running process's last frame: should it end
//     before it gets there, a subscription from askFrom would never send
//     the exit frame, and Wait would wait forever. Follow from the last
//     frame instead: the followers drop what they skipped, and pass the
//     exit frame on.
//
// askFrom is also where a follower that dropped frames waiting for its
// replay went on from (settleReplay): the exit frame may have been one.
func askForTheEnd(call func(map[string]any, *wire.ReattachResult) error, params map[string]any, askFrom int64, res wire.ReattachResult) error {
	var again int64
	switch {
	case !res.Running && res.LastSeq > 0 && res.LastSeq <= askFrom:
		again = res.LastSeq - 1
	case res.Running && res.LastSeq < askFrom:
		again = res.LastSeq
	default:
		return nil
	}
	params["fromSeq"] = again
	return call(params, &wire.ReattachResult{})
}

// checkID refuses a process id JSON cannot carry: invalid UTF-8 would
// reach the daemon as U+FFFD, and the frames would come back under an id
// this client does not follow.
func checkID(id string) error {
	if !utf8.ValidString(id) {
		return fmt.Errorf("process id %q is not valid UTF-8", id)
	}
	return nil
}
