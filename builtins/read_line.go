package builtins

import (
	"context"
	"fmt"
	"time"

	"go.starlark.net/starlark"

	"github.com/seed5ad92d46/sous/daemon/wire"
	"github.com/seed5ad92d46/sous/runtime"
)

const readLineDoc = "The next line of stdout or stderr that this handle has not read yet, without its line end (\"\\n\" or " +
	"\"\\r\\n\"), waiting for it to arrive; a last line without a newline comes at exit, then None once everything was read. " +
	"It goes on from the previous call, so a recipe can write() a question and read_line() its answer, round after round " +
	"(lines() starts from the first line on every call). The first call starts from the first line the process wrote. " +
	"When timeout (seconds) passes before a whole line arrives, read_line fails, as wait(timeout) does, and the process " +
	"keeps running. While it waits, other processes stream and permission requests are answered. From the first call " +
	"until the process ends, output not read yet is kept as a lines() iteration keeps it (4 MiB in memory, then up to " +
	"1 GiB in a temporary file; further behind, read_line fails after the lines before the gap): a recipe that wants " +
	"one line of a chatty long-running process and no more can break out of a lines() loop instead."

// processReadLine is Process.read_line: one reader per stream, kept on the
// Process, so that each call goes on where the previous one stopped.
func processReadLine(c *runtime.Call, p *Process) (starlark.Value, error) {
	stream := wire.Stdout
	var timeout *time.Duration
	if err := bind(c, 2, opt("stream", streamArg(&stream)), opt("timeout", optSeconds(&timeout))); err != nil {
		return nil, err
	}
	i, _ := streamIndex(stream)
	if err := p.ensureLive(c, false); err != nil { // process_durable.go
		return nil, err
	}
	p.mu.Lock()
	r := p.readLines[i]
	if r == nil {
		var err error
		if r, err = p.newLineReader(c, i, stream); err != nil {
			p.mu.Unlock()
			return nil, err
		}
		p.readLines[i] = r
	}
	p.mu.Unlock()

	ctx := c.Env.Ctx
	if timeout != nil {
		// One deadline for the whole call, however often the reader wakes.
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, *timeout)
		defer cancel()
	}
	for {
		p.mu.Lock()
		line, ok, done := r.next()
		failed := r.err
		p.mu.Unlock()
		switch {
		case ok && p.readSkip[i] > 0:
			// Given by the journal to a resumed run: read again from
			// the process it took over, and passed.
			p.readSkip[i]--
			continue
		case ok:
			return starlark.String(line), nil
		case done && failed != nil:
			return nil, c.Errorf("%v", failed)
		case done:
			if err := p.lostErr(); err != nil {
				return nil, c.Errorf("%v", err)
			}
			return starlark.None, nil
		}
		if err := c.Env.Loop.Wait(ctx, r.wake); err != nil {
			if c.Env.Ctx.Err() != nil {
				return nil, c.Errorf("%v", errInterrupted)
			}
			return nil, c.Errorf("process %s wrote no complete line on %s within %s; it keeps running", p.id, stream, formatSeconds(*timeout))
		}
	}
}

// newLineReader starts a reader of stream i from its first byte, for
// lines() or read_line. p.mu is held.
func (p *Process) newLineReader(c *runtime.Call, i int, stream wire.Stream) (*lineReader, error) {
	r := p.out[i].reader(fmt.Sprintf("process %s's %s", p.id, stream), procOf(c.Env).lines)
	if r == nil {
		return nil, c.Errorf("process %s wrote more than the %d bytes of %s it keeps before the first %s() call, so its lines cannot start from the first",
			p.id, p.opt.limit, stream, c.Name[len("Process."):])
	}
	return r, nil
}
