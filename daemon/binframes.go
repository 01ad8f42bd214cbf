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
var connectionNamespace = map[string]handler{
	"binaryFrames": connectionBinaryFrames,
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

// frameEnd is where one frame of a batch ends in its buffer, and whether
// it is in binary form.
type frameEnd struct {
	end    int
	binary bool
}

// frameBatch is a batch of frames encoded for a binary-frames connection.
type frameBatch struct {
	b    []byte
	ends []frameEnd
}

// encode encodes frames into the batch: those that carry data in binary
// form, the others (exit frames, mirrored ones) as JSON lines.
func (bt *frameBatch) encode(quotedID []byte, frames []wire.Frame) {
	bt.b, bt.ends = bt.b[:0], bt.ends[:0]
	for i := range frames {
		f := &frames[i]
		bin := wire.CarriesData(f)
		if bin {
			bt.b = wire.AppendBinaryFrame(bt.b, quotedID, f)
		} else {
			bt.b = wire.AppendFrame(bt.b, quotedID, f)
		}
		bt.ends = append(bt.ends, frameEnd{end: len(bt.b), binary: bin})
	}
}

// sendBinaryFrames encodes a batch of frames in binary form and writes it
// in one go.
func (c *conn) sendBinaryFrames(quotedID []byte, frames []wire.Frame) error {
	bt := c.batches.Get().(*frameBatch)
	bt.encode(quotedID, frames)
	c.wmu.Lock()
	err := c.writeFramesLocked(bt)
	c.wmu.Unlock()
	c.batches.Put(bt)
	return err
}

// writeFramesLocked writes a binary batch with wmu held; a broken writer
// ends the connection, as in writeLocked.
func (c *conn) writeFramesLocked(bt *frameBatch) error {
	err := c.t.writeFrames(bt.b, bt.ends)
	if err != nil {
		c.t.close(err)
	}
	return err
}
