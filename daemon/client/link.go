package client

import (
	"context"
	"encoding/json"

	"github.com/seed5ad92d46/sous/daemon/wire"
)

// link is one connection to a daemon. The client owns at most one at a time
// and replaces it when it breaks. The transports: streamLink (streamlink.go,
// selfread.go) speaks NDJSON over a Unix socket or an ssh bridge, wsLink
// (wslink.go) over a WebSocket, and localLink (local.go) calls an
// in-process daemon directly. Encoded links share encode.go and
// dispatch.go; fdpass.go passes descriptors where a link can.
type link interface {
	// send transmits one request. The response arrives through the
	// receiver given when the link was made.
	send(id uint64, method string, params json.RawMessage) error
	close()
}

// holder is a link that can hold a request back to write it with the next
// one (streamLink): a runner's journal record and the request of the
// effect it precedes then cost one write, and the daemon one wake-up.
type holder interface {
	// hold encodes a request for the link's next write: the next send
	// carries it, or flushHeld writes it.
	hold(id uint64, method string, params json.RawMessage) error
	// flushHeld writes what is held, if anything.
	flushHeld() error
}

// receiver is what a link feeds. Frames handed to frames are valid only
// during the call: their Data may be reused afterwards. A result handed
// to response is the receiver's to keep.
type receiver interface {
	response(l link, id uint64, result json.RawMessage, err error)
	frames(l link, procID string, frames []wire.Frame)
	gone(l link, g wire.Gone)
	closed(l link, err error)
}

// readerHints tells a link whether anyone expects what it reads.
type readerHints interface {
	// quiet reports that no process is followed but spawning (nil: none
	// at all), the process whose spawn a caller awaits: nothing arrives
	// but answers to calls (the spawned process's frames come after its
	// answer), so a caller may read its own.
	quiet(spawning *Proc) bool
	// idle reports that nothing is expected that someone waits for: no
	// process is followed and no call awaits its answer (a lazy call's
	// answer is read by whoever reads next).
	idle() bool
	// unwatched is idle, but for processes followed without a frame
	// handler (Proc.silent) that no caller has asked after yet: their
	// frames may wait on the connection until one does (Proc.Wait
	// reads them itself; Done and the other accessors hand the reading
	// to the reader goroutine).
	unwatched() bool
}

// selfReader is a link on which a caller can read its own answer (see
// streamLink): checked before a call goes out on it (probe), read by the
// caller while it waits (readUntil), and told when a call goes out whose
// waiter will not read (wakeReader).
type selfReader interface {
	readUntil(ctx context.Context, done <-chan struct{}, spawning *Proc)
	probe() bool
	wakeReader()
}
