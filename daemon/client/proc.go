package client

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"sync"
	"time"
	"unicode/utf8"

	"github.com/seed5ad92d46/sous/daemon/mirror"
	"github.com/seed5ad92d46/sous/daemon/wire"
)

// FrameHandler receives a process's frames in seq order, each exactly once,
// on the goroutine reading the connection (its reader goroutine, or a call's
// caller reading its own answer); for an embedded daemon, on whichever
// daemon goroutine produced them (the one reading the child's output, or
// one discarding the process), before a spawn's call has returned. It must
// return promptly and must not wait on the client nor stop the daemon; one
// that blocks holds the child back at once, as a full pipe would. f.Data is
// valid only during the call.
type FrameHandler func(f *wire.Frame)

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
	// Without that extension they are teed to as above (pipes only). None
	// is passed to a terminal's child.
	Mirror mirror.Spec
}

// Proc is a process the client follows.
type Proc struct {
	c         *Client
	ID        string
	Pid       int
	StartTime float64
	handler   FrameHandler

	mu         sync.Mutex
	lastSeq    int64
	lost       int64 // frames the daemon no longer had when we (re)attached
	exited     bool
	exitCode   int
	err        error
	done       chan struct{}
	spawning   bool // process.spawn not answered yet
	reattached bool // a reconnect found it on the daemon
	stageCodes []int
	timedOut   bool
	signal     int         // the exit frame's Signal
	tty        bool        // spawned with a terminal by this client
	identified bool        // Pid and StartTime are known
	earlyGone  []wire.Gone // Gone notifications read before the spawn or reattach answer was

	// awaitReplay: p was reattached from before the last frame routed to
	// the other followers of its id (Client.follow), and drops what comes
	// until the replay begins. seen is the highest seq come so far: the
	// replay's first frame is the first at or below it.
	awaitReplay bool
	seen        int64

	stdinPassed  bool // the child's stdin is the file passed as SpawnSpec.Mirror.Stdin
	outputPassed bool // the child writes to the Mirror.Stdout and Stderr passed (Mirror.Direct)
	// teed: this client passed pipes for the daemon to tee output into, so
	// a reattach after a reconnect claims the Mirrored marks: what was
	// teed is in those pipes already. Set before the spawn is sent.
	teed bool

	stdinMu   sync.Mutex
	stdinOff  int64    // the offset of our next stdin byte
	stdinBufs [][]byte // process.stdin requests' params buffers, reused
	stdinID   []byte   // ID as a JSON string
}

func newProc(c *Client, id string, h FrameHandler) *Proc {
	if h == nil {
		h = func(*wire.Frame) {}
	}
	return &Proc{c: c, ID: id, handler: h, done: make(chan struct{})}
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
	for attempt := 0; ; attempt++ {
		p := newProc(c, spec.ID, h)
		p.spawning = true
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
		err := c.callFiles(ctx, "process.spawn", params, &res, pass.files)
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
			err = c.Call(ctx, "process.spawn", params, &res)
		}
		p.stdinPassed, p.outputPassed = pass.stdin, pass.direct
		p.mu.Lock()
		p.spawning = false
		found := p.reattached
		p.mu.Unlock()
		if err == nil {
			p.identify(res.Pid, res.StartTime)
			ext.started(p)
			return p, nil
		}
		if errors.Is(err, ErrConnectionLost) && found {
			ext.started(p)
			return p, nil // the daemon had started it before the connection broke
		}
		var refused *wire.Error
		if errors.As(err, &refused) {
			c.forgetProc(p) // the daemon answered no: nothing started, nothing streams
		} else {
			c.unregister(p)
		}
		if errors.Is(err, ErrConnectionLost) && attempt == 0 && c.Err() == nil {
			continue // it never started: the reconnect did not find it
		}
		return nil, err
	}
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

// deliver hands one frame to the handler unless it was seen before, or
// skipped on purpose (a reattach from a later seq). The exit frame always
// gets through until the process is known to have exited: otherwise a
// reattach from a seq at or past it would wait for an end already passed.
func (p *Proc) deliver(f *wire.Frame) {
	p.mu.Lock()
	if p.awaitReplay {
		if f.Seq > p.seen {
			p.seen = f.Seq
			p.mu.Unlock()
			return // the other followers' subscription, before the daemon moved it
		}
		p.awaitReplay = false
	}
	if p.exited || p.err != nil || (f.Seq <= p.lastSeq && f.Stream != wire.Exit) {
		p.mu.Unlock()
		return // a replayed frame we already have, or one the caller skipped
	}
	if f.Seq > p.lastSeq+1 {
		// Frames the daemon no longer had: a replay from before its
		// firstSeq (an honestly truncated replay).
		p.lost += f.Seq - p.lastSeq - 1
	}
	p.lastSeq = max(p.lastSeq, f.Seq)
	p.mu.Unlock()
	p.handler(f)
	if f.Stream == wire.Exit {
		p.mu.Lock()
		p.exited, p.exitCode = true, f.ExitCode
		p.stageCodes = append([]int(nil), f.StageCodes...)
		p.timedOut = p.timedOut || f.TimedOut
		p.signal = f.Signal
		close(p.done)
		p.mu.Unlock()
		p.c.unregister(p)
	}
}

// settleReplay ends p's wait for its replay (Proc.awaitReplay) once the
// reattach is answered: the replay came before the answer. Still waiting,
// p saw no seq go back: the replay began right after the old subscription's
// last frame, which happens only when the daemon no longer had the frames
// before it. p then counts what it dropped as lost and goes on from there,
// and returns that seq (0 when the replay came as it should): the exit
// frame may be among what it dropped, so the caller asks for the end from
// there (askForTheEnd).
func (p *Proc) settleReplay(res wire.ReattachResult) (skippedTo int64) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if !p.awaitReplay {
		return 0
	}
	p.awaitReplay = false
	if skipped := max(p.seen, res.FirstSeq-1) - p.lastSeq; skipped > 0 {
		p.lost += skipped
		p.lastSeq += skipped
	}
	return p.lastSeq
}

// resumed records what a reconnect's reattach found.
func (p *Proc) resumed(res wire.ReattachResult) {
	p.mu.Lock()
	p.reattached = true
	p.mu.Unlock()
}

func (p *Proc) fail(err error) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.exited || p.err != nil {
		return
	}
	p.err = err
	close(p.done)
}

// identify records which process p follows, from the answer of its spawn
// or reattach, and applies the Gone notifications that were read before
// that answer was.
func (p *Proc) identify(pid int, startTime float64) {
	p.mu.Lock()
	p.Pid, p.StartTime, p.identified = pid, startTime, true
	early := p.earlyGone
	p.earlyGone = nil
	p.mu.Unlock()
	for _, g := range early {
		p.gone(g)
	}
}

// gone fails p when g names the process p follows: not a newer process
// with the same id (this client's own spawn may have replaced the one g
// names).
func (p *Proc) gone(g wire.Gone) {
	p.mu.Lock()
	if !p.identified {
		p.earlyGone = append(p.earlyGone, g)
		p.mu.Unlock()
		return
	}
	same := p.Pid == g.Pid && p.StartTime == g.StartTime
	p.mu.Unlock()
	if !same {
		return
	}
	switch g.Reason {
	case wire.GoneReplaced:
		p.fail(fmt.Errorf("process %s was replaced on the daemon by a new process with the same id before it exited", g.ID))
	default:
		p.fail(fmt.Errorf("process %s is no longer retained by the daemon (%s); its exit was not seen", g.ID, g.Reason))
	}
}

func (p *Proc) isTeed() bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.teed
}

func (p *Proc) isSpawning() bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.spawning
}

func (p *Proc) finished() bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.exited || p.err != nil
}

// LastSeq is the seq of the last frame delivered.
func (p *Proc) LastSeq() int64 {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.lastSeq
}

// Lost is the number of frames the daemon no longer retained when this
// client attached or reattached (an honestly truncated replay).
func (p *Proc) Lost() int64 {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.lost
}

// Done is closed when the exit frame arrived or following failed.
func (p *Proc) Done() <-chan struct{} { return p.done }

// Exited reports the exit code once the exit frame arrived.
func (p *Proc) Exited() (code int, ok bool) {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.exitCode, p.exited
}

// Err is why following failed (the connection was lost for good), or nil.
func (p *Proc) Err() error {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.err
}

// Wait blocks until the process exits and returns its exit code (-1 when a
// signal ended it).
func (p *Proc) Wait(ctx context.Context) (int, error) {
	select {
	case <-p.done:
	case <-ctx.Done():
		return 0, ctx.Err()
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.exited {
		return p.exitCode, nil
	}
	return 0, p.err
}

// stdinChunk keeps every process.stdin request under the daemon's 1 MiB
// line limit once base64-encoded.
const stdinChunk = 512 << 10

// stdinWindow is how many process.stdin requests of one Write are in flight
// at once, where the daemon applies them in the order sent
// (process.stdin.ordered): one at a time, a link's round trip capped the
// stream at 512 KiB per round trip (over ssh at 20 ms, 25 MB/s).
const stdinWindow = 4

// Write appends data to the process's stdin, in chunks, each with its offset,
// and returns the daemon's applied high-water mark. Over a socket, ssh or a
// WebSocket, the chunks of a large write go out several at a time.
func (p *Proc) Write(ctx context.Context, data []byte) (int64, error) {
	p.stdinMu.Lock()
	defer p.stdinMu.Unlock()
	window := 1
	if len(data) > stdinChunk && p.c.pipelinesStdin(ctx) {
		window = stdinWindow
	}
	return p.writeChunks(ctx, data, window)
}

// WriteAt writes data claiming it starts at offset: the daemon drops what it
// already applied and refuses a gap (a *wire.Error with CodeStdinGap).
func (p *Proc) WriteAt(ctx context.Context, data []byte, offset int64) (applied int64, duplicate bool, err error) {
	p.stdinMu.Lock()
	defer p.stdinMu.Unlock()
	if len(data) > stdinChunk {
		for len(data) > 0 {
			n := min(len(data), stdinChunk)
			if applied, duplicate, err = p.writeAt(ctx, data[:n], offset, false); err != nil {
				return applied, duplicate, err
			}
			offset += int64(n)
			data = data[n:]
		}
	} else if applied, duplicate, err = p.writeAt(ctx, data, offset, false); err != nil {
		return applied, duplicate, err
	}
	p.stdinOff = max(p.stdinOff, applied)
	return applied, duplicate, nil
}

// StdinPassed reports whether the child's stdin is the file this client
// passed as SpawnSpec.Mirror.Stdin, which it then reads itself: the
// daemon refuses Write, and CloseStdin changes nothing.
func (p *Proc) StdinPassed() bool { return p.stdinPassed }

// OutputPassed reports whether the child writes straight to the files
// passed as SpawnSpec.Mirror.Stdout and Stderr (Mirror.Direct): nothing of
// those streams arrives as frames.
func (p *Proc) OutputPassed() bool { return p.outputPassed }

// CloseStdin closes the process's stdin after everything written so far.
func (p *Proc) CloseStdin(ctx context.Context) error {
	if err := p.c.RequireFeature(ctx, wire.FeatureStdinClose, "closing a process's stdin"); err != nil {
		return err
	}
	p.stdinMu.Lock()
	defer p.stdinMu.Unlock()
	_, _, err := p.writeAt(ctx, nil, p.stdinOff, true)
	return err
}

func (p *Proc) writeAt(ctx context.Context, data []byte, offset int64, closeAfter bool) (int64, bool, error) {
	raw := appendStdinParams(p.stdinBuf(), p.quotedID(), data, offset, closeAfter)
	res, err := p.c.callRaw(ctx, "process.stdin", raw, nil)
	return p.stdinAnswer(raw, res, err)
}

// stdinBuf is a buffer to build a process.stdin request in.
func (p *Proc) stdinBuf() []byte {
	if n := len(p.stdinBufs); n > 0 {
		b := p.stdinBufs[n-1]
		p.stdinBufs = p.stdinBufs[:n-1]
		return b[:0]
	}
	return nil
}

// stdinAnswer decodes a process.stdin answer, and takes back the request's
// buffer raw if it may be reused: only once the call is answered, since a
// call given up on (its context ended) may still be read, or resent after
// a reconnect.
func (p *Proc) stdinAnswer(raw, res json.RawMessage, err error) (int64, bool, error) {
	var we *wire.Error
	if (err == nil || errors.As(err, &we)) && len(p.stdinBufs) < stdinWindow {
		p.stdinBufs = append(p.stdinBufs, raw)
	}
	if err != nil {
		return 0, false, err
	}
	var r wire.StdinResult
	if err := json.Unmarshal(res, &r); err != nil {
		return 0, false, fmt.Errorf("process.stdin: decode result: %w", err)
	}
	return r.Applied, r.Duplicate, nil
}

// pendingStdin is a process.stdin request sent and not yet answered.
type pendingStdin struct {
	id     uint64
	cl     *call
	raw    json.RawMessage
	data   []byte
	offset int64
	behind bool // sent while earlier ones were unanswered
}

// writeChunks is Write: data in chunks of stdinChunk, up to window requests
// in flight, sent in offset order and answered in that order (empty data
// is one empty request, which still says whether the process runs). Should
// one arrive before an earlier one all the same (resent out of turn around
// a reconnect), its gap is mended by sending it again once the earlier ones
// are answered.
func (p *Proc) writeChunks(ctx context.Context, data []byte, window int) (int64, error) {
	applied, off := p.stdinOff, p.stdinOff
	var (
		inflight []pendingStdin
		firstErr error
	)
	finish := func(r pendingStdin) {
		res, err := p.c.await(ctx, r.id, r.cl)
		a, _, err := p.stdinAnswer(r.raw, res, err)
		var we *wire.Error
		if r.behind && firstErr == nil && errors.As(err, &we) && we.Code == wire.CodeStdinGap {
			a, _, err = p.writeAt(ctx, r.data, r.offset, false)
		}
		if err != nil {
			if firstErr == nil {
				firstErr = err
			}
			return
		}
		applied = max(applied, a)
	}
	for first := true; (first || len(data) > 0) && firstErr == nil; first = false {
		if len(inflight) == window {
			finish(inflight[0])
			inflight = inflight[1:]
			continue
		}
		n := min(len(data), stdinChunk)
		raw := appendStdinParams(p.stdinBuf(), p.quotedID(), data[:n], off, false)
		id, cl, err := p.c.start(ctx, "process.stdin", raw, nil)
		if err != nil {
			firstErr = err
			break
		}
		inflight = append(inflight, pendingStdin{id: id, cl: cl, raw: raw, data: data[:n], offset: off, behind: len(inflight) > 0})
		off += int64(n)
		data = data[n:]
	}
	for _, r := range inflight {
		finish(r)
	}
	// After a failure, the next write starts from what the daemon applied:
	// anything sent beyond it and applied after all is a duplicate there.
	p.stdinOff = max(p.stdinOff, applied)
	if firstErr != nil {
		return applied, firstErr
	}
	p.stdinOff = max(p.stdinOff, off)
	return applied, nil
}

// appendStdinParams appends process.stdin's params for data at offset. It is
// the stdin hot path's encoder: base64 goes straight into the reused buffer,
// where json.Marshal would scan every character of it for escaping.
func appendStdinParams(b, quotedID, data []byte, offset int64, closeAfter bool) json.RawMessage {
	b = append(b, `{"id":`...)
	b = append(b, quotedID...)
	b = append(b, `,"data":"`...)
	b = wire.AppendBase64(b, data)
	b = append(b, `","offset":`...)
	b = strconv.AppendInt(b, offset, 10)
	if closeAfter {
		b = append(b, `,"close":true`...)
	}
	return append(b, '}')
}

func (p *Proc) quotedID() []byte {
	if p.stdinID == nil {
		p.stdinID = wire.QuoteID(p.ID)
	}
	return p.stdinID
}

// Kill signals the process group (default SIGTERM) without waiting.
func (p *Proc) Kill(ctx context.Context, signal string) error {
	params := map[string]any{"id": p.ID}
	if signal != "" {
		params["signal"] = signal
	}
	return p.c.Call(ctx, "process.kill", params, nil)
}

// KillAndWait signals the group and waits up to grace for the process to die,
// escalating to SIGKILL when escalate is set.
func (p *Proc) KillAndWait(ctx context.Context, signal string, grace time.Duration, escalate bool) (wire.KillAndWaitResult, error) {
	params := map[string]any{"id": p.ID, "escalate": escalate}
	if signal != "" {
		params["signal"] = signal
	}
	if grace > 0 {
		params["timeoutMs"] = max(grace.Milliseconds(), 1)
	}
	var res wire.KillAndWaitResult
	err := p.c.Call(ctx, "process.killAndWait", params, &res)
	return res, err
}
