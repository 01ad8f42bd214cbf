package client

import (
	"bufio"
	"bytes"
	"encoding/json"
	"errors"
	"io"
	"net"
	"sync"
	"sync/atomic"
)

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

	selfReads   atomic.Int64 // answers (and Wait's exit frames) their callers read themselves (for the tests)
	readerWakes atomic.Int64 // the parked reader goroutine handed the reading (for the tests)
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
	return l.enc.send(id, method, params, l.write)
}

// write writes b whole; a failed write ends the link (the reader notices).
func (l *streamLink) write(b []byte) error {
	if _, err := l.rwc.Write(b); err != nil {
		l.rwc.Close()
		return err
	}
	return nil
}

// hold implements holder: the request goes in the write of the next one.
func (l *streamLink) hold(id uint64, method string, params json.RawMessage) error {
	return l.enc.hold(id, method, params)
}

// flushHeld implements holder.
func (l *streamLink) flushHeld() error { return l.enc.flush(l.write) }

func (l *streamLink) close() {
	l.closeOnce.Do(func() { l.rwc.Close() })
	// A parked reader goroutine would wait forever: end it. (A goroutine
	// reading fails on the closed stream and reports it.)
	l.rmu.Lock()
	l.closing = true
	l.ensureReader()
	l.rmu.Unlock()
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

// step reads one line and dispatches it, and a binary frame's data after
// its header (binframes.go). Only the role's holder calls it.
func (l *streamLink) step() error {
	if !l.d.awaitingData() {
		line, err := l.readLine()
		if err != nil {
			return answerOversized(l, l.recv, err)
		}
		if err := l.d.dispatch(l, l.recv, line, l.owned); err != nil || !l.d.awaitingData() {
			return err
		}
	}
	return l.d.readData(l, l.recv, l.r)
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
