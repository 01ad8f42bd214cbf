package client

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"runtime"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"golang.org/x/sys/unix"

	"github.com/seed5ad92d46/sous/daemon"
	"github.com/seed5ad92d46/sous/daemon/wire"
)

// link is one connection to a daemon. The client owns at most one at a time
// and replaces it when it breaks.
type link interface {
	// send transmits one request. The response arrives through the
	// receiver given when the link was made.
	send(id uint64, method string, params json.RawMessage) error
	close()
}

// receiver is what a link feeds. Frames handed to frames are valid only
// during the call: their Data may be reused afterwards. A result handed
// to response is the receiver's to keep.
type receiver interface {
	response(l link, id uint64, result json.RawMessage, err error)
	frames(l link, procID string, frames []wire.Frame)
	gone(l link, g wire.Gone)
	closed(l link, err error)
}

// ---- NDJSON over a byte stream (Unix socket, ssh bridge) ----

// streamLink speaks NDJSON over any byte stream.
//
// One goroutine at a time reads the stream and dispatches what it reads: it
// holds the reading role. Usually that is the link's own reader goroutine.
// But over a Unix socket, while the client follows no process, a caller
// waiting for its answer reads the stream itself (readUntil), and the reader
// goroutine parks while nothing at all is expected. A round trip then wakes
// one goroutine, the caller, where handing each answer over from the reader
// goroutine woke a second one on the other CPU: client.Call took 40-46 µs
// against 20-23 µs for a raw round trip to the same daemon (three
// alternated runs), and takes 23-29 µs reading directly.
type streamLink struct {
	rwc       io.ReadWriteCloser
	recv      receiver
	enc       requestEncoder
	maxAnswer int // the longest line taken (maxResponseLine)
	// uc is rwc as a Unix socket, which callers may read (it can be peeked,
	// and a read on it interrupted by a deadline); nil for other streams,
	// which only the reader goroutine reads.
	uc    *net.UnixConn
	hints readerHints // recv's, or nil: the reader goroutine never parks

	closeOnce sync.Once

	// The reading role's state, under rmu. The holder owns r, d and carry.
	rmu     sync.Mutex
	reading bool          // the role is held
	parked  bool          // the reader goroutine waits on wake
	wake    chan struct{} // hands the parked reader goroutine the role (or the news that the link ended)
	ended   bool          // a read failed: closed was reported, nobody reads again
	closing bool          // close was called: the reader goroutine reads on to the failure
	r       *bufio.Reader
	d       lineDispatcher
	carry   gatherer // a line read in parts: one too long for r, or one a deadline cut
	carried bool     // carry holds a whole line, returned last time
	owned   bool     // the line returned last is its reader's to keep
	// skipping: the line being read is over maxAnswer; carry holds
	// its start, and the rest is read to its end and dropped.
	skipping bool

	selfReads atomic.Int64 // answers their callers read themselves (for the tests)
}

// readerHints tells a link whether anyone expects what it reads.
type readerHints interface {
	// quiet reports that no process is followed: nothing arrives but
	// answers to calls, so a caller may read its own.
	quiet() bool
	// idle reports that nothing is expected at all: no process is followed
	// and no call awaits its answer.
	idle() bool
}

func newStreamLink(rwc io.ReadWriteCloser, token string, recv receiver, maxAnswer int) *streamLink {
	l := &streamLink{rwc: rwc, recv: recv, enc: newRequestEncoder(token, '\n'), maxAnswer: maxAnswer,
		r: bufio.NewReaderSize(rwc, 256<<10), wake: make(chan struct{}, 1), reading: true}
	if uc, ok := rwc.(*net.UnixConn); ok {
		l.uc = uc
		l.hints, _ = recv.(readerHints)
	}
	go l.read()
	return l
}

func (l *streamLink) send(id uint64, method string, params json.RawMessage) error {
	return l.enc.send(id, method, params, func(b []byte) error {
		if _, err := l.rwc.Write(b); err != nil {
			l.rwc.Close()
			return err
		}
		return nil
	})
}

// filePasser is a link that can pass descriptors with a request: the
// embedded daemon's, and a stream link over a Unix socket (SCM_RIGHTS).
// The caller keeps its files; the daemon gets copies.
type filePasser interface {
	passesFiles() bool
	sendFiles(id uint64, method string, params json.RawMessage, files []*os.File) error
}

// passesFiles reports whether the stream is a Unix socket.
func (l *streamLink) passesFiles() bool {
	_, ok := l.rwc.(*net.UnixConn)
	return ok
}

// sendFiles sends a request with files attached to its first byte, in one
// sendmsg (the daemon binds descriptors to the line that byte belongs to;
// should the kernel take only part of the line, the rest follows plainly).
func (l *streamLink) sendFiles(id uint64, method string, params json.RawMessage, files []*os.File) error {
	uc := l.rwc.(*net.UnixConn) // passesFiles said so
	// Through Control, not Fd, which would switch a non-blocking file
	// (and whoever shares its description) to blocking.
	fds := make([]int, len(files))
	for i, f := range files {
		rc, err := f.SyscallConn()
		if err != nil {
			return fmt.Errorf("%s: pass %s: %w", method, f.Name(), err)
		}
		_ = rc.Control(func(fd uintptr) { fds[i] = int(fd) })
	}
	return l.enc.send(id, method, params, func(b []byte) error {
		n, _, err := uc.WriteMsgUnix(b, unix.UnixRights(fds...), nil)
		if err == nil && n < len(b) {
			_, err = uc.Write(b[n:])
		}
		runtime.KeepAlive(files)
		if err != nil {
			l.rwc.Close()
		}
		return err
	})
}

// requestEncoder writes a link's requests one at a time into a buffer it
// reuses: what every encoded link shares.
type requestEncoder struct {
	qtoken []byte // the token as a JSON string, quoted once
	end    []byte // what follows each request: a line end, or nothing for a message
	mu     sync.Mutex
	buf    []byte
}

func newRequestEncoder(token string, end ...byte) requestEncoder {
	return requestEncoder{qtoken: appendJSONString(nil, token), end: end}
}

// send encodes one request and hands it to write, under the encoder's lock
// so that requests never interleave.
func (e *requestEncoder) send(id uint64, method string, params json.RawMessage, write func([]byte) error) error {
	e.mu.Lock()
	defer e.mu.Unlock()
	b, err := appendRequest(e.buf[:0], id, method, params, e.qtoken)
	if err == nil {
		b = append(b, e.end...)
		err = write(b)
	}
	e.buf = b
	if cap(e.buf) > 4<<20 {
		e.buf = nil // do not pin a huge buffer after one big write
	}
	return err
}

// appendRequest appends one request, without a line end, and refuses one
// the daemon would not read (over its 1 MiB cap). qtoken is the token
// already quoted as a JSON string.
func appendRequest(b []byte, id uint64, method string, params json.RawMessage, qtoken []byte) ([]byte, error) {
	b = append(b, `{"jsonrpc":"2.0","id":`...)
	b = strconv.AppendUint(b, id, 10)
	b = append(b, `,"method":`...)
	b = appendJSONString(b, method)
	if params != nil {
		b = append(b, `,"params":`...)
		b = append(b, params...)
	}
	b = append(b, `,"auth":`...)
	b = append(b, qtoken...)
	b = append(b, '}')
	if len(b) > wire.MaxLine {
		return b, fmt.Errorf("%s: request of %d bytes exceeds the daemon's 1 MiB line limit", method, len(b))
	}
	return b, nil
}

// appendJSONString appends s as a JSON string. Method names need no
// escaping, so they skip the encoder.
func appendJSONString(b []byte, s string) []byte {
	for i := 0; i < len(s); i++ {
		if c := s[i]; c < 0x20 || c >= 0x80 || c == '"' || c == '\\' || c == '<' || c == '>' || c == '&' {
			q, _ := json.Marshal(s)
			return append(b, q...)
		}
	}
	b = append(b, '"')
	b = append(b, s...)
	return append(b, '"')
}

func (l *streamLink) close() {
	l.closeOnce.Do(func() { l.rwc.Close() })
	// A parked reader goroutine would wait forever: end it. (A goroutine
	// reading fails on the closed stream and reports it.)
	l.rmu.Lock()
	l.closing = true
	l.ensureReader()
	l.rmu.Unlock()
}

// maxResponseLine bounds a response line from the daemon (files.read of a
// large file is the biggest legitimate one).
const maxResponseLine = 256 << 20

// ErrAnswerTooLarge fails a call whose answer is longer than the client
// takes (256 MiB).
var ErrAnswerTooLarge = errors.New("the daemon's answer is longer than this client takes")

// oversizeLine is a line over limit bytes, skipped to its end: prefix is
// its start, where a response has its id.
type oversizeLine struct {
	prefix []byte
	limit  int
}

func (e *oversizeLine) Error() string {
	return fmt.Sprintf("daemon sent a line over %d bytes", e.limit)
}

// oversizePrefix is how much of an oversize line is kept to find its id.
const oversizePrefix = 256

// answerOversized handles a read that failed with err. A line too long to
// take (*oversizeLine), skipped by the reader, fails the call it answers
// with ErrAnswerTooLarge, and the link, still in step, goes on (nil):
// resending the call on a new connection, as a link that failed would,
// only brought the same answer again, forever. Any other error, and an
// oversize line with no id at its start (a frame), is returned: the link
// fails.
func answerOversized(l link, recv receiver, err error) error {
	var o *oversizeLine
	if !errors.As(err, &o) {
		return err
	}
	id, _, ok := cutResponseID(o.prefix)
	if !ok {
		return o
	}
	recv.response(l, id, nil, fmt.Errorf("%w (%d MiB)", ErrAnswerTooLarge, o.limit>>20))
	return nil
}

// cutResponseID reads the id at the start of a response in the daemon's
// own layout, {"jsonrpc":"2.0","id":N,...}, and returns what follows it.
func cutResponseID(line []byte) (id uint64, rest []byte, ok bool) {
	rest, found := bytes.CutPrefix(line, []byte(`{"jsonrpc":"2.0","id":`))
	if !found {
		return 0, nil, false
	}
	n := 0
	for n < len(rest) && n < 20 && rest[n] >= '0' && rest[n] <= '9' {
		n++
	}
	if n == 0 || (n > 1 && rest[0] == '0') {
		return 0, nil, false
	}
	id, err := strconv.ParseUint(string(rest[:n]), 10, 64)
	if err != nil {
		return 0, nil, false
	}
	return id, rest[n:], true
}

// read is the link's reader goroutine. It starts with the reading role and
// keeps it while anything is expected; when nothing is, it parks without it
// until handed it back (ensureReader).
func (l *streamLink) read() {
	l.rmu.Lock()
	for {
		if l.hints != nil && !l.closing && l.hints.idle() {
			l.reading, l.parked = false, true
			l.rmu.Unlock()
			<-l.wake // the role (ensureReader), or the news that the link ended
			l.rmu.Lock()
			if l.ended {
				l.rmu.Unlock()
				return
			}
			continue
		}
		l.rmu.Unlock()
		err := l.step()
		l.rmu.Lock()
		if err != nil {
			l.fail(err)
			return
		}
	}
}

// step reads one line and dispatches it. Only the role's holder calls it.
func (l *streamLink) step() error {
	line, err := l.readLine()
	if err != nil {
		return answerOversized(l, l.recv, err)
	}
	return l.d.dispatch(l, l.recv, line, l.owned)
}

// readLine returns the next line, valid until the next call unless owned
// is set. A read that fails mid-line (a deadline, when a caller's context
// ends) keeps what it got for the next call, so the stream stays in step.
func (l *streamLink) readLine() ([]byte, error) {
	l.owned = false
	if l.carried {
		l.carry.reset()
		l.carried = false
	}
	for {
		frag, err := l.r.ReadSlice('\n')
		if l.skipping {
			// The rest of a line over the limit: only its start is kept.
			if err == nil {
				l.skipping, l.carried = false, true
				return nil, &oversizeLine{prefix: l.carry.head(oversizePrefix), limit: l.maxAnswer}
			}
			if errors.Is(err, bufio.ErrBufferFull) {
				continue
			}
			return nil, err
		}
		if err == nil && l.carry.len() == 0 {
			return frag, nil
		}
		l.carry.add(frag)
		switch {
		case err == nil:
			l.carried = true
			line, owned := l.carry.line()
			l.owned = owned
			return line, nil
		case errors.Is(err, bufio.ErrBufferFull) && l.carry.len() < l.maxAnswer:
			continue // a long line (a big response): gather it
		case errors.Is(err, bufio.ErrBufferFull):
			prefix := bytes.Clone(l.carry.head(oversizePrefix))
			l.carry.reset()
			l.carry.add(prefix)
			l.skipping = true
			continue
		}
		return nil, err
	}
}

// fail ends the link after a read failed: it is closed, and the receiver
// told, once. Called with rmu held, which it releases.
func (l *streamLink) fail(err error) {
	first := !l.ended
	l.ended = true
	if l.parked {
		l.parked = false
		l.wake <- struct{}{} // to end
	}
	l.rmu.Unlock()
	l.close()
	if !first {
		return
	}
	if errors.Is(err, io.EOF) {
		err = io.ErrUnexpectedEOF
	}
	l.recv.closed(l, err)
}

// ensureReader makes sure someone reads: a parked reader goroutine gets the
// role back. Called with rmu held.
func (l *streamLink) ensureReader() {
	if l.parked && !l.reading {
		l.reading, l.parked = true, false
		l.wake <- struct{}{}
	}
}

// wakeReader makes sure the reader goroutine reads: for a call sent on
// behalf of a caller already waiting (a resend after a reconnect).
func (l *streamLink) wakeReader() {
	l.rmu.Lock()
	l.ensureReader()
	l.rmu.Unlock()
}

// readUntil waits for done, reading the stream on the caller's goroutine
// while nobody else does and the client follows no process (whose frame
// handlers then run on this goroutine, as on the reader's); otherwise it
// makes sure the reader goroutine reads, and returns for the caller to wait
// as usual. It also returns, handing the reading on, once ctx ends. When it
// returns, done may still be open.
func (l *streamLink) readUntil(ctx context.Context, done <-chan struct{}) {
	if l.hints == nil {
		return
	}
	l.rmu.Lock()
	if l.reading || l.ended || !l.hints.quiet() {
		l.ensureReader()
		l.rmu.Unlock()
		return
	}
	l.reading = true
	l.rmu.Unlock()

	// A read cannot watch ctx: a deadline in the past interrupts it.
	var interrupted chan struct{}
	stop := func() bool { return true }
	if ctx.Done() != nil {
		interrupted = make(chan struct{})
		stop = context.AfterFunc(ctx, func() {
			l.uc.SetReadDeadline(time.Unix(1, 0))
			close(interrupted)
		})
	}
	var err error
	// Deferred, so that a frame handler that panics on this goroutine (one
	// dispatched after another goroutine started following a process), and
	// is recovered up the stack, still leaves the reading to someone and no
	// deadline on the socket.
	defer func() {
		if !stop() {
			<-interrupted
			l.uc.SetReadDeadline(time.Time{})
			if errors.Is(err, os.ErrDeadlineExceeded) {
				err = nil // ctx ended, not the link
			}
		}
		l.rmu.Lock()
		if err != nil {
			l.fail(err)
			return
		}
		l.release()
		l.rmu.Unlock()
	}()
	for {
		select {
		case <-done:
			l.selfReads.Add(1)
			return
		default:
		}
		if !l.hints.quiet() {
			return // a process to follow now: the reader goroutine's job
		}
		if err = l.step(); err != nil {
			return
		}
	}
}

// release gives up the reading role a caller held. Someone must read on when
// anything is expected, or to the failure that ends a closed link and its
// parked reader goroutine. Called with rmu held.
func (l *streamLink) release() {
	l.reading = false
	if l.closing || !l.hints.idle() {
		l.ensureReader()
	}
}

// probe checks, before a call is sent on a link nobody reads, that the
// daemon has not closed it meanwhile: the reader goroutine would have seen
// that at once and reconnected, and a call that cannot be resent must not
// go out on a dead connection when a live one is a dial away. Lines nobody
// expected (answers to calls given up on) may stand before the close, so
// they are read first. It reports false when the link broke (the receiver
// has been told).
func (l *streamLink) probe() bool {
	if l.hints == nil {
		return true
	}
	l.rmu.Lock()
	for {
		if l.reading || l.ended {
			ok := !l.ended
			l.rmu.Unlock()
			return ok
		}
		waiting, err := l.peek()
		if err == nil && !waiting {
			l.rmu.Unlock()
			return true // open, nothing waiting
		}
		l.reading = true
		if err == nil {
			l.rmu.Unlock()
			err = l.drain()
			l.rmu.Lock()
			if err == nil {
				l.release() // to the reader goroutine, if a caller waits meanwhile
				continue    // look again
			}
		}
		l.fail(err)
		return false
	}
}

// peek reports whether bytes wait on the socket, without reading them or
// waiting: io.EOF when the daemon closed it and nothing is left.
func (l *streamLink) peek() (bool, error) {
	rc, err := l.uc.SyscallConn()
	if err != nil {
		return false, err // closed on this side
	}
	var n int
	var perr error
	if err := rc.Control(func(fd uintptr) {
		var b [1]byte
		for {
			n, _, perr = unix.Recvfrom(int(fd), b[:], unix.MSG_PEEK|unix.MSG_DONTWAIT)
			if perr != unix.EINTR {
				return
			}
		}
	}); err != nil {
		return false, err
	}
	switch {
	case perr == unix.EAGAIN:
		return false, nil
	case perr != nil:
		return false, perr
	case n == 0:
		return false, io.EOF
	}
	return true, nil
}

// drainWait bounds how long drain waits for the rest of a line it found
// begun.
const drainWait = 100 * time.Millisecond

// drain reads and dispatches what waits on the socket without waiting for
// more, then returns nil; or the error that ends the link (io.EOF for a
// daemon that closed it). Only the reading role's holder calls it.
func (l *streamLink) drain() error {
	l.uc.SetReadDeadline(time.Now().Add(drainWait))
	defer l.uc.SetReadDeadline(time.Time{})
	for {
		if err := l.step(); err != nil {
			if errors.Is(err, os.ErrDeadlineExceeded) {
				return nil // a line cut short stays in carry for the next reader
			}
			return err
		}
		if l.r.Buffered() > 0 {
			continue
		}
		switch waiting, err := l.peek(); {
		case err != nil:
			return err
		case !waiting:
			return nil
		}
	}
}

// lineDispatcher routes what the daemon sends, a response or a stream frame
// per line or message, to a receiver. It is shared by every encoded link and
// keeps one frame's data buffer for reuse.
type lineDispatcher struct {
	frame wire.Frame
	one   [1]wire.Frame
}

// dispatch handles one line (its line end, if any, is ignored). An error
// means the daemon's output is out of step: the link must end.
//
// owned says the line's buffer is not read into again: a result can be
// handed on without a copy.
func (d *lineDispatcher) dispatch(l link, recv receiver, line []byte, owned bool) error {
	line = bytes.TrimRight(line, "\r\n")
	if len(line) == 0 {
		return nil
	}
	if wire.IsFrameLine(line) {
		id, perr := wire.ParseFrame(line, &d.frame)
		if perr == nil {
			d.one[0] = d.frame
			recv.frames(l, string(id), d.one[:])
			d.frame.Data = d.one[0].Data // keep the grown buffer for reuse
			return nil
		}
		if !errors.Is(perr, wire.ErrNotFrame) {
			return fmt.Errorf("daemon sent a malformed stream frame: %w", perr)
		}
	}
	if id, result, ok := parseResult(line); ok {
		if !owned {
			result = bytes.Clone(result) // the buffer is read into again
		}
		recv.response(l, id, result, nil)
		return nil
	}
	if g, ok := wire.ParseGone(line); ok {
		recv.gone(l, g)
		return nil
	}
	var resp wire.Response
	if err := json.Unmarshal(line, &resp); err != nil {
		return fmt.Errorf("daemon sent a malformed line: %w", err)
	}
	id, err := strconv.ParseUint(string(resp.ID), 10, 64)
	if err != nil {
		// An error about a request we could not have sent (id null:
		// a parse error) means the stream is out of step.
		if resp.Error != nil {
			return fmt.Errorf("daemon: %s", resp.Error.Message)
		}
		return fmt.Errorf("daemon sent a response with id %s", resp.ID)
	}
	if resp.Error != nil {
		recv.response(l, id, nil, resp.Error)
	} else {
		recv.response(l, id, resp.Result, nil)
	}
	return nil
}

// parseResult reads a successful response in the daemon's own layout,
// {"jsonrpc":"2.0","id":N,"result":R}, without the reflection of
// encoding/json (which cost a ping a fifth of its client time). Anything
// else, errors included, is left to the general decoder.
func parseResult(line []byte) (id uint64, result json.RawMessage, ok bool) {
	id, rest, ok := cutResponseID(line)
	if !ok {
		return 0, nil, false
	}
	rest, found := bytes.CutPrefix(rest, []byte(`,"result":`))
	if !found || len(rest) < 2 || rest[len(rest)-1] != '}' {
		return 0, nil, false
	}
	// Valid JSON as one value: a line with more members after the result
	// would make it "R,...", which is not.
	result = rest[:len(rest)-1]
	if !json.Valid(result) {
		return 0, nil, false
	}
	return id, result, true
}

// ---- in process ----

// localLink calls an in-process daemon directly: no encoding, no auth, and
// frames arrive as the daemon's own values.
type localLink struct {
	sess *daemon.Session
	recv receiver
	ctx  context.Context
	stop context.CancelFunc

	mu     sync.Mutex // orders send's wg.Add before close's wg.Wait
	closed bool
	wg     sync.WaitGroup
}

func newLocalLink(srv *daemon.Server, recv receiver) *localLink {
	ctx, stop := context.WithCancel(context.Background())
	l := &localLink{recv: recv, ctx: ctx, stop: stop}
	l.sess = srv.Local(l)
	return l
}

func (l *localLink) send(id uint64, method string, params json.RawMessage) error {
	return l.call(l.ctx, id, method, params)
}

func (l *localLink) passesFiles() bool { return true }

// sendFiles passes duplicates of files in the call's context
// (daemon.WithFiles): the daemon closes what it gets, as it closes the
// copies a socket delivers.
func (l *localLink) sendFiles(id uint64, method string, params json.RawMessage, files []*os.File) error {
	dups := make([]*os.File, 0, len(files))
	for _, f := range files {
		d, err := dupFile(f)
		if err != nil {
			closeAll(dups)
			return fmt.Errorf("%s: pass %s: %w", method, f.Name(), err)
		}
		dups = append(dups, d)
	}
	if err := l.call(daemon.WithFiles(l.ctx, dups...), id, method, params); err != nil {
		closeAll(dups) // the call never reached the daemon
		return err
	}
	return nil
}

// dupFile returns a close-on-exec duplicate of f (through Control: Fd
// would make a non-blocking file blocking).
func dupFile(f *os.File) (*os.File, error) {
	rc, err := f.SyscallConn()
	if err != nil {
		return nil, err
	}
	nfd, derr := -1, error(nil)
	if err := rc.Control(func(fd uintptr) { nfd, derr = unix.FcntlInt(fd, unix.F_DUPFD_CLOEXEC, 0) }); err != nil {
		return nil, err
	}
	if derr != nil {
		return nil, derr
	}
	return os.NewFile(uintptr(nfd), f.Name()), nil
}

func closeAll(files []*os.File) {
	for _, f := range files {
		f.Close()
	}
}

// call runs one request on the session, on a goroutine of its own.
func (l *localLink) call(ctx context.Context, id uint64, method string, params json.RawMessage) error {
	l.mu.Lock()
	if l.closed {
		l.mu.Unlock()
		return net.ErrClosed // a call racing Client.Close: it fails with the client
	}
	l.wg.Add(1)
	l.mu.Unlock()
	go func() {
		defer l.wg.Done()
		res, err := l.sess.Call(ctx, method, params)
		l.recv.response(l, id, res, err)
	}()
	return nil
}

// SendFrames implements daemon.FrameSink.
func (l *localLink) SendFrames(id string, _ []byte, frames []wire.Frame) error {
	l.recv.frames(l, id, frames)
	return nil
}

// DeliverInline implements daemon.InlineSink: frames are handed to the
// client on the goroutine that read them from the child, saving a
// goroutine hand-over per batch. Handlers return promptly, or block only
// as writing to a pipe would.
func (l *localLink) DeliverInline() bool { return true }

// SendGone implements daemon.FrameSink.
func (l *localLink) SendGone(_ []byte, g wire.Gone) error {
	l.recv.gone(l, g)
	return nil
}

func (l *localLink) close() {
	l.mu.Lock()
	l.closed = true
	l.mu.Unlock()
	l.stop()
	l.sess.Close()
	l.wg.Wait()
}
