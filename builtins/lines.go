package builtins

import (
	"fmt"

	"go.starlark.net/starlark"
)

// lines is the value of Process.lines(): a single-pass iterable over one
// output stream.
type lines struct {
	p      *Process
	r      *lineReader
	stream int
	thread *starlark.Thread // to fail the recipe when following is lost
}

var _ starlark.Iterable = (*lines)(nil)

func (l *lines) String() string        { return fmt.Sprintf("<lines of %s>", l.p.id) }
func (l *lines) Type() string          { return "lines" }
func (l *lines) Freeze()               {}
func (l *lines) Truth() starlark.Bool  { return starlark.True }
func (l *lines) Hash() (uint32, error) { return 0, fmt.Errorf("unhashable type: lines") }
func (l *lines) Iterate() starlark.Iterator {
	return &linesIter{l}
}

type linesIter struct{ *lines }

// Next blocks through the event loop until a line or the end arrives.
// starlark.Iterator has no way to return an error, so when following the
// process fails, or the iteration fell too far behind (see lineReader),
// Next cancels the thread with the reason: the recipe stops there with
// that message, as a failing builtin would.
func (it *linesIter) Next(v *starlark.Value) bool {
	p, env, r := it.p, it.p.env, it.r
	for {
		p.mu.Lock()
		line, ok, done := r.next()
		failed := r.err
		p.mu.Unlock()
		if ok {
			*v = starlark.String(line)
			return true
		}
		if done {
			if failed != nil {
				it.thread.Cancel(fmt.Sprintf("Process.lines: %v", failed))
			} else if err := p.lostErr(); err != nil {
				it.thread.Cancel(fmt.Sprintf("Process.lines: %v", err))
			}
			return false
		}
		if err := env.Loop.Wait(env.Ctx, r.wake); err != nil {
			// Interrupted. The runtime cancels the thread too, but from
			// another goroutine: until it does, the loop would look
			// finished and the recipe would go on past it.
			it.thread.Cancel("interrupted")
			return false
		}
	}
}

// Done stops feeding the reader: the recipe left the loop.
func (it *linesIter) Done() {
	it.p.mu.Lock()
	defer it.p.mu.Unlock()
	it.p.out[it.stream].detach(it.r)
	it.r.ended = true
	it.r.close()
	it.r.done()
}

// lostErr says why following failed, or nil when the process exited.
func (p *Process) lostErr() error {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.closed && !p.exited {
		return fmt.Errorf("lost process %s: %w", p.id, p.err)
	}
	return nil
}
