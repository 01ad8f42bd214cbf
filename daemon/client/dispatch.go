package client

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"strconv"

	"github.com/seed5ad92d46/sous/daemon/wire"
)

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

// lineDispatcher routes what the daemon sends, a response or a stream frame
// per line or message, to a receiver. It is shared by every encoded link and
// keeps one frame's data buffer for reuse.
type lineDispatcher struct {
	frame wire.Frame
	one   [1]wire.Frame

	// A binary frame read from a byte stream (binframes.go): its header
	// was dispatched, and its data, want bytes of which have are in
	// frame.Data so far, is still to be read (pending) before it is
	// delivered for id.
	pending    bool
	want, have int
	id         []byte
}

// dispatch handles one line (its line end, if any, is ignored). An error
// means the daemon's output is out of step: the link must end. A binary
// frame's header leaves the dispatcher awaitingData: the link reads the
// data (readData) before the next line.
//
// owned says the line's buffer is not read into again: a result can be
// handed on without a copy.
func (d *lineDispatcher) dispatch(l link, recv receiver, line []byte, owned bool) error {
	line = bytes.TrimRight(line, "\r\n")
	if len(line) == 0 {
		return nil
	}
	if wire.IsFrameLine(line) {
		id, n, perr := wire.ParseFrameHeader(line, &d.frame)
		if perr == nil && n >= 0 {
			d.startBinary(id, n)
			return nil
		}
		if perr == nil {
			d.deliver(l, recv, id)
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
