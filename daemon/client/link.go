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
// during the call: their Data may be reused afterwards.
type receiver interface {
	response(l link, id uint64, result json.RawMessage, err error)
	frames(l link, procID string, frames []wire.Frame)
	gone(l link, g wire.Gone)
	closed(l link, err error)
}

// ---- NDJSON over a byte stream (Unix socket, ssh bridge) ----

// streamLink speaks NDJSON over any byte stream.
type streamLink struct {
	rwc  io.ReadWriteCloser
	recv receiver
	enc  requestEncoder

	closeOnce sync.Once
}

func newStreamLink(rwc io.ReadWriteCloser, token string, recv receiver) *streamLink {
	l := &streamLink{rwc: rwc, recv: recv, enc: newRequestEncoder(token, '\n')}
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
}

// maxResponseLine bounds a response line from the daemon (files.read of a
// large file is the biggest legitimate one).
const maxResponseLine = 256 << 20

func (l *streamLink) read() {
	r := bufio.NewReaderSize(l.rwc, 256<<10)
	var (
		d       lineDispatcher
		long    []byte
		lastErr error
	)
	for {
		line, err := r.ReadSlice('\n')
		if errors.Is(err, bufio.ErrBufferFull) {
			// A long line (a big response): gather it.
			long = append(long[:0], line...)
			for errors.Is(err, bufio.ErrBufferFull) && len(long) < maxResponseLine {
				line, err = r.ReadSlice('\n')
				long = append(long, line...)
			}
			line = long
		}
		if err != nil {
			lastErr = err
			break
		}
		if lastErr = d.dispatch(l, l.recv, line); lastErr != nil {
			break
		}
	}
	l.close()
	if errors.Is(lastErr, io.EOF) {
		lastErr = io.ErrUnexpectedEOF
	}
	l.recv.closed(l, lastErr)
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
func (d *lineDispatcher) dispatch(l link, recv receiver, line []byte) error {
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
	const head, mid = `{"jsonrpc":"2.0","id":`, `,"result":`
	rest, found := bytes.CutPrefix(line, []byte(head))
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
	rest, found = bytes.CutPrefix(rest[n:], []byte(mid))
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
