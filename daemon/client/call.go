package client

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"sync"
	"syscall"
)

// call is one request awaiting its response.
type call struct {
	method string
	params json.RawMessage
	retry  bool       // safe to send again after a reconnect
	files  []*os.File // passed with the request (filePasser); never resent
	via    link       // the link it was sent on
	// spawning is the process a process.spawn starts, which its caller
	// may follow while reading its own answer (readerHints.quiet).
	spawning *Proc
	// lazy says nobody waits for the answer yet (AppendRunAsync): the
	// reader goroutine need not stay up for it, and whoever reads next
	// takes it. Await clears it. c.mu guards it.
	lazy bool
	// ahead lets a link that can (holder) hold the request back until its
	// next request, or a wait for an answer, writes it (AppendOptions).
	ahead  bool
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
	// A run's requests: publishing or withdrawing twice is doing it once,
	// and a wait is a read. An answer is not resent: its second arrival
	// would be refused as decided, by itself.
	"approval.publish": true, "approval.list": true, "approval.wait": true, "approval.withdraw": true,
	// A run's journal: the lease re-takes it on the new connection, and an
	// append names the record count it follows, so each is applied once.
	"run.create": true, "run.open": true, "run.append": true, "run.sync": true, "run.close": true, "run.list": true,
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
	return c.startCall(ctx, &call{method: method, params: params, retry: retryable[method] && files == nil, files: files, done: make(chan struct{})})
}

// startCall sends cl, as start does.
func (c *Client) startCall(ctx context.Context, cl *call) (uint64, *call, error) {
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
	defer c.settle(id, cl)
	if cl.lazy { // only its waiter writes it once the call is sent
		c.mu.Lock()
		cl.lazy = false
		c.mu.Unlock()
	}
	if !c.awaitDone(ctx, cl) {
		return nil, fmt.Errorf("%s: %w", cl.method, ctx.Err())
	}
	return cl.result, cl.err
}

// awaitDone waits until cl is answered, and reports true, or until ctx
// ends (false); the call stays pending either way, for settle to forget.
func (c *Client) awaitDone(ctx context.Context, cl *call) bool {
	select {
	case <-cl.done:
		return true // answered already: nobody need read for it
	default:
	}
	c.mu.Lock()
	via := cl.via
	c.mu.Unlock()
	if h, ok := via.(holder); ok {
		// Nothing held back may wait on an answer: it could be this
		// call, or one before it that the daemon answers first. A
		// failed write ends the link, and the reconnect resends or
		// fails cl, as for any call on a link that broke.
		_ = h.flushHeld()
	}
	if r, ok := via.(selfReader); ok {
		r.readUntil(ctx, cl.done, cl.spawning)
	}
	select {
	case <-cl.done:
		return true
	case <-ctx.Done():
		return false
	}
}

// settle forgets a call its caller no longer waits for, once any resend of
// it under way is over.
func (c *Client) settle(id uint64, cl *call) {
	c.forget(id)
	cl.sendMu.Lock() // waits out a resend under way
	cl.sendMu.Unlock()
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
		if c.resending != nil {
			l, ready = nil, c.resending // a resume sends older calls again: after them
		}
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
		if h, ok := l.(holder); ok && cl.ahead {
			send = h.hold
		}
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
