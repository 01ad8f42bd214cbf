// Package client is the Go client of claustrum's protocol, for every target:
// an embedded in-process daemon, a Unix socket, any byte stream that reaches
// a daemon (an ssh bridge), or a daemon's WebSocket endpoint.
//
// It matches responses to requests by id, routes stream frames to the
// process that follows them, and survives a dropped connection: it dials
// again, reattaches every process it follows from the last seq it saw, and
// retries what is safe to retry. Stdin is always written with offsets, so a
// retried write is never applied twice and output is never lost or repeated.
package client

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"log/slog"
	"net"
	"os"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/seed5ad92d46/sous/daemon"
	"github.com/seed5ad92d46/sous/daemon/mirror"
	"github.com/seed5ad92d46/sous/daemon/wire"
)

// Options tune a Client.
type Options struct {
	// ReconnectTimeout is how long the client keeps dialing after a
	// connection drops before it gives up (default 30 s). Zero uses the
	// default; a negative value disables reconnecting.
	ReconnectTimeout time.Duration
	// Logger receives reconnect notices.
	Logger *slog.Logger

	// maxAnswer bounds a response (0: maxResponseLine); smaller in tests
	// (export_test.go).
	maxAnswer int
}

// answerLimit is the longest response the client takes.
func (o Options) answerLimit() int {
	if o.maxAnswer > 0 {
		return o.maxAnswer
	}
	return maxResponseLine
}

// DialFunc opens a new byte stream to the daemon.
type DialFunc func(ctx context.Context) (io.ReadWriteCloser, error)

// Client talks to one daemon. It is safe for concurrent use.
type Client struct {
	dial  func(ctx context.Context, recv receiver) (link, error)
	opt   Options
	local bool
	// noPassing is set once a spawn's passed mirror did not reach the
	// daemon (a relay in between): later spawns do not try again.
	noPassing atomic.Bool
	// alwaysPipelineStdin makes Write pipeline whatever the daemon
	// advertises: for the tests of how it mends gaps (export_test.go).
	alwaysPipelineStdin atomic.Bool

	mu      sync.Mutex
	cur     link          // nil while reconnecting
	ready   chan struct{} // closed when cur is usable again
	nextID  uint64
	pending map[uint64]*call
	procs   map[string]*following
	// reattaching holds, per id, a channel closed when the reattach of it
	// under way ends (lockReattach).
	reattaching map[string]chan struct{}
	features    map[string]bool
	dead        error // set when the client is closed or gave up reconnecting
	// strayed is set once a process stopped being followed before its
	// exit frame (see unregister).
	strayed bool
	closeCh chan struct{}
	// broken lists the links that broke while a reconnect was under way
	// (cur nil): the link being resumed may be one of them, and must not
	// become current once its reader is gone.
	broken []link
	// outageSince is when the connection last stopped getting anywhere:
	// the break of a link that had carried something (an answer, frames)
	// since it was resumed, or had nothing in flight. A link that breaks
	// again with calls in flight before carrying anything continues the
	// outage, so ReconnectTimeout bounds a series of reconnects that never
	// get a request through (a 700 KB stdin line on a link that always
	// breaks sooner), not just the dialling.
	outageSince time.Time
	// carried is set when the current link delivers an answer or frames.
	carried atomic.Bool
	// connected is set once a link answered a call (the first one's is
	// firstLink's ping): until then a link that breaks is not redialed,
	// as there is nothing to resume and the next dial would only fail the
	// same way (ssh's login or remote command, a bridge without a daemon).
	connected bool
}

// ErrClosed is returned by calls on a closed client.
var ErrClosed = errors.New("client closed")

// Embedded returns a client for an in-process daemon. It never reconnects:
// there is nothing in between to break.
func Embedded(srv *daemon.Server) *Client {
	c := newClient(Options{ReconnectTimeout: -1})
	c.local = true
	c.dial = func(_ context.Context, recv receiver) (link, error) { return newLocalLink(srv, recv), nil }
	l, _ := c.dial(context.Background(), c)
	c.cur = l
	c.connected = true
	close(c.ready)
	return c
}

// passed is what a spawn's request carries of its SpawnSpec.Mirror.
type passed struct {
	files  []*os.File // with the request, in the order of params' "mirror"
	stdin  bool       // a stdin is among them
	direct bool       // the output among them is the child's own
	tee    bool       // output pipes among them, for the daemon to tee into
}

// mirror arranges spec.Mirror for the spawn whose params are given: the
// descriptors to pass with the request, named in params' "mirror"
// (process.spawn.mirror, and .stdin and .direct for those). An embedded
// daemon and a daemon on a Unix socket can take them; over other links, or
// once a relay dropped them (noPassing), the spawn is unmirrored and its
// stdin the daemon's pipe. Without .direct, output is teed to the pipes
// among Stdout and Stderr, and other files are not passed.
func (c *Client) mirror(ctx context.Context, spec SpawnSpec, params map[string]any) passed {
	if spec.Mirror == (mirror.Spec{}) || c.noPassing.Load() {
		return passed{}
	}
	c.mu.Lock()
	l := c.cur
	c.mu.Unlock()
	if fp, ok := l.(filePasser); !ok || !fp.passesFiles() {
		return passed{}
	}
	if ok, err := c.HasFeature(ctx, wire.FeatureSpawnMirror); err != nil || !ok {
		return passed{} // the spawn reports a lost connection itself
	}
	has := func(feature string) bool {
		ok, err := c.HasFeature(ctx, feature)
		return err == nil && ok && !spec.TTY
	}
	var p passed
	p.direct = spec.Mirror.Direct && has(wire.FeatureSpawnMirrorDirect)
	var names []string
	for _, m := range []struct {
		name string
		f    *os.File
	}{{"stdout", spec.Mirror.Stdout}, {"stderr", spec.Mirror.Stderr}, {"stdin", spec.Mirror.Stdin}} {
		switch {
		case m.f == nil:
			continue
		case m.name == "stdin":
			if !has(wire.FeatureSpawnMirrorStdin) {
				continue // written through process.stdin as usual
			}
			p.stdin = true
		case !p.direct && !mirror.IsPipe(m.f):
			continue // a tee needs a pipe; the frames carry this stream
		}
		names = append(names, m.name)
		p.files = append(p.files, m.f)
		p.tee = p.tee || m.name != "stdin" && !p.direct
	}
	if names != nil {
		params["mirror"] = names
		if p.direct {
			params["direct"] = true
		}
	}
	return p
}

// mirrorRefused reports whether a spawn failed on its passed mirror: the
// descriptors did not arrive, so nothing was started.
func mirrorRefused(err error) bool {
	var we *wire.Error
	return errors.As(err, &we) && we.Code == wire.CodeInvalidParams && strings.HasPrefix(we.Message, "mirror: ")
}

// Dial connects to a daemon through dial, sending token with every request.
func Dial(ctx context.Context, dial DialFunc, token string, opt Options) (*Client, error) {
	return dialLinks(ctx, token, func(ctx context.Context, recv receiver) (link, error) {
		rwc, err := dial(ctx)
		if err != nil {
			return nil, err
		}
		return newStreamLink(rwc, token, recv, opt.answerLimit()), nil
	}, opt)
}

// ErrNoToken and ErrTokenRefused say why a daemon turned a client away: it
// gave no token, or not the daemon's. The messages that wrap them advise
// the CLI's ways to give one; a caller with other ways (a recipe's
// host(token=...)) tells its own.
var (
	ErrNoToken      = errors.New("the daemon requires a token and none was given")
	ErrTokenRefused = errors.New("daemon refused the token")
)

// dialLinks makes a client whose connections come from dial: the first one
// now, the next ones when a connection drops. Only the link differs between
// transports; reconnecting, reattaching and stdin offsets are the client's.
// A refusal when no token was given (token is the links') is ErrNoToken.
func dialLinks(ctx context.Context, token string, dial func(ctx context.Context, recv receiver) (link, error), opt Options) (*Client, error) {
	c, err := firstLink(ctx, dial, opt)
	if token == "" && errors.Is(err, ErrTokenRefused) {
		return nil, fmt.Errorf("%w: set --token-file, SOUS_TOKEN or CLAUDE_RPC_TOKEN", ErrNoToken)
	}
	return c, err
}

// firstLink is dialLinks before the token check: the first connection,
// proven by a ping.
func firstLink(ctx context.Context, dial func(ctx context.Context, recv receiver) (link, error), opt Options) (*Client, error) {
	c := newClient(opt)
	c.dial = dial
	l, err := c.dial(ctx, c)
	if err != nil {
		return nil, err
	}
	c.cur = l
	close(c.ready)
	// Prove the daemon answers (and the token is right) before handing out
	// the client: a wrong token should fail here, in one clear line.
	if err := c.Call(ctx, "server.ping", nil, nil); err != nil {
		c.Close()
		var we *wire.Error
		var nc *notConnectedError
		switch {
		case errors.As(err, &we) && we.Code == wire.CodeUnauthorized:
			return nil, fmt.Errorf("%w (set --token-file, SOUS_TOKEN or CLAUDE_RPC_TOKEN to the daemon's token): %w", ErrTokenRefused, err)
		case errors.As(err, &nc):
			return nil, nc
		}
		return nil, err
	}
	return c, nil
}

// notConnectedError is why a first connection broke before the daemon
// answered: ssh that could not log in or run the bridge (in ssh's own
// words), a bridge with no daemon behind it, a socket closed at once.
type notConnectedError struct{ cause error }

func (e *notConnectedError) Error() string {
	const closed = "the connection closed before the daemon answered"
	switch {
	case e.cause == io.ErrUnexpectedEOF || e.cause == io.EOF:
		return closed
	case errors.Is(e.cause, io.ErrUnexpectedEOF), isConnErr(e.cause):
		return closed + ": " + e.cause.Error()
	}
	return e.cause.Error() // ssh's message says it all
}

func (e *notConnectedError) Unwrap() error { return e.cause }

// DialUnix connects to a daemon's Unix socket.
func DialUnix(ctx context.Context, path, token string, opt Options) (*Client, error) {
	dial := func(ctx context.Context) (io.ReadWriteCloser, error) {
		var d net.Dialer
		conn, err := d.DialContext(ctx, "unix", path)
		if err != nil {
			return nil, fmt.Errorf("connect to daemon at %s: %w", path, err)
		}
		return conn, nil
	}
	c, err := Dial(ctx, dial, token, opt)
	var nc *notConnectedError
	if errors.As(err, &nc) {
		return nil, fmt.Errorf("connect to daemon at %s: %w", path, err)
	}
	return c, err
}

func newClient(opt Options) *Client {
	if opt.ReconnectTimeout == 0 {
		opt.ReconnectTimeout = 30 * time.Second
	}
	if opt.Logger == nil {
		opt.Logger = slog.New(slog.DiscardHandler)
	}
	return &Client{
		opt:         opt,
		ready:       make(chan struct{}),
		pending:     make(map[uint64]*call),
		procs:       make(map[string]*following),
		reattaching: make(map[string]chan struct{}),
		closeCh:     make(chan struct{}),
	}
}

// Close drops the connection. Processes on the daemon keep running (an
// embedded daemon is stopped by its owner).
func (c *Client) Close() error {
	c.mu.Lock()
	if c.dead != nil {
		c.mu.Unlock()
		return nil
	}
	c.dead = ErrClosed
	l := c.cur
	c.cur = nil
	close(c.closeCh)
	c.mu.Unlock()
	if l != nil {
		l.close()
	}
	c.failAll(ErrClosed)
	return nil
}

// call is one request awaiting its response.
type call struct {
	method string
	params json.RawMessage
	retry  bool       // safe to send again after a reconnect
	files  []*os.File // passed with the request (filePasser); never resent
	via    link       // the link it was sent on
	sendMu sync.Mutex // held while resend sends it again (see await)
	done   chan struct{}
	result json.RawMessage
	err    error
}

// retryable lists the methods that are safe to resend when the connection
// drops before their response: reads, and writes that are idempotent
// (stdin carries an offset; kill and reattach converge).
var retryable = map[string]bool{
	"server.ping": true, "server.version": true, "server.capabilities": true,
	"files.list": true, "files.validate": true, "files.stat": true, "files.read": true,
	"git.info": true, "git.status": true, "git.list_branches": true,
	"process.stdin": true, "process.kill": true, "process.killAndWait": true, "process.list": true,
	"process.resize": true, // setting a size twice is setting it once
}

// ErrConnectionLost is wrapped by calls that were in flight when the
// connection dropped and cannot safely be repeated.
var ErrConnectionLost = errors.New("connection to the daemon lost")

// Call sends method with params (any JSON-marshalable value, or nil) and
// decodes the result into result (nil to discard). A JSON-RPC error comes
// back as a *wire.Error.
func (c *Client) Call(ctx context.Context, method string, params, result any) error {
	return c.callFiles(ctx, method, params, result, nil)
}

// callFiles is Call passing files with the request, which needs a link that
// can (passesFiles).
func (c *Client) callFiles(ctx context.Context, method string, params, result any, files []*os.File) error {
	var raw json.RawMessage
	if params != nil {
		b, err := json.Marshal(params)
		if err != nil {
			return fmt.Errorf("%s: encode params: %w", method, err)
		}
		raw = b
	}
	res, err := c.callRaw(ctx, method, raw, files)
	if err != nil {
		return err
	}
	if result != nil {
		if err := decodeResult(res, result); err != nil {
			return fmt.Errorf("%s: decode result: %w", method, err)
		}
	}
	return nil
}

// decodeResult decodes a call's result into v. The result is the
// caller's alone (see receiver), and valid JSON already (its link checked
// the line, or the daemon in this process wrote it). So a type that can
// decode where the bytes lie gets them (files.read's answer is a whole
// file, which then stays in the one buffer it was read into), and one that
// decodes itself gets them without json.Unmarshal's validating pass first.
func decodeResult(raw json.RawMessage, v any) error {
	switch d := v.(type) {
	case interface{ DecodeOwned([]byte) error }:
		return d.DecodeOwned(raw)
	case json.Unmarshaler:
		return d.UnmarshalJSON(raw)
	}
	return json.Unmarshal(raw, v)
}

func (c *Client) callRaw(ctx context.Context, method string, params json.RawMessage, files []*os.File) (json.RawMessage, error) {
	id, cl, err := c.start(ctx, method, params, files)
	if err != nil {
		return nil, err
	}
	return c.await(ctx, id, cl)
}

// start sends a call without waiting for its answer (await does). Calls
// started one after the other are sent in that order.
func (c *Client) start(ctx context.Context, method string, params json.RawMessage, files []*os.File) (uint64, *call, error) {
	cl := &call{method: method, params: params, retry: retryable[method] && files == nil, files: files, done: make(chan struct{})}
	c.mu.Lock()
	c.nextID++
	id := c.nextID
	c.pending[id] = cl
	c.mu.Unlock()
	if err := c.transmit(ctx, id, cl); err != nil {
		c.forget(id)
		return 0, nil, err
	}
	return id, cl, nil
}

// await waits for the answer to a call start sent. Once it returns, the
// call's params are read no more (a resend after a reconnect is over or
// will not happen), so the caller may reuse their buffer.
func (c *Client) await(ctx context.Context, id uint64, cl *call) (json.RawMessage, error) {
	defer func() {
		c.forget(id)
		cl.sendMu.Lock() // waits out a resend under way
		cl.sendMu.Unlock()
	}()
	c.mu.Lock()
	via := cl.via
	c.mu.Unlock()
	if r, ok := via.(selfReader); ok {
		r.readUntil(ctx, cl.done)
	}
	select {
	case <-cl.done:
		return cl.result, cl.err
	case <-ctx.Done():
		return nil, fmt.Errorf("%s: %w", cl.method, ctx.Err())
	}
}

// selfReader is a link on which a caller can read its own answer (see
// streamLink): checked before a call goes out on it (probe), read by the
// caller while it waits (readUntil), and told when a call goes out whose
// waiter will not read (wakeReader).
type selfReader interface {
	readUntil(ctx context.Context, done <-chan struct{})
	probe() bool
	wakeReader()
}

// quiet implements readerHints.
func (c *Client) quiet() bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	return len(c.procs) == 0
}

// idle implements readerHints.
func (c *Client) idle() bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	return len(c.procs) == 0 && len(c.pending) == 0 && !c.strayed
}

func (c *Client) forget(id uint64) {
	c.mu.Lock()
	delete(c.pending, id)
	c.mu.Unlock()
}

// transmit sends cl on the current link, waiting for a reconnect if one is
// under way.
func (c *Client) transmit(ctx context.Context, id uint64, cl *call) error {
	for {
		c.mu.Lock()
		if c.dead != nil {
			err := c.dead
			c.mu.Unlock()
			return fmt.Errorf("%s: %w", cl.method, err)
		}
		l, ready := c.cur, c.ready
		c.mu.Unlock()
		if l == nil {
			select {
			case <-ready:
				continue
			case <-ctx.Done():
				return fmt.Errorf("%s: %w", cl.method, ctx.Err())
			}
		}
		// A call that will be resent needs no probe: should the link have
		// broken, the call goes again on the next one. The probe's peek is
		// a syscall per call, on top of the write and the reads. (cl.retry,
		// not the method's retryability: a call carrying files is not
		// resent, so it must not go out on a dead link.)
		if r, ok := l.(selfReader); ok && !cl.retry && !r.probe() {
			continue // it broke while nobody read it: wait for the next one
		}
		c.mu.Lock()
		if c.cur != l {
			c.mu.Unlock()
			continue // replaced meanwhile
		}
		cl.via = l
		c.mu.Unlock()
		send := l.send
		if cl.files != nil {
			fp, ok := l.(filePasser)
			if !ok || !fp.passesFiles() {
				return fmt.Errorf("%s: this connection cannot pass descriptors (a Unix socket can)", cl.method)
			}
			send = func(id uint64, method string, params json.RawMessage) error {
				return fp.sendFiles(id, method, params, cl.files)
			}
		}
		if err := send(id, cl.method, cl.params); err != nil {
			if !isConnErr(err) {
				return err
			}
			// The reader will notice the break and reconnect; the call is
			// resent (or failed) from there.
		}
		return nil
	}
}

func isConnErr(err error) bool {
	// EPIPE and os.ErrClosed: an ssh link writes to the ssh process's
	// stdin, a pipe, which fails that way once ssh is gone.
	return errors.Is(err, net.ErrClosed) || errors.Is(err, io.ErrClosedPipe) || errors.Is(err, io.EOF) ||
		errors.Is(err, syscall.EPIPE) || errors.Is(err, syscall.ECONNRESET) || errors.Is(err, os.ErrClosed) ||
		errors.As(err, new(*net.OpError))
}

// response implements receiver.
func (c *Client) response(l link, id uint64, result json.RawMessage, err error) {
	c.mu.Lock()
	cl := c.pending[id]
	if cl == nil || cl.via != l {
		c.mu.Unlock()
		return // a response to a call already answered or abandoned
	}
	delete(c.pending, id)
	if l == c.cur {
		c.carried.Store(true) // not the answers of a resume: those come before it is current
		c.connected = true
	}
	c.mu.Unlock()
	cl.result, cl.err = result, err
	close(cl.done)
}

// frames implements receiver.
func (c *Client) frames(l link, procID string, frames []wire.Frame) {
	if len(frames) == 0 {
		return
	}
	if !c.carried.Load() {
		c.mu.Lock()
		if l == c.cur {
			c.carried.Store(true)
		}
		c.mu.Unlock()
	}
	// Usually one follower (see following).
	for _, p := range c.followers(procID, frames[len(frames)-1].Seq) {
		for i := range frames {
			p.deliver(&frames[i])
		}
	}
}

// gone implements receiver: the daemon discarded a process this client
// follows (process.gone) before its exit frame.
func (c *Client) gone(_ link, g wire.Gone) {
	c.mu.Lock()
	f := c.procs[g.ID]
	c.mu.Unlock()
	if f != nil {
		for _, p := range f.procs {
			p.gone(g)
		}
	}
}

// closed implements receiver: the link broke.
func (c *Client) closed(l link, err error) {
	c.mu.Lock()
	if c.cur != l || c.dead != nil {
		// Not the current link (one being resumed): fail what was sent on it
		// so the resume notices and dials again, and remember it broke in
		// case nothing was in flight on it.
		if c.cur == nil && c.dead == nil {
			c.broken = append(c.broken, l)
		}
		var stranded []*call
		for id, cl := range c.pending {
			if cl.via == l {
				stranded = append(stranded, cl)
				delete(c.pending, id)
			}
		}
		c.mu.Unlock()
		for _, cl := range stranded {
			cl.err = fmt.Errorf("%s: %w: %v", cl.method, ErrConnectionLost, err)
			close(cl.done)
		}
		return
	}
	c.cur = nil
	c.ready = make(chan struct{})
	if !c.connected {
		// A connection that never worked once is not a dropped one: fail
		// now, with its own error, as a dial that fails does.
		c.mu.Unlock()
		c.giveUp(&notConnectedError{err})
		return
	}
	if c.carried.Swap(false) || len(c.pending) == 0 || c.outageSince.IsZero() {
		// It got something through, or had nothing to get through (a
		// quiet process for an hour is no outage): a new outage begins.
		c.outageSince = time.Now()
	}
	outageSince := c.outageSince
	c.mu.Unlock()
	if c.opt.ReconnectTimeout < 0 {
		c.giveUp(fmt.Errorf("%w: %v", ErrConnectionLost, err))
		return
	}
	c.opt.Logger.Warn("connection to daemon lost; reconnecting", "err", err)
	go c.reconnect(err, outageSince)
}

// reconnect dials until it succeeds or ReconnectTimeout passes since the
// outage began (see outageSince), then reattaches every followed process
// from its last seq and resends the calls that are safe to resend.
func (c *Client) reconnect(cause error, outageSince time.Time) {
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	go func() {
		select {
		case <-c.closeCh:
			cancel()
		case <-ctx.Done():
		}
	}()
	// The give-up deadline and the backoff restart whenever an attempt made
	// progress (frames arrived while resuming): a flaky link that keeps
	// moving data is worth staying on.
	delay := 20 * time.Millisecond
	deadline := outageSince.Add(c.opt.ReconnectTimeout)
	var lastErr error // the last attempt's own failure, not the deadline's
	for {
		if time.Now().After(deadline) {
			if lastErr == nil {
				lastErr = errors.New("every new connection broke before a request got through")
			}
			c.giveUp(fmt.Errorf("%w (%v); gave up reconnecting after %s: %v", ErrConnectionLost, cause, c.opt.ReconnectTimeout, lastErr))
			return
		}
		before := c.progress()
		actx, acancel := context.WithDeadline(ctx, deadline)
		l, err := c.dial(actx, c)
		if err == nil {
			if err = c.resume(actx, l); err == nil {
				acancel()
				return
			}
			l.close()
		}
		if err != nil && (lastErr == nil || actx.Err() == nil) {
			lastErr = err
		}
		acancel()
		if errors.Is(err, fs.ErrNotExist) {
			// A Unix socket that no longer exists is a daemon that stopped
			// (it removes its socket first) or was never restarted there;
			// what it ran went with it, so there is nothing to wait for.
			c.giveUp(fmt.Errorf("%w (%v); the daemon is gone: %v", ErrConnectionLost, cause, err))
			return
		}
		if c.progress() != before {
			delay = 20 * time.Millisecond
			deadline = time.Now().Add(c.opt.ReconnectTimeout)
			c.mu.Lock()
			c.outageSince = time.Now()
			c.mu.Unlock()
			continue
		}
		if ctx.Err() != nil || time.Now().After(deadline) {
			c.giveUp(fmt.Errorf("%w (%v); gave up reconnecting after %s: %v", ErrConnectionLost, cause, c.opt.ReconnectTimeout, lastErr))
			return
		}
		select {
		case <-ctx.Done():
		case <-time.After(delay):
		}
		delay = min(2*delay, time.Second)
	}
}

// progress sums the last seqs of followed processes; it changes whenever
// frames are delivered.
func (c *Client) progress() int64 {
	var sum int64
	for _, p := range c.allProcs() {
		sum += p.LastSeq()
	}
	return sum
}

// resume brings a fresh link into service.
func (c *Client) resume(ctx context.Context, l link) error {
	c.mu.Lock()
	byID := make(map[string][]*Proc, len(c.procs))
	for id, f := range c.procs {
		byID[id] = f.procs
	}
	c.mu.Unlock()

	// Reattach on the new link before anyone else uses it, so replayed
	// frames are routed and deduplicated by seq: once per id, from the
	// earliest seq any of its followers needs.
	for id, procs := range byID {
		live := slices.DeleteFunc(slices.Clone(procs), (*Proc).finished)
		if len(live) == 0 {
			continue
		}
		fromSeq := live[0].LastSeq()
		mirrored := false
		for _, p := range live {
			fromSeq = min(fromSeq, p.LastSeq())
			mirrored = mirrored || p.isTeed()
		}
		var res wire.ReattachResult
		params := map[string]any{"id": id, "fromSeq": fromSeq, "notifyGone": true}
		if mirrored {
			params["mirrored"] = true // see wire.ProcessParams.Mirrored
		}
		call := func(params map[string]any, res *wire.ReattachResult) error {
			return c.callOn(ctx, l, "process.reattach", params, res)
		}
		if err := call(params, &res); err != nil {
			return err
		}
		if res.Found {
			if err := askForTheEnd(call, params, fromSeq, res); err != nil {
				return err
			}
		}
		for _, p := range live {
			switch {
			case res.Found:
				p.resumed(res)
			case p.isSpawning():
				// its spawn never reached the daemon: Spawn sends it again
			default:
				p.fail(fmt.Errorf("process %s is gone from the daemon after reconnecting (was the daemon restarted?)", p.ID))
			}
		}
	}

	c.mu.Lock()
	if c.dead != nil {
		c.mu.Unlock()
		return c.dead
	}
	if slices.Contains(c.broken, l) {
		// It broke after its last reattach answered: its reader is gone, so
		// as the current link it would leave the client waiting forever.
		c.broken = nil
		c.mu.Unlock()
		return fmt.Errorf("%w: the new connection broke while resuming", ErrConnectionLost)
	}
	c.broken = nil
	c.cur = l
	close(c.ready)
	var resend []uint64
	var lost []*call
	for id, cl := range c.pending {
		if cl.via == l || cl.via == nil { // nil: not sent yet; transmit will use l
			continue
		}
		if cl.retry {
			resend = append(resend, id)
			cl.via = l
		} else {
			lost = append(lost, cl)
			delete(c.pending, id)
		}
	}
	c.mu.Unlock()
	c.opt.Logger.Info("reconnected to daemon", "processes", len(byID), "resent", len(resend))

	for _, cl := range lost {
		cl.err = fmt.Errorf("%s: %w while the call was in flight; it may or may not have taken effect", cl.method, ErrConnectionLost)
		close(cl.done)
	}
	// In the order they were first sent: process.stdin requests in flight
	// together must reach the daemon in offset order.
	slices.Sort(resend)
	for _, id := range resend {
		c.mu.Lock()
		cl := c.pending[id]
		c.mu.Unlock()
		if cl != nil {
			c.resend(l, id, cl)
		}
	}
	return nil
}

// resend sends a call again on a new link, unless it was answered meanwhile:
// its waiter may then be reusing the params' buffer (await waits for a
// resend under way to finish before it returns).
func (c *Client) resend(l link, id uint64, cl *call) {
	cl.sendMu.Lock()
	defer cl.sendMu.Unlock()
	c.mu.Lock()
	still := c.pending[id] == cl
	c.mu.Unlock()
	if still {
		l.send(id, cl.method, cl.params)
		if r, ok := l.(selfReader); ok {
			r.wakeReader() // the waiter is past readUntil: the reader goroutine must read the answer
		}
	}
}

// callOn makes a call on a specific link (used while resuming, before the
// link is current).
func (c *Client) callOn(ctx context.Context, l link, method string, params, result any) error {
	raw, err := json.Marshal(params)
	if err != nil {
		return err
	}
	cl := &call{method: method, params: raw, via: l, done: make(chan struct{})}
	c.mu.Lock()
	c.nextID++
	id := c.nextID
	c.pending[id] = cl
	c.mu.Unlock()
	defer func() {
		c.mu.Lock()
		delete(c.pending, id)
		c.mu.Unlock()
	}()
	if err := l.send(id, method, raw); err != nil {
		return err
	}
	if r, ok := l.(selfReader); ok {
		r.readUntil(ctx, cl.done)
	}
	select {
	case <-cl.done:
		if cl.err != nil {
			return cl.err
		}
		return decodeResult(cl.result, result)
	case <-ctx.Done():
		return ctx.Err()
	}
}

// giveUp fails the client for good.
func (c *Client) giveUp(err error) {
	c.mu.Lock()
	if c.dead == nil {
		c.dead = err
		close(c.ready)
	}
	c.broken = nil
	c.mu.Unlock()
	c.opt.Logger.Error("daemon connection lost", "err", err)
	c.failAll(err)
}

func (c *Client) failAll(err error) {
	c.mu.Lock()
	calls := c.pending
	c.pending = make(map[uint64]*call)
	c.mu.Unlock()
	procs := c.allProcs()
	for _, cl := range calls {
		cl.err = fmt.Errorf("%s: %w", cl.method, err)
		close(cl.done)
	}
	for _, p := range procs {
		p.fail(err)
	}
}

// Err is the reason the client stopped working, or nil.
func (c *Client) Err() error {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.dead
}

// HasFeature reports whether the daemon advertises an extension in
// server.capabilities.features. The answer is fetched once.
func (c *Client) HasFeature(ctx context.Context, name string) (bool, error) {
	c.mu.Lock()
	f := c.features
	c.mu.Unlock()
	if f == nil {
		var caps wire.CapabilitiesResult
		if err := c.Call(ctx, "server.capabilities", nil, &caps); err != nil {
			return false, err
		}
		f = make(map[string]bool, len(caps.Features))
		for _, name := range caps.Features {
			f[name] = true
		}
		for _, m := range caps.Methods {
			f["method:"+m] = true
		}
		c.mu.Lock()
		c.features = f
		c.mu.Unlock()
	}
	return f[name], nil
}

// RequireFeature fails with a message naming the extension when the daemon
// lacks it.
func (c *Client) RequireFeature(ctx context.Context, name, what string) error {
	ok, err := c.HasFeature(ctx, name)
	if err != nil {
		return err
	}
	if !ok {
		return fmt.Errorf("%s needs the daemon extension %q, which this daemon does not advertise (upgrade it or use the embedded daemon)", what, name)
	}
	return nil
}

// pipelinesStdin reports whether a Write may keep several process.stdin
// requests in flight: over a link with a round trip (not the embedded
// daemon, which answers at once and runs each call on its own goroutine),
// to a daemon that applies them in the order sent.
func (c *Client) pipelinesStdin(ctx context.Context) bool {
	if c.local {
		return false
	}
	if c.alwaysPipelineStdin.Load() {
		return true
	}
	ok, err := c.HasFeature(ctx, wire.FeatureStdinOrdered)
	return err == nil && ok
}

// Local reports whether the daemon runs in this process.
func (c *Client) Local() bool { return c.local }
