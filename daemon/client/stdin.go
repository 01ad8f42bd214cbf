package client

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strconv"

	"github.com/seed5ad92d46/sous/daemon/wire"
)

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
