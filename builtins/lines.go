package builtins

import (
	"fmt"

	"go.starlark.net/starlark"

	"github.com/seed5ad92d46/sous/runtime"
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
	return &linesIter{lines: l}
}

type linesIter struct {
	*lines
	given    int // lines the iteration gave the recipe
	consumed int // lines taken from the reader: more than given on a resume that took the process over
}

// Next blocks through the event loop until a line or the end arrives.
// starlark.Iterator has no way to return an error, so when following the
// process fails, or the iteration fell too far behind (see lineReader),
// Next cancels the thread with the reason: the recipe stops there with
// that message, as a failing builtin would.
//
// In a durable run each line is journaled as a step of its own, so that a
// resumed run's loop gets the lines the run's loop got, and goes on from
// there with the process it took over (process_durable.go).
func (it *linesIter) Next(v *starlark.Value) bool {
	p := it.p
	if p.env.Journal == nil {
		line, ok, err := it.next()
		if err != nil {
			it.thread.Cancel(err.Error())
		}
		if ok {
			*v = starlark.String(line)
		}
		return ok
	}
	name := "stdout"
	if it.stream == 1 {
		name = "stderr"
	}
	c := &runtime.Call{Env: p.env, Thread: it.thread, Name: "Process.lines.next", Recv: p,
		Args: starlark.Tuple{starlark.String(name), starlark.MakeInt(it.given)}}
	line, err := runtime.JournalStep(c, runtime.JournalAnswer, it.pull)
	if err != nil {
		it.thread.Cancel(err.Error())
		return false
	}
	s, ok := line.(starlark.String)
	if !ok {
		return false
	}
	it.given++
	*v = s
	return true
}

// pull takes the next line the recipe has not been given from the
// reader: a string, or None at the end.
func (it *linesIter) pull(c *runtime.Call) (starlark.Value, error) {
	if err := it.p.ensureLive(c, false); err != nil {
		return nil, err
	}
	for {
		line, ok, err := it.next()
		if err != nil || !ok {
			return starlark.None, err
		}
		it.consumed++
		if it.consumed > it.given {
			return starlark.String(line), nil
		}
	}
}

// next reads the next line from the reader, waiting for it: ok is false
// at the end.
func (it *linesIter) next() (string, bool, error) {
	p, env, r := it.p, it.p.env, it.r
	for {
		p.mu.Lock()
		line, ok, done := r.next()
		failed := r.err
		p.mu.Unlock()
		if ok {
			return line, true, nil
		}
		if done {
			if failed != nil {
				return "", false, fmt.Errorf("Process.lines: %v", failed)
			} else if err := p.lostErr(); err != nil {
				return "", false, fmt.Errorf("Process.lines: %v", err)
			}
			return "", false, nil
		}
		if err := env.Loop.Wait(env.Ctx, r.wake); err != nil {
			// Interrupted. The runtime cancels the thread too, but from
			// another goroutine: until it does, the loop would look
			// finished and the recipe would go on past it.
			return "", false, errInterrupted
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
