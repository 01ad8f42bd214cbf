package client

import (
	"encoding/json"
	"fmt"
	"strconv"
	"sync"
	"sync/atomic"

	"github.com/seed5ad92d46/sous/daemon/wire"
)

// requestEncoder writes a link's requests one at a time into a buffer it
// reuses: what every encoded link shares.
type requestEncoder struct {
	qtoken []byte // the token as a JSON string, quoted once
	end    []byte // what follows each request: a line end, or nothing for a message
	mu     sync.Mutex
	buf    []byte
	// held are requests encoded but not written yet (hold): the next
	// request sent goes in the same write, after them. holding says held
	// is not empty, read without mu: a caller about to wait for an
	// answer must not queue behind a write blocked on a full socket,
	// which may need that very caller to read.
	held    []byte
	holding atomic.Bool
}

func newRequestEncoder(token string, end ...byte) requestEncoder {
	return requestEncoder{qtoken: wire.AppendJSONString(nil, token), end: end}
}

// send encodes one request and hands it to write, after what is held,
// under the encoder's lock so that requests never interleave.
func (e *requestEncoder) send(id uint64, method string, params json.RawMessage, write func([]byte) error) error {
	e.mu.Lock()
	defer e.mu.Unlock()
	b, err := e.encode(append(e.buf[:0], e.held...), id, method, params)
	if err == nil {
		e.held = e.held[:0]
		e.holding.Store(false)
		err = write(b)
	}
	e.keep(b)
	return err
}

// sendAlone is send for a request that must start a write of its own (a
// descriptor passed with it is bound to the line its first byte is in):
// what is held goes first, through writeHeld.
func (e *requestEncoder) sendAlone(id uint64, method string, params json.RawMessage, writeHeld, write func([]byte) error) error {
	e.mu.Lock()
	defer e.mu.Unlock()
	if err := e.flushLocked(writeHeld); err != nil {
		return err
	}
	b, err := e.encode(e.buf[:0], id, method, params)
	if err == nil {
		err = write(b)
	}
	e.keep(b)
	return err
}

// hold encodes one request without writing it: the next request sent
// carries it, or flush writes it.
func (e *requestEncoder) hold(id uint64, method string, params json.RawMessage) error {
	e.mu.Lock()
	defer e.mu.Unlock()
	b, err := e.encode(e.held, id, method, params)
	if err != nil {
		return err
	}
	e.held = b
	e.holding.Store(true)
	return nil
}

// flush writes what is held, if anything. With nothing held it returns
// at once, even while another request is being written.
func (e *requestEncoder) flush(write func([]byte) error) error {
	if !e.holding.Load() {
		return nil
	}
	e.mu.Lock()
	defer e.mu.Unlock()
	return e.flushLocked(write)
}

func (e *requestEncoder) flushLocked(write func([]byte) error) error {
	if len(e.held) == 0 {
		return nil
	}
	e.holding.Store(false)
	err := write(e.held)
	e.held = e.held[:0]
	if cap(e.held) > 4<<20 {
		e.held = nil
	}
	return err
}

// encode appends one request and its end to b.
func (e *requestEncoder) encode(b []byte, id uint64, method string, params json.RawMessage) ([]byte, error) {
	b, err := appendRequest(b, id, method, params, e.qtoken)
	if err != nil {
		return b, err
	}
	return append(b, e.end...), nil
}

// keep reuses b as the buffer of the next request, unless it is huge.
func (e *requestEncoder) keep(b []byte) {
	e.buf = b
	if cap(e.buf) > 4<<20 {
		e.buf = nil // do not pin a huge buffer after one big write
	}
}

// appendRequest appends one request, without a line end, and refuses one
// the daemon would not read (over its 1 MiB cap). qtoken is the token
// already quoted as a JSON string.
func appendRequest(b []byte, id uint64, method string, params json.RawMessage, qtoken []byte) ([]byte, error) {
	start := len(b)
	b = append(b, `{"jsonrpc":"2.0","id":`...)
	b = strconv.AppendUint(b, id, 10)
	b = append(b, `,"method":`...)
	b = wire.AppendJSONString(b, method)
	if params != nil {
		b = append(b, `,"params":`...)
		b = append(b, params...)
	}
	b = append(b, `,"auth":`...)
	b = append(b, qtoken...)
	b = append(b, '}')
	if len(b)-start > wire.MaxLine {
		return b, fmt.Errorf("%s: request of %d bytes exceeds the daemon's 1 MiB line limit", method, len(b)-start)
	}
	return b, nil
}
