package daemon

import (
	"context"
	"encoding/json"

	"github.com/seed5ad92d46/sous/daemon/wire"
)

// Binary frames (extension connection.binaryFrames, docs/PROTOCOL.md §6.25).
// Output sent as base64 in JSON costs a third more bytes on the wire (and
// through ssh's cipher) and an encode here and a decode in every client:
// most of a protocol client's CPU when a child writes a lot. A connection
// that asks gets each output frame that carries data as its JSON header
// line with "dataBytes":N, then the N bytes themselves (one binary message
// on WebSocket). Everything else stays JSON, and a connection that never
// asks sees claustrum's bytes exactly.

// connectionNamespace holds the methods about the connection itself.
func connectionNamespace() map[string]handler {
	return map[string]handler{
		"binaryFrames": connectionBinaryFrames,
		"stdio":        connectionStdioLate, // stdio.go
	}
}

// binaryFramesSwitch is connection.binaryFrames's result: the connection
// (conn.handle) answers it with {} and switches as it writes the answer. An
// in-process session, whose frames are never encoded, just gets {}.
type binaryFramesSwitch struct{}

// connectionBinaryFrames switches the connection to binary frames. Its
// params are ignored (send {}), as server.*'s are.
func connectionBinaryFrames(_ context.Context, se *Session, _ json.RawMessage) (any, func(), error) {
	if !se.s.enabled(wire.FeatureBinaryFrames) {
		return nil, nil, wire.Errorf(wire.CodeMethodNotFound, "Unknown method: %s", wire.BinaryFramesMethod)
	}
	return binaryFramesSwitch{}, nil, nil
}

// switchToBinary answers connection.binaryFrames and switches the
// connection in the same hold of the write lock: every output frame written
// after the answer is binary, every one before it JSON.
func (c *conn) switchToBinary(id json.RawMessage) {
	bp := c.bufs.Get().(*[]byte)
	b := append(appendResponseID((*bp)[:0], id), `,"result":{}}`+"\n"...)
	c.wmu.Lock()
	if c.writeLocked(b, nil) == nil {
		c.binary.Store(true)
	}
	c.wmu.Unlock()
	*bp = b
	c.bufs.Put(bp)
}

// frameRec is one frame of a binary batch: the bytes of its encoding in the
// batch's buffer (a JSON line, or a binary frame's header line and, when
// short, its data), its data when that is written from where it lies, and
// whether it is in binary form.
type frameRec struct {
	start, end int
	data       []byte
	binary     bool
}

// frameBatch is a batch of frames encoded for a binary-frames connection.
type frameBatch struct {
	b     []byte
	recs  []frameRec
	parts [][]byte // the batch as a byte stream writes it (writev)
}

// copyBelow is the data length under which a binary frame's data is copied
// into the batch's buffer: a longer one is written from the frame's own
// buffer (frames are never modified once published), which saves the
// daemon a copy of nearly every byte a busy child writes, and a shorter
// one would cost writev more than its copy.
const copyBelow = 4 << 10

// encode encodes frames into the batch: those that carry data in binary
// form, the others (exit frames, mirrored ones) as JSON lines.
func (bt *frameBatch) encode(quotedID []byte, frames []wire.Frame) {
	bt.b, bt.recs = bt.b[:0], bt.recs[:0]
	for i := range frames {
		f := &frames[i]
		r := frameRec{start: len(bt.b), binary: wire.CarriesData(f)}
		switch {
		case !r.binary:
			bt.b = wire.AppendFrame(bt.b, quotedID, f)
		case len(f.Data) < copyBelow:
			bt.b = wire.AppendBinaryFrame(bt.b, quotedID, f)
		default:
			bt.b = wire.AppendBinaryFrameHeader(bt.b, quotedID, f)
			r.data = f.Data
		}
		r.end = len(bt.b)
		bt.recs = append(bt.recs, r)
	}
}

// stream returns the batch as the byte stream it is on a socket: runs of
// the buffer, and the data written from where it lies, in order.
func (bt *frameBatch) stream() [][]byte {
	bt.parts = bt.parts[:0]
	run := 0
	for _, r := range bt.recs {
		if r.data != nil {
			bt.parts = append(bt.parts, bt.b[run:r.end], r.data)
			run = r.end
		}
	}
	if run < len(bt.b) {
		bt.parts = append(bt.parts, bt.b[run:])
	}
	return bt.parts
}

// release drops the batch's references to frames' data before it goes
// back to the pool.
func (bt *frameBatch) release() {
	clear(bt.recs)
	clear(bt.parts[:cap(bt.parts)])
}

// sendBinaryFrames encodes a batch of frames in binary form and writes it
// in one go.
func (c *conn) sendBinaryFrames(quotedID []byte, frames []wire.Frame) error {
	bt := c.batches.Get().(*frameBatch)
	bt.encode(quotedID, frames)
	c.wmu.Lock()
	var err error
	if len(c.held) > 0 {
		err = c.writeLocked(nil, nil) // answers held go first (heldAnswers)
	}
	if err == nil {
		err = c.wrote(c.t.writeFrames(bt))
	}
	c.wmu.Unlock()
	bt.release()
	c.batches.Put(bt)
	return err
}
