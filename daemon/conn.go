package daemon

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"strconv"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"golang.org/x/sys/unix"

	"github.com/seed5ad92d46/sous/daemon/wire"
)

// maxInFlight bounds the requests of one connection handled at once; the
// reader stops reading while the bound is reached, which pushes back on a
// flooding client instead of growing goroutines without limit.
const maxInFlight = 128

// conn is one client connection: a reader that dispatches each request on
// its own goroutine, and a writer shared by responses and stream frames. The
// protocol lives here once; the transport only moves requests in and encoded
// lines out (NDJSON over a byte stream, or one message each over WebSocket).
type conn struct {
	s    *Server
	t    transport
	sess *Session

	wmu  sync.Mutex // one writer at a time; each write is whole lines
	bufs sync.Pool
	// binary is set, under wmu, as the answer to connection.binaryFrames
	// is written: output frames are sent in binary form from then on
	// (binframes.go). It is never cleared.
	binary  atomic.Bool
	batches sync.Pool // of *frameBatch, for binary frames

	// held are answers of requests the reader ran itself while the next
	// request was already read (heldAnswers), under wmu: the next write
	// carries them, or the reader writes them before it reads again.
	held []byte

	closeOnce sync.Once
	handlers  sync.WaitGroup
}

// lineBufferer is a transport that can tell whether a whole request is
// read already, so that next returns it without waiting.
type lineBufferer interface {
	buffered() bool
}

// transport carries one connection's messages. The conn above it owns the
// protocol (validation order, dispatch, responses, frames); a transport only
// moves requests in and encoded lines out.
type transport interface {
	// next returns the next request without its line end, in a slice the
	// caller owns. errLineTooLong means it was over the 1 MiB cap: the
	// connection closes without a reply. Any error ends the connection.
	next() ([]byte, error)
	// write sends b: one or more complete lines, each ending in '\n' (a
	// response, or a batch of stream frames). The conn serializes calls.
	write(b []byte) error
	// writeLine sends one line made of parts, the last ending in '\n' and
	// none other holding one, without joining them first: a large result
	// is written from where it lies.
	writeLine(parts [][]byte) error
	// writeFrames sends a batch of frames encoded for binary frames
	// (binframes.go).
	writeFrames(bt *frameBatch) error
	// close tears the transport down, unblocking next and write. why is what
	// ended the connection (errShutdown when the daemon stops, or the error
	// from next), so a message transport can tell the peer.
	close(why error)
	// kind and remote describe the peer in logs.
	kind() string
	remote() string
}

// lineRecycler is a transport that takes back a line next returned once
// its request is handled, to reuse the buffer.
type lineRecycler interface {
	recycle(line []byte)
}

// errShutdown is the reason given to transports when the daemon closes.
var errShutdown = errors.New("daemon shutting down")

// streamTransport is NDJSON over a byte stream: a Unix socket, an ssh
// bridge, a test's net.Pipe.
type streamTransport struct {
	nc net.Conn
	lr *lineReader
	fd *fdReader // on a Unix socket: the descriptors passed with requests

	// stdio, once set (connection.stdio, stdio.go), is where the
	// connection's bytes go and come from; the socket is only watched.
	// It is set before any request is handed out; mu orders it with close.
	stdio  *stdioIO
	mu     sync.Mutex
	closed bool
}

// socketSendBuffer is what a Unix socket connection's send buffer is raised
// to (the kernel caps it at net.core.wmem_max). With the default ~208 KiB,
// one 256 KiB batch of frames (about 350 KiB of JSON) could not be in
// flight at once, and the daemon and the client took turns instead of
// working side by side.
const socketSendBuffer = 4 << 20

// newStreamTransport serves nc; lines holds the *bigLine buffers long
// requests are read into (see lineReader).
func newStreamTransport(nc net.Conn, lines *sync.Pool) *streamTransport {
	uc, ok := nc.(*net.UnixConn)
	if !ok {
		return &streamTransport{nc: nc, lr: newLineReader(nc, lines)}
	}
	_ = uc.SetWriteBuffer(socketSendBuffer) // best effort: a smaller buffer only costs speed
	fd := newFDReader(uc)
	return &streamTransport{nc: nc, lr: newLineReader(fd, lines), fd: fd}
}

func (t *streamTransport) recycle(line []byte) { t.lr.recycle(line) }

// buffered implements lineBufferer.
func (t *streamTransport) buffered() bool { return t.lr.buffered() }

func (t *streamTransport) next() ([]byte, error) {
	line, err := t.lr.next(wire.MaxLine)
	if err != nil && t.fd != nil {
		t.fd.closeAll()
	}
	return line, err
}

// passed implements filePasser: the descriptors that came with the line
// next returned last.
func (t *streamTransport) passed() []*os.File {
	if t.fd == nil || len(t.fd.pending) == 0 {
		return nil
	}
	return t.fd.take(t.lr.lineStart, t.lr.pos)
}

func (t *streamTransport) write(b []byte) error {
	if t.stdio != nil {
		return t.stdio.write(b)
	}
	_, err := t.nc.Write(b)
	return err
}

func (t *streamTransport) writeLine(parts [][]byte) error {
	if t.stdio != nil {
		return t.stdio.writev(parts)
	}
	bufs := net.Buffers(parts)
	_, err := bufs.WriteTo(t.nc) // one writev where the conn has it
	return err
}

// writeFrames writes the batch as it is: on a byte stream, a binary frame
// is its header line followed by its data. One writev where the conn has
// it: long data goes from the frames' own buffers.
func (t *streamTransport) writeFrames(bt *frameBatch) error {
	if t.stdio != nil {
		return t.stdio.writev(bt.stream())
	}
	bufs := net.Buffers(bt.stream())
	_, err := bufs.WriteTo(t.nc)
	return err
}

func (t *streamTransport) close(error) {
	t.mu.Lock()
	t.closed = true
	sio := t.stdio
	t.mu.Unlock()
	t.nc.Close()
	if sio != nil {
		sio.close()
	}
}

func (t *streamTransport) kind() string {
	if t.stdio != nil {
		return "bridge stdio"
	}
	return "socket"
}
func (t *streamTransport) remote() string {
	if a := t.nc.RemoteAddr(); a != nil {
		return a.String()
	}
	return ""
}

func newConn(s *Server, t transport) *conn {
	c := &conn{s: s, t: t}
	// Responses are short; a batch of frames grows its buffer, which the
	// pool then keeps while the connection streams.
	c.bufs.New = func() any { b := make([]byte, 0, 4<<10); return &b }
	c.batches.New = func() any { return new(frameBatch) }
	c.sess = newSession(s, c)
	return c
}

func (c *conn) serve() {
	c.s.log.Info("connection", "state", "open", "transport", c.t.kind(), "remote", c.t.remote())
	defer c.s.log.Info("connection", "state", "closed", "transport", c.t.kind())
	var why error
	defer func() { c.close(why) }()
	sem := make(chan struct{}, maxInFlight)
	fp, _ := c.t.(filePasser)
	recycler, _ := c.t.(lineRecycler)
	lb, _ := c.t.(lineBufferer)
	held := false
	first := true
	for {
		if held && !lb.buffered() {
			c.flushHeld() // before the reader waits for more
			held = false
		}
		line, err := c.t.next()
		var files []*os.File
		if fp != nil && err == nil {
			files = fp.passed()
		}
		if first && err == nil {
			first = false
			if c.adoptStdio(line, files) { // stdio.go
				continue
			}
		}
		if err != nil {
			why = err
			if errors.Is(err, errLineTooLong) {
				c.s.log.Warn("request over 1 MiB: closing the connection", "transport", c.t.kind())
			}
			break
		}
		if len(bytes.TrimSpace(line)) == 0 {
			closeFiles(files)
			continue
		}
		// Only a short line can be a cheap method; a long one (stdin data)
		// is parsed by its handler, off the reader.
		var (
			req     wire.Request
			perr    error
			decoded = len(line) <= maxInlineLine
		)
		if decoded {
			req, perr = decodeRequest(line)
			if perr == nil && c.runsInline(req.Method) {
				hold := lb != nil && lb.buffered()
				c.handle(0, req, nil, files, hold)
				held = held || hold
				continue
			}
		}
		if held {
			// Answers are held only across requests the reader runs:
			// one handed to a goroutine (server.shutdown) may end the
			// connection first.
			c.flushHeld()
			held = false
		}
		// A request that is, or may be, process.stdin takes its place in
		// the connection's order (stdinorder.go).
		var ticket uint64
		if !decoded || perr == nil && ordered[req.Method] {
			ticket = c.sess.order.issue()
		}
		sem <- struct{}{}
		c.handlers.Add(1)
		// req and perr are passed, not captured: captured, they would be
		// on the heap for every request, the inline ones too.
		go func(req wire.Request, perr error) {
			defer func() { <-sem; c.handlers.Done() }()
			if !decoded {
				req, perr = decodeRequest(line)
				if ticket != 0 && (perr != nil || !ordered[req.Method]) {
					c.sess.order.notStdin(ticket)
				}
			}
			c.handle(ticket, req, perr, files, false)
			if ticket != 0 {
				c.sess.order.done(ticket)
			}
			// Nothing keeps the line past its handling: params decode into
			// copies, and the response is written by now.
			if recycler != nil {
				recycler.recycle(line)
			}
		}(req, perr)
	}
	if errors.Is(why, io.EOF) {
		c.finishHalfClosed()
	}
	c.sess.Close() // stops subscriptions and cancels what handlers still wait for
	c.handlers.Wait()
	// Only now, with every request it sent applied: a runner that wrote a
	// run.append and died has it in the journal (runjournal.go).
	c.s.runs.release(c.sess)
}

// ordered are the methods applied in the order the connection sent them,
// per process or run (stdinorder.go): process.stdin, whose offsets must
// not race, and run.append, whose records a runner may send before the
// daemon answered the ones before.
var ordered = map[string]bool{"process.stdin": true, "run.append": true}

// finishHalfClosed lets the requests in flight finish and answer after the
// peer's end of input. The peer may be done sending only, not reading: a
// half-close (`sous daemon bridge` once its stdin ends, `nc -N`) still
// gets an answer to every request it sent, with what its processes write
// meanwhile. A peer that closed altogether is not waited for, nor one that
// is still waiting after halfCloseGrace: a handler could wait for good (a
// process.stdin to a child that never reads, while a bridge whose ssh
// session is gone holds the socket open), so what is left is cancelled,
// as everything was before. A killAndWait still escalates (KillAndWait).
func (c *conn) finishHalfClosed() {
	hc, ok := c.t.(halfCloser)
	if !ok || hc.peerClosed() {
		return
	}
	done := make(chan struct{})
	go func() { c.handlers.Wait(); close(done) }()
	tick := time.NewTicker(peerCheckEvery)
	defer tick.Stop()
	grace := time.NewTimer(halfCloseGrace)
	defer grace.Stop()
	for {
		select {
		case <-done:
			return
		case <-grace.C:
			return
		case <-tick.C:
			if hc.peerClosed() {
				return
			}
		}
	}
}

// halfCloseGrace bounds the wait for the requests of a half-closed
// connection: git calls and kills are done well within it.
const halfCloseGrace = 30 * time.Second

// peerCheckEvery is how often a half-closed connection with requests in
// flight looks whether its peer has closed altogether.
const peerCheckEvery = 100 * time.Millisecond

// halfCloser is a transport that can tell a peer that only shut its
// sending side from one that closed the connection.
type halfCloser interface {
	peerClosed() bool
}

// peerClosed reports whether the peer closed the connection, rather than
// only shutting its sending side: on a Unix stream socket, poll says
// POLLHUP only when both directions are shut.
func (t *streamTransport) peerClosed() bool {
	if t.stdio != nil && t.stdio.peerClosed() {
		return true
	}
	sc, ok := t.nc.(syscall.Conn)
	if !ok {
		return true
	}
	rc, err := sc.SyscallConn()
	if err != nil {
		return true
	}
	closed := true
	if cerr := rc.Control(func(fd uintptr) {
		fds := []unix.PollFd{{Fd: int32(fd), Events: unix.POLLRDHUP}}
		n, err := unix.Poll(fds, 0)
		closed = err == nil && n > 0 && fds[0].Revents&(unix.POLLHUP|unix.POLLERR|unix.POLLNVAL) != 0
	}); cerr != nil {
		return true
	}
	return closed
}

var errLineTooLong = errors.New("line too long")

// lineReader splits a connection into request lines. It grows its buffer for
// a long line (up to the limit) and then reads in large pieces, and hands a
// long line over without copying it: a 1 MiB process.stdin line through a
// 64 KiB bufio.Reader took a dozen reads and as many copies.
//
// With a pool of bigLine buffers, a long line grows into one of them in one
// step, and its handler gives it back (recycle) once done with the line:
// growing by doubling into fresh buffers for every 700 KiB process.stdin
// request allocated three times the line and kept the collector busy.
type lineReader struct {
	r          io.Reader
	pool       *sync.Pool // of *bigLine; nil: grow by doubling
	buf        []byte
	small      []byte // the connection's own buffer, which buf is unless grown
	start, end int    // buf[start:end] is read and not yet returned
	scanned    int    // buf[start:start+scanned] holds no newline
	err        error  // the read error, returned once the buffer is drained

	// The stream offsets of buf[start] and of the line next returned last,
	// which passed descriptors are matched against (fdReader).
	pos, lineStart int64
}

// lineReaderSize is the buffer a connection starts with and returns to,
// which it holds for as long as it is open: ample for most requests; a
// longer line grows into a pooled bigLine in one step (take says which are
// then copied out). It was 64 KiB, nine tenths of an idle connection's
// heap (71-72 KiB): a thousand waiting clients would hold 70 MiB.
const lineReaderSize = 4 << 10

// handOverLine is the length from which a line is handed over in the
// buffer it was read into rather than copied out of it: copying a 1 MiB
// process.stdin line would cost about what parsing it does, while a shorter
// line's copy is cheaper than holding a pooled 1 MiB buffer until its
// handler is done.
const handOverLine = 64 << 10

// bigLine holds the longest line the daemon serves, its newline, and the
// byte that tells an overlong line (see fill).
type bigLine = [wire.MaxLine + 2]byte

func newLineReader(r io.Reader, pool *sync.Pool) *lineReader {
	small := make([]byte, lineReaderSize)
	return &lineReader{r: r, pool: pool, buf: small, small: small}
}

// takeBigLine returns a bigLine from pool, or a new one.
func takeBigLine(pool *sync.Pool) []byte {
	if b, ok := pool.Get().(*bigLine); ok {
		return b[:]
	}
	return new(bigLine)[:]
}

// giveBigLine puts b back into pool (nil: none) when it is a whole bigLine:
// a line handed over from one starts at the buffer's start and keeps its
// capacity.
func giveBigLine(pool *sync.Pool, b []byte) {
	if pool != nil && cap(b) == len(bigLine{}) {
		pool.Put((*bigLine)(b[:cap(b)]))
	}
}

// recycle takes back a line next returned, once its user is done with it:
// a pooled buffer goes back to the pool.
func (lr *lineReader) recycle(line []byte) { giveBigLine(lr.pool, line) }

// buffered reports whether a whole line is read already: next returns it
// without reading.
func (lr *lineReader) buffered() bool {
	return bytes.IndexByte(lr.buf[lr.start+lr.scanned:lr.end], '\n') >= 0
}

// next returns the next line without its newline, in a slice the caller
// owns. A line longer than limit is errLineTooLong: the contract closes the
// connection without reading further. A last line without a newline is still
// a line.
func (lr *lineReader) next(limit int) ([]byte, error) {
	for {
		i := bytes.IndexByte(lr.buf[lr.start+lr.scanned:lr.end], '\n')
		if i >= 0 {
			return lr.take(lr.scanned+i, 1, limit)
		}
		lr.scanned = lr.end - lr.start
		if lr.scanned > limit {
			return nil, errLineTooLong
		}
		if lr.err != nil {
			if lr.scanned > 0 {
				return lr.take(lr.scanned, 0, limit)
			}
			return nil, lr.err
		}
		lr.fill(limit)
	}
}

// take returns the first n bytes as a line and drops skip more (the newline).
func (lr *lineReader) take(n, skip, limit int) ([]byte, error) {
	if n > limit {
		return nil, errLineTooLong
	}
	lr.lineStart = lr.pos
	lr.pos += int64(n + skip)
	lr.scanned = 0
	if n < handOverLine {
		line := append([]byte(nil), lr.buf[lr.start:lr.start+n]...)
		lr.start += n + skip
		if lr.pooled() && lr.end-lr.start <= len(lr.small) {
			// What is left fits the connection's own buffer again.
			big := lr.buf
			lr.buf, lr.start, lr.end = lr.small, 0, copy(lr.small, big[lr.start:lr.end])
			giveBigLine(lr.pool, big)
		}
		return line, nil
	}
	// Hand the buffer over and carry the rest into the connection's own
	// (when the line is in a pooled one) or a fresh one. A line from the
	// buffer's start keeps its capacity, so that recycle knows a pooled
	// buffer.
	end := lr.start + n
	if lr.start == 0 {
		end = len(lr.buf)
	}
	line := lr.buf[lr.start : lr.start+n : end]
	rest := lr.buf[lr.start+n+skip : lr.end]
	switch {
	case lr.pooled() && len(rest) <= len(lr.small):
		lr.buf = lr.small
	case lr.pooled():
		// Part of the next long line came with this one (a client keeps
		// several process.stdin requests in flight).
		lr.buf = takeBigLine(lr.pool)
	default:
		lr.buf = make([]byte, max(lineReaderSize, len(rest)))
	}
	lr.start, lr.end = 0, copy(lr.buf, rest)
	return line, nil
}

// pooled reports whether the buffer is a bigLine from the pool.
func (lr *lineReader) pooled() bool {
	return lr.pool != nil && len(lr.buf) == len(bigLine{})
}

// fill reads more, making room first: the pending bytes, the start of a
// line (next calls fill only when no whole line is pending), move to the
// front, as bufio does, so that a line that grows into a pooled buffer
// starts at its start and can be handed over whole; and a full buffer grows
// (up to what a line of limit bytes needs).
func (lr *lineReader) fill(limit int) {
	if lr.start > 0 {
		lr.start, lr.end = 0, copy(lr.buf, lr.buf[lr.start:lr.end])
	}
	if lr.end == len(lr.buf) && len(lr.buf) < limit+2 {
		nb := lr.bigger(limit)
		lr.end = copy(nb, lr.buf[:lr.end])
		lr.buf = nb
	}
	n, err := lr.r.Read(lr.buf[lr.end:])
	lr.end += n
	if err != nil {
		lr.err = err
	}
}

// bigger returns a buffer to grow into: a pooled bigLine, when the pool has
// them and they hold the limit, else twice the current size.
func (lr *lineReader) bigger(limit int) []byte {
	if lr.pool != nil && limit+2 <= len(bigLine{}) {
		return takeBigLine(lr.pool)
	}
	return make([]byte, min(2*len(lr.buf), limit+2))
}

// inlineMethods answer at once (server.* from memory, process.spawn as
// below), so the connection's reader runs them itself instead of handing them to a new goroutine: the
// hand-off woke another thread on every call, a third of a ping's round
// trip. Only while the connection follows no process, though: a response
// written behind a stream the client has stopped reading would stall the
// reader, and with it every request after it. Everything else runs
// concurrently, as the contract requires.
//
// process.spawn too runs on the reader while the connection follows no
// process: its handler waits for nothing the client does (a spawn of the
// same id under way ends by itself; the frames of a process it replaces
// are not this connection's to deliver, as it follows none), and it
// answers as soon as the child has started. The goroutine it was handed
// to cost a start and a wake-up on every spawn's path; what it holds up
// instead is a request sent during the fork, by a client following
// nothing, for the fork's time. A spawn on a connection following
// processes still gets its goroutine, whatever its children do.
//
// run.append is a write to a local file; a durable run sends one per
// effect, and a goroutine for each, its wake-up and its stack grown anew
// for the JSON decoding, were most of the journal's cost on a socket
// daemon. It is ordered (applied in the order sent), so it runs inline
// only when no ordered request is being handled: none can be overtaken.
var inlineMethods = map[string]bool{"server.ping": true, "server.version": true, "server.capabilities": true,
	"process.spawn": true, "run.append": true}

// runsInline reports whether the reader runs method itself (inlineMethods).
func (c *conn) runsInline(method string) bool {
	return inlineMethods[method] && (!ordered[method] || c.sess.order.empty()) && c.sess.idle()
}

// maxInlineLine is the longest request the reader parses itself: ample for
// any cheap method (a ping is under 100 bytes).
const maxInlineLine = 4 << 10

// handle validates and runs one request, in the contract's order: parse
// (done by the reader, whose error perr is), auth, version, method, params.
// files came with the request (filePasser); what its handler does not claim
// is closed. With hold, the answer waits for the next write (heldAnswers).
func (c *conn) handle(ticket uint64, req wire.Request, perr error, files []*os.File, hold bool) {
	ctx, closeUnclaimed := withPassedFiles(c.sess.ctx, files)
	if ticket != 0 {
		ctx = withTicket(ctx, ticket)
	}
	defer closeUnclaimed()
	if perr != nil {
		c.answer(hold, nil, nil, &wire.Error{Code: wire.CodeParseError, Message: wire.MsgParseError})
		return
	}
	if !c.s.authorized(req.Auth) {
		c.s.stats.Refused.Add(1)
		// The contract's log line, verbatim (docs/PROTOCOL.md, Authentication).
		c.s.log.Warn(fmt.Sprintf("[Server] Unauthorized request: method=%s, id=%s", req.Method, idText(req.ID)))
		c.answer(hold, req.ID, nil, &wire.Error{Code: wire.CodeUnauthorized, Message: wire.MsgUnauthorized})
		return
	}
	if req.JSONRPC != "2.0" {
		c.answer(hold, req.ID, nil, &wire.Error{Code: wire.CodeInvalidRequest, Message: wire.MsgInvalidVersion})
		return
	}
	if req.Method == "server.shutdown" {
		// No reply: the daemon stops and closes the connection.
		c.s.log.Info("shutdown requested")
		c.s.requestShutdown()
		return
	}
	result, after, err := c.sess.dispatch(ctx, req.Method, req.Params)
	if after != nil {
		defer after() // after the response is written
	}
	if err != nil {
		c.answer(hold, req.ID, nil, toWireError(err))
		return
	}
	if _, ok := result.(binaryFramesSwitch); ok {
		c.switchToBinary(req.ID) // binframes.go
		return
	}
	raw, merr := encodeResult(result)
	if merr != nil {
		c.answer(hold, req.ID, nil, wire.Internal(merr))
		return
	}
	c.answer(hold, req.ID, raw, nil)
}

// idText is the request id as logged: its JSON text, or null when absent.
func idText(id json.RawMessage) string {
	if len(id) == 0 {
		return "null"
	}
	return string(id)
}

func toWireError(err error) *wire.Error {
	var we *wire.Error
	if errors.As(err, &we) {
		return we
	}
	return wire.Internal(err)
}

// heldAnswers: the reader runs cheap requests itself (inlineMethods).
// When the next request is read already, which a runner's journal record
// and the request of the effect it precedes are (they come in one
// write), the answer waits to go with the next one: one write where each
// answer was one, and one wake-up of the client instead of two. The
// bytes are the same, in the same order; only where writes end moves.

// answer writes one response, or with hold keeps it for the next write.
func (c *conn) answer(hold bool, id, result json.RawMessage, rerr *wire.Error) {
	if !hold || len(result) > largeResult {
		c.writeResponse(id, result, rerr)
		return
	}
	c.wmu.Lock()
	c.held = appendResponse(appendResponseID(c.held, id), result, rerr)
	c.wmu.Unlock()
}

// flushHeld writes the answers held, if any.
func (c *conn) flushHeld() {
	c.wmu.Lock()
	defer c.wmu.Unlock()
	if len(c.held) > 0 {
		c.writeLocked(nil, nil)
	}
}

// appendResponse appends the rest of a response after its id: its result,
// or its error, and the line end.
func appendResponse(b []byte, result json.RawMessage, rerr *wire.Error) []byte {
	if rerr != nil {
		b = append(b, `,"error":{"code":`...)
		b = strconv.AppendInt(b, int64(rerr.Code), 10)
		b = append(b, `,"message":`...)
		msg, _ := json.Marshal(rerr.Message)
		b = append(b, msg...)
		b = append(b, '}')
	} else {
		b = append(b, `,"result":`...)
		b = append(b, result...)
	}
	return append(b, "}\n"...)
}

// writeResponse writes one response. The id is echoed raw (null when
// the request had none or could not be parsed).
func (c *conn) writeResponse(id, result json.RawMessage, rerr *wire.Error) {
	bp := c.bufs.Get().(*[]byte)
	b := appendResponseID((*bp)[:0], id)
	if rerr == nil && len(result) > largeResult {
		// Not copied: into a pooled buffer, a whole file's answer
		// would also stay pinned there after the write.
		b = append(b, `,"result":`...)
		c.writeLine([][]byte{b, result, []byte("}\n")})
		*bp = b
		c.bufs.Put(bp)
		return
	}
	b = appendResponse(b, result, rerr)
	c.write(b)
	*bp = b
	c.bufs.Put(bp)
}

// appendResponseID appends the start of a response, up to its id (null
// when the request had none).
func appendResponseID(b []byte, id json.RawMessage) []byte {
	b = append(b, `{"jsonrpc":"2.0","id":`...)
	if len(id) == 0 {
		return append(b, "null"...)
	}
	return append(b, id...)
}

// largeResult is the size past which a result is written from its own
// buffer rather than copied into the response's.
const largeResult = 256 << 10

// SendFrames encodes a batch of frames and writes it in one go: as JSON
// lines, or in binary form once the connection asked for it (binframes.go).
// The encoding happens outside the write lock; a batch encoded as JSON
// while the switch's answer was written goes binary instead, so that no
// JSON output frame follows that answer.
func (c *conn) SendFrames(_ string, quotedID []byte, frames []wire.Frame) error {
	if c.binary.Load() {
		return c.sendBinaryFrames(quotedID, frames)
	}
	bp := c.bufs.Get().(*[]byte)
	b := (*bp)[:0]
	for i := range frames {
		b = wire.AppendFrame(b, quotedID, &frames[i])
	}
	var err error
	c.wmu.Lock()
	if c.binary.Load() {
		c.wmu.Unlock()
		err = c.sendBinaryFrames(quotedID, frames)
	} else {
		err = c.writeLocked(b, nil)
		c.wmu.Unlock()
	}
	*bp = b
	c.bufs.Put(bp)
	return err
}

// SendGone writes a Gone notification.
func (c *conn) SendGone(quotedID []byte, g wire.Gone) error {
	bp := c.bufs.Get().(*[]byte)
	b := wire.AppendGone((*bp)[:0], quotedID, g)
	err := c.write(b)
	*bp = b
	c.bufs.Put(bp)
	return err
}

func (c *conn) write(b []byte) error { return c.send(b, nil) }

func (c *conn) writeLine(parts [][]byte) error { return c.send(nil, parts) }

// send writes b, or the line made of parts when there are any.
func (c *conn) send(b []byte, parts [][]byte) error {
	c.wmu.Lock()
	defer c.wmu.Unlock()
	return c.writeLocked(b, parts)
}

// writeLocked is send with wmu held. Answers held go first, in the same
// write.
func (c *conn) writeLocked(b []byte, parts [][]byte) error {
	if len(c.held) > 0 {
		if parts != nil {
			parts = append([][]byte{c.held}, parts...)
		} else {
			// Copied, not written as two parts: a transport without
			// writev (a WebSocket message, net.Pipe) would write them
			// apart.
			b = append(c.held, b...)
		}
		c.held = c.held[:0] // b may share its array: not written to before the write
		if cap(c.held) > 64<<10 {
			c.held = nil
		}
	}
	var err error
	if parts != nil {
		err = c.t.writeLine(parts)
	} else {
		err = c.t.write(b)
	}
	return c.wrote(err)
}

// wrote ends the connection when a write failed, and returns err: a broken
// writer ends the connection; the reader notices. Called with wmu held.
func (c *conn) wrote(err error) error {
	if err != nil {
		c.t.close(err)
	}
	return err
}

// close ends the connection; why is passed on to the transport.
func (c *conn) close(why error) {
	c.closeOnce.Do(func() {
		c.t.close(why)
		c.sess.Close()
	})
}

// Session is one client's state: the processes it follows. A socket
// connection has one; the embedded client creates one with Server.Local.
type Session struct {
	s      *Server
	sink   FrameSink
	ctx    context.Context
	cancel context.CancelFunc

	mu     sync.Mutex
	subs   map[string]*subscription
	closed bool
	pumps  sync.WaitGroup

	// order applies the connection's process.stdin requests to each
	// process in the order they arrived (stdinorder.go).
	order *stdinOrder
	// seq numbers the daemon's sessions as they open: of two connections
	// a runner used, the later one has the higher (runjournal.go).
	seq uint64
}

// FrameSink receives the frames of the processes a session follows, one
// process's frames in seq order. It may block to push back; an error ends the
// subscription.
//
// SendGone says the session no longer follows a process that has not
// exited for it (process.gone), after that process's last frames.
//
// It is an alias of an interface literal, as LocalSession is: the
// in-process client spells the same literal (client.LocalSink), so
// *Server satisfies the client's client.LocalServer with neither package
// importing the other. The program that composes the two asserts it.
type FrameSink = interface {
	SendFrames(id string, quotedID []byte, frames []wire.Frame) error
	SendGone(quotedID []byte, g wire.Gone) error
}

// LocalSession is a Session as an in-process client holds it (Server.Local):
// see FrameSink for why it is an alias of a literal.
type LocalSession = interface {
	Call(ctx context.Context, method string, params json.RawMessage, files []*os.File) (json.RawMessage, error)
	Close()
}

func newSession(s *Server, sink FrameSink) *Session {
	ctx, cancel := context.WithCancel(context.Background())
	return &Session{s: s, sink: sink, ctx: ctx, cancel: cancel, subs: make(map[string]*subscription), order: newStdinOrder(),
		seq: s.sessions.Add(1)}
}

// Call runs one method for an in-process client; the caller is trusted, so
// there is no auth and no version check. The result is JSON, exactly what a
// socket client would receive.
//
// files are the descriptors passed with the request (process.spawn's
// mirror names them), as a socket client passes them with its request
// line, and with the same meaning. The session owns them from the call on
// and closes them when done: pass duplicates of files the caller keeps.
func (se *Session) Call(ctx context.Context, method string, params json.RawMessage, files []*os.File) (json.RawMessage, error) {
	ctx, closeUnclaimed := withPassedFiles(ctx, files)
	defer closeUnclaimed()
	if method == "server.shutdown" {
		se.s.requestShutdown()
		return json.RawMessage(`{}`), nil
	}
	result, after, err := se.dispatch(ctx, method, params)
	if after != nil {
		// The embedded client gets the result only after this returns, so
		// frames may reach its sink before the result; it orders them.
		defer after()
	}
	if err != nil {
		return nil, toWireError(err)
	}
	raw, err := encodeResult(result)
	if err != nil {
		return nil, wire.Internal(err)
	}
	return raw, nil
}

// encodeResult is a handler's result as JSON. A handler that returns it
// encoded already (json.RawMessage, such as pong) has it used as it is:
// json.Marshal would check and compact it again.
func encodeResult(result any) (json.RawMessage, error) {
	if raw, ok := result.(json.RawMessage); ok {
		return raw, nil
	}
	return json.Marshal(result)
}

// Close ends every subscription of the session. Processes keep running.
func (se *Session) Close() {
	se.mu.Lock()
	if se.closed {
		se.mu.Unlock()
		return
	}
	se.closed = true
	subs := se.subs
	se.subs = nil
	se.mu.Unlock()
	se.cancel()
	if _, isConn := se.sink.(*conn); !isConn {
		// A connection lets go of its runs once its last requests are
		// applied (conn.serve); an in-process session at once.
		se.s.runs.release(se)
	}
	for _, sub := range subs {
		sub.cur.Close()
	}
	se.pumps.Wait()
}
