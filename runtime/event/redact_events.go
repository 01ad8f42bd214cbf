package event

import (
	"slices"
	"strings"

	"github.com/seed5ad92d46/sous/daemon/wire"
)

// Redact registers secret: from the next event on, it and the forms
// given (the same value as some output quotes it) are replaced by Marker
// in every event, before the State and any sink see it, so no output of
// the run (the lines, --json, the summary, GitHub's, a web page) ever
// has it. It reports false, registering nothing, for a value shorter than
// MinSecret.
func (b *Bus) Redact(secret string, forms ...string) bool {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.secrets.add(secret, forms...)
}

// RedactLocked returns s with the registered secrets replaced, for a sink
// that writes text it kept from an earlier event (the run's args, from
// its start event, published before the recipe could register any):
// call it with the lock held, in the sink's Handle.
func (b *Bus) RedactLocked(s string) string { return b.secrets.String(s) }

// streamKey names one output stream of one process.
type streamKey struct {
	id     string
	stream wire.Stream
}

// heldOutput is what the bus holds back of a process's stream: the end of
// the last chunk, which may be the start of a secret the next chunk ends.
type heldOutput struct {
	carry []byte
	// mid says carry starts in the middle of a line (the event that
	// carries it goes without the "[id] " prefix).
	mid bool
}

// redactOutput publishes a chunk of output with the secrets in it
// replaced (lock held, secrets registered). What may be the start of a
// secret at the end of the chunk waits for the next chunk of the same
// stream, so a secret the process wrote in two pieces, or that the daemon
// cut across two frames, is still found. The event it publishes is the
// bus's own, reused like the echo's: no allocation per chunk once the
// buffers have grown.
func (b *Bus) redactOutput(e *Output) {
	key := streamKey{e.ID, e.Stream}
	held := b.held[key]
	buf, mid := e.Data, e.MidLine
	if held != nil && len(held.carry) > 0 {
		b.joined = append(append(b.joined[:0], held.carry...), e.Data...)
		buf, mid = b.joined, held.mid
	}
	out, kept := b.secrets.redact(b.redacted[:0], buf, !e.Last)
	b.redacted = out
	if tail := buf[kept:]; len(tail) > 0 {
		if held == nil {
			if b.held == nil {
				b.held = make(map[streamKey]*heldOutput)
			}
			held = &heldOutput{}
			b.held[key] = held
		}
		held.mid = mid
		if len(out) > 0 {
			held.mid = out[len(out)-1] != '\n'
		}
		held.carry = append(held.carry[:0], tail...)
	} else if held != nil {
		held.carry = held.carry[:0]
	}
	if len(out) == 0 && !e.Last {
		return // all of it waits for the next chunk
	}
	b.out = Output{ID: e.ID, Stream: e.Stream, Data: out, MidLine: mid, Last: e.Last}
	b.deliver(&b.out)
	b.out.Data = nil
}

// flushHeld publishes what the bus holds back of process id's streams (of
// every process when id is ""): its echo ended, or the run does, and no
// chunk will finish a secret there. Lock held.
func (b *Bus) flushHeld(id string, all bool) {
	var keys []streamKey
	for k, h := range b.held {
		if all || k.id == id {
			if len(h.carry) > 0 {
				keys = append(keys, k)
			} else {
				delete(b.held, k)
			}
		}
	}
	slices.SortFunc(keys, func(x, y streamKey) int {
		if c := strings.Compare(x.id, y.id); c != 0 {
			return c
		}
		return int(x.stream) - int(y.stream)
	})
	for _, k := range keys {
		h := b.held[k]
		delete(b.held, k)
		out, _ := b.secrets.redact(nil, h.carry, false)
		last := len(out) > 0 && out[len(out)-1] != '\n'
		b.deliver(&Output{ID: k.id, Stream: k.stream, Data: out, MidLine: h.mid, Last: last})
	}
}

// redactEvent returns e with the secrets in its text replaced: e itself
// when it holds none, else a copy (the publisher's event is left as it
// is). Output goes through redactOutput instead.
func (b *Bus) redactEvent(e Event) Event {
	s := &b.secrets
	switch e := e.(type) {
	case *Start:
		c := *e
		c.Recipe = s.String(e.Recipe)
		c.Args = make(map[string]string, len(e.Args))
		for k, v := range e.Args {
			c.Args[k] = s.String(v)
		}
		return &c
	case *Log:
		return &Log{Text: s.String(e.Text)}
	case *Error:
		return &Error{Text: s.String(e.Text)}
	case *Failure:
		return &Failure{Text: s.String(e.Text)}
	case *Prompt:
		return &Prompt{Text: s.String(e.Text)}
	case *Spawn:
		c := *e
		c.Command = make([]string, len(e.Command))
		for i, a := range e.Command {
			c.Command[i] = s.String(a)
		}
		return &c
	case *Agent:
		c := *e
		c.Message = s.JSON(e.Message)
		return &c
	case *Approval:
		c := redactApproval(s, *e)
		return &c
	case *Pending:
		return &Pending{Approval: redactApproval(s, e.Approval)}
	case *Hook:
		c := *e
		c.Summary = s.String(e.Summary)
		if len(e.Output) > 0 {
			c.Output = s.JSON(e.Output)
		}
		return &c
	case *End:
		c := *e
		c.Error, c.Source = s.String(e.Error), s.String(e.Source)
		return &c
	}
	return e // no text of the recipe's: ids, counts, codes
}

func redactApproval(s *secrets, a Approval) Approval {
	a.Summary, a.Message, a.Description = s.String(a.Summary), s.String(a.Message), s.String(a.Description)
	if a.Input != nil {
		a.Input, _ = redactValue(s, a.Input).(map[string]any)
	}
	return a
}

// redactValue is a JSON-like value (a tool's input) with the secrets in
// its strings replaced: a copy, the original left as it is.
func redactValue(s *secrets, v any) any {
	if s.empty() {
		return v
	}
	switch x := v.(type) {
	case string:
		return s.String(x)
	case map[string]any:
		c := make(map[string]any, len(x))
		for k, e := range x {
			c[s.String(k)] = redactValue(s, e)
		}
		return c
	case []any:
		c := make([]any, len(x))
		for i, e := range x {
			c[i] = redactValue(s, e)
		}
		return c
	}
	return v
}

// RedactText is s with the secrets registered so far replaced, for what
// the run shows outside its events (a request published to a daemon).
func (b *Bus) RedactText(s string) string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.secrets.String(s)
}

// RedactValue is RedactText for a JSON-like value (a tool's input): a
// copy when it holds a secret.
func (b *Bus) RedactValue(v any) any {
	b.mu.Lock()
	defer b.mu.Unlock()
	return redactValue(&b.secrets, v)
}
