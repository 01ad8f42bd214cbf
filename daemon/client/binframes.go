package client

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"

	"github.com/seed5ad92d46/sous/daemon/wire"
)

// Binary frames (extension connection.binaryFrames, docs/PROTOCOL.md
// §6.25): output frames whose data travels raw after a JSON header line
// instead of as base64 in it. Decoding base64 was a third of a protocol
// client's CPU on a child's bulk output, and base64 a third more bytes
// through ssh's cipher. The client asks for them on every encoded link
// before it follows a process there (Spawn, Reattach, and the reattaches
// of a reconnect), when the daemon advertises them; frames sent before
// that are JSON, so the readers take both forms.

// useBinaryFrames switches the current link to binary frames, once per
// link, when the daemon advertises them. A failure is not the caller's:
// frames then stay JSON on that link (a lost link is the reconnect's to
// mend, and the new link is switched while it resumes).
func (c *Client) useBinaryFrames(ctx context.Context) {
	if c.local {
		return // frames are never encoded in process
	}
	if ok, err := c.HasFeature(ctx, wire.FeatureBinaryFrames); err != nil || !ok {
		return
	}
	c.binMu.Lock()
	defer c.binMu.Unlock()
	c.mu.Lock()
	l := c.cur
	c.mu.Unlock()
	if l == nil || l == c.binLink {
		return // reconnecting (resume switches the new link), or switched
	}
	c.switchLink(ctx, l)
}

// switchLink asks l for binary frames. Called with binMu held, or while
// resuming l, before anyone else uses it.
func (c *Client) switchLink(ctx context.Context, l link) {
	err := c.callOn(ctx, l, wire.BinaryFramesMethod, struct{}{}, new(struct{}))
	var we *wire.Error
	if err == nil || errors.As(err, &we) {
		// Switched, or refused (a daemon restarted without the
		// extension): either way, not to be asked again on this link.
		c.binLink = l
	}
}

// resumeBinaryFrames switches a link being resumed to binary frames before
// it reattaches anything, when the daemon advertised them: the replays
// then come binary too.
func (c *Client) resumeBinaryFrames(ctx context.Context, l link) {
	if c.local {
		return
	}
	c.mu.Lock()
	on := c.features[wire.FeatureBinaryFrames]
	c.mu.Unlock()
	if !on {
		return
	}
	c.binMu.Lock()
	defer c.binMu.Unlock()
	c.switchLink(ctx, l)
}

// awaitingData reports whether a binary frame's header was dispatched and
// its data is still to be read (readData).
func (d *lineDispatcher) awaitingData() bool { return d.pending }

// startBinary takes the header of a binary frame whose n data bytes follow
// it on a byte stream: the id is copied (the line is read over by the data)
// and readData told how many bytes to read.
func (d *lineDispatcher) startBinary(id []byte, n int) {
	d.id = append(d.id[:0], id...)
	d.want, d.have, d.pending = n, 0, true
}

// readData reads the data of the binary frame whose header was dispatched,
// and dispatches the frame. Data that is in the link's read buffer, or
// fits there, is delivered from it, as a WebSocket message's is (frames
// are valid only during the call): copying every byte once more was a tenth
// to a fifth of a protocol client's CPU on a child's bulk output. Otherwise,
// or once a read was cut short (a deadline: see readUntil), the data is
// gathered in the frame's own buffer, keeping what a cut read got for the
// next call. A stream that ends within the data is a lost connection.
func (d *lineDispatcher) readData(l link, recv receiver, r io.Reader) error {
	if br, ok := r.(*bufio.Reader); ok && d.have == 0 && d.want <= br.Size() {
		data, err := br.Peek(d.want)
		if err == nil {
			own := d.frame.Data
			d.frame.Data = data
			d.pending = false
			d.deliver(l, recv, d.id)
			d.frame.Data = own[:0]
			_, err = br.Discard(d.want)
			return err
		}
		// Cut short: what Peek read stays buffered for the copy below.
	}
	if d.have == 0 {
		if cap(d.frame.Data) < d.want {
			d.frame.Data = make([]byte, d.want, wire.MaxFrameData)
		}
		d.frame.Data = d.frame.Data[:d.want]
	}
	n, err := io.ReadFull(r, d.frame.Data[d.have:])
	d.have += n
	if err != nil {
		if errors.Is(err, io.EOF) || errors.Is(err, io.ErrUnexpectedEOF) {
			return fmt.Errorf("%w: the connection ended within a binary frame's data (%d of %d bytes): %w",
				io.ErrUnexpectedEOF, d.have, len(d.frame.Data), wire.ErrDataBytes)
		}
		return err
	}
	d.pending = false
	d.deliver(l, recv, d.id)
	return nil
}

// dispatchBinary handles a binary frame held whole in msg (a WebSocket
// binary message). Its data is delivered from msg itself.
func (d *lineDispatcher) dispatchBinary(l link, recv receiver, msg []byte) error {
	own := d.frame.Data
	id, err := wire.ParseBinaryFrame(msg, &d.frame)
	if err != nil {
		d.frame.Data = own[:0]
		return fmt.Errorf("daemon sent a malformed binary frame: %w", err)
	}
	d.deliver(l, recv, id)
	d.frame.Data = own[:0] // msg's buffer is read into again: keep our own
	return nil
}

// deliver hands the parsed frame to recv.
func (d *lineDispatcher) deliver(l link, recv receiver, id []byte) {
	d.one[0] = d.frame
	recv.frames(l, string(id), d.one[:])
	d.frame.Data = d.one[0].Data // keep the grown buffer for reuse
}
