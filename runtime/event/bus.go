package event

import (
	"sync"
	"time"
)

// Sink is an output of the run. Handle runs under the bus's lock, on the
// publisher's goroutine: it must not publish, and it returns promptly
// (writes may block on a slow reader; that pushes back on the run, as it
// should). at is when the event was published.
type Sink interface {
	Handle(at time.Time, e Event)
}

// Bus hands every event to the run's State and then to each sink.
type Bus struct {
	mu    sync.Mutex
	now   func() time.Time
	state *State
	sinks []Sink
	ended bool

	// What Redact registered, and the redaction's buffers (redact_events.go):
	// the held-back end of each output stream, a held end and the chunk
	// after it, the redacted chunk and the event that carries it.
	secrets  secrets
	held     map[streamKey]*heldOutput
	joined   []byte
	redacted []byte
	out      Output
}

// New returns a bus with an empty State; now is its clock (nil:
// time.Now).
func New(now func() time.Time) *Bus {
	if now == nil {
		now = time.Now
	}
	return &Bus{now: now, state: newState()}
}

// Subscribe adds a sink; sinks see each event in the order they
// subscribed. Subscribe before the first event.
func (b *Bus) Subscribe(s Sink) {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.sinks = append(b.sinks, s)
}

// State is the run as the events so far tell it. Read it only under the
// bus's lock: in a sink's Handle, or between Lock and Unlock.
func (b *Bus) State() *State { return b.state }

// Now is the bus's clock.
func (b *Bus) Now() time.Time { return b.now() }

// Publish hands e to the State and the sinks, with what Redact registered
// replaced (redact_events.go). After End, only what is
// still for the person at the terminal (Error, Prompt, PromptDone) goes on:
// the --json stream ends with its end event.
func (b *Bus) Publish(e Event) {
	b.mu.Lock()
	b.PublishLocked(e)
	b.mu.Unlock()
}

// Lock takes the bus's lock: what a caller does between Lock and Unlock
// (several PublishLocked calls, reading State, a redraw) is not
// interleaved with any other event.
func (b *Bus) Lock() { b.mu.Lock() }

// Unlock releases Lock.
func (b *Bus) Unlock() { b.mu.Unlock() }

// PublishLocked is Publish for a caller that holds the lock.
func (b *Bus) PublishLocked(e Event) {
	if b.ended {
		switch e.(type) {
		case *Error, *Prompt, *PromptDone:
		default:
			return
		}
	}
	if !b.secrets.empty() {
		switch e := e.(type) {
		case *Output:
			b.redactOutput(e)
			return
		case *EchoEnd:
			b.flushHeld(e.ID, false)
		case *End:
			b.flushHeld("", true)
		}
		e = b.redactEvent(e)
	}
	if _, ok := e.(*End); ok && b.state.Holding {
		b.deliver(&Settle{}) // the recipe's end settles what it spawned
	}
	b.deliver(e)
}

// deliver hands e to the State and the sinks (lock held).
func (b *Bus) deliver(e Event) {
	at := b.now()
	b.state.apply(at, e)
	for _, s := range b.sinks {
		s.Handle(at, e)
	}
	switch e.(type) {
	case *End:
		b.ended = true
	case *Output:
		if b.state.overHeld() {
			b.deliver(&Settle{}) // a flood is not kept back
		}
	}
}

// Ended reports whether the End event went out (lock held).
func (b *Bus) Ended() bool { return b.ended }

// SinkFunc is a function as a Sink.
type SinkFunc func(at time.Time, e Event)

// Handle implements Sink.
func (f SinkFunc) Handle(at time.Time, e Event) { f(at, e) }
