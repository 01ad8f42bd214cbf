package proc

import (
	"bytes"
	"slices"
	"sync/atomic"
	"time"

	"github.com/seed5ad92d46/sous/daemon/wire"
)

// supervise reads the output pipes until they end and reaps the child, then
// appends the exit frame. It reaps on its own goroutine rather than waiting
// for another's: one goroutine fewer to start and wake for every child, on
// the path from its exit to its exit frame.
//
// The exit frame is appended by whichever of the reaper and the pipe
// readers finishes last (finishing), not by the reaper after waiting for
// the readers: a child's exit ends its pipes and its pidfd at once, and the
// reaper sleeping on a WaitGroup meant one more wake-up (a futex call when
// the last reader ran on the other CPU) between the child's exit and its
// exit frame.
//
// After the child exits, descendants may still hold its pipes open (a shell
// that started something in the background). Output keeps flowing while they
// write; once they stay quiet for DrainAfterExit the pipes are abandoned, so
// the exit frame is not held hostage by a daemonized grandchild.
func (r *Registry) supervise(p *Process) {
	var left atomic.Int32
	left.Store(int32(len(p.outputs)) + 1) // the readers and the reaper
	done := func() {
		if left.Add(-1) == 0 {
			r.finish(p)
		}
	}
	// Added while this goroutine's own count is held, so Close's Wait
	// cannot have returned meanwhile.
	r.wg.Add(len(p.outputs))
	for _, o := range p.outputs {
		go func() {
			defer r.wg.Done()
			r.readPipe(p, o)
			done()
		}()
	}
	p.reap(r.addStrays, waitExited) // closes reapedCh
	for _, o := range p.outputs {
		o.f.SetReadDeadline(time.Now().Add(r.opt.DrainAfterExit))
	}
	done()
}

// finish ends a process whose pipes have ended and which has been reaped:
// its exit frame goes in the log, and it joins the exited ones.
func (r *Registry) finish(p *Process) {
	p.stdin.stop()
	code, _ := p.ExitCode()
	// Logged before the exit frame goes in, not after: its delivery
	// readies whoever waits for it (the embedded client's caller, a
	// socket subscriber's pump) on this goroutine's CPU, where it runs
	// only once this goroutine is done, and a log line is the slowest of
	// what is left (a write, for a daemon logging to a file).
	r.opt.Logger.Info("exit", "id", p.ID, "pid", p.Pid, "exitCode", code)
	p.Log.Append(p.ctx, p.exitFrame()) // fails only when discarded
	now := time.Now()
	p.markExited(now)
	r.queueExited(p, now)
	close(p.doneCh)
	if r.opt.OnExit != nil {
		r.opt.OnExit(p)
	}
	r.prune(time.Now())
}

// readPipe turns one pipe into frames of at most 32 KiB each, until EOF,
// the drain deadline, or the process being discarded. Buffers go to the log
// without a copy and come back once nobody reads them (see pipeReader).
func (r *Registry) readPipe(p *Process, o output) {
	f := o.f
	defer f.Close()
	pr, err := newPipeReader(r, f, o.mirror, p.ctx.Done())
	if err != nil {
		r.opt.Logger.Error("read output", "id", p.ID, "err", err)
		return
	}
	defer pr.close()
	var (
		chunks [][]byte
		frames []wire.Frame
	)
	for {
		var n, mirrored int
		chunks, n, mirrored, err = pr.read(chunks[:0])
		if n > 0 && r.opt.OnOutput != nil {
			r.opt.OnOutput(n, mirrored)
		}
		frames = frames[:0]
		for i := 0; i < len(chunks); i++ {
			data := chunks[i]
			if 0 < mirrored && mirrored < len(data) {
				// A file mirror took only the start of this chunk: the
				// rest is a frame of its own, with data (a copy, so that
				// no two frames hold one pooled buffer).
				chunks = slices.Insert(chunks, i+1, bytes.Clone(data[mirrored:]))
				data, chunks[i] = data[:mirrored], data[:mirrored]
			}
			frames = append(frames, wire.Frame{Stream: o.stream, Stage: o.stage, Data: data, Mirrored: mirrored > 0})
			mirrored = max(mirrored-len(data), 0)
		}
		if k, aerr := p.Log.AppendAll(p.ctx, frames); aerr != nil {
			for _, rest := range chunks[k:] {
				r.putBuf(rest)
			}
			return // discarded
		}
		clear(chunks)
		clear(frames)
		if n > 0 {
			select {
			case <-p.reapedCh: // draining: stay while the descendants still talk
				f.SetReadDeadline(time.Now().Add(r.opt.DrainAfterExit))
			default:
			}
		}
		if err != nil {
			return // EOF, the drain deadline, or released by discard
		}
	}
}
