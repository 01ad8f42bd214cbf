package builtins

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"

	"go.starlark.net/starlark"
	"go.starlark.net/starlarkstruct"

	"github.com/seed5ad92d46/sous/daemon/wire"
	"github.com/seed5ad92d46/sous/runtime"
)

func processEntries() []runtime.Entry {
	return []runtime.Entry{
		{Name: "Process", Sig: "Process",
			Doc: "A process started by spawn or found by reattach. It keeps the first 16 MiB of each output stream."},
		{Name: "Process.id", Sig: "Process.id -> string", Doc: "The process id on its host.",
			Attr: attr(func(p *Process) starlark.Value { return starlark.String(p.id) })},
		{Name: "Process.pid", Sig: "Process.pid -> int or None",
			Doc:  "The OS pid on the host; None when spawned with want_pid=False or when the daemon did not say.",
			Attr: attr(processPid)},
		{Name: "Process.running", Sig: "Process.running -> bool", Doc: "Whether the process has not exited yet.",
			Attr: attr(func(p *Process) starlark.Value {
				closed, _, _ := p.state()
				return starlark.Bool(!closed)
			})},
		{Name: "Process.exit_code", Sig: "Process.exit_code -> int or None",
			Doc: "The exit code once the process exited (-1 when a signal killed it), else None.",
			Attr: attr(func(p *Process) starlark.Value {
				if _, exited, code := p.state(); exited {
					return starlark.MakeInt(code)
				}
				return starlark.None
			})},
		{Name: "Process.write", Journal: runtime.JournalEffect, Rejoin: true, Replayed: methodReplayed, Sig: "Process.write(data, *, offset=None) -> int",
			Doc: "Writes data (string or bytes) to the process's stdin and returns the daemon's applied high-water mark. " +
				"With offset, the daemon's exactly-once contract applies: bytes already applied are dropped, " +
				"and an offset past the applied mark (a gap) fails.",
			Fn: method(processWrite)},
		{Name: "Process.close_stdin", Journal: runtime.JournalEffect, Rejoin: true, Replayed: methodReplayed, Sig: "Process.close_stdin()",
			Doc: "Closes the process's stdin after everything written so far; a no-op once the process has exited.", Fn: method(processCloseStdin)},
		{Name: "Process.wait", Journal: runtime.JournalAnswer, Replayed: methodReplayed, Sig: "Process.wait(timeout=None) -> Result",
			Doc: "Blocks until the process exits and returns its Result. When timeout (seconds) passes first, " +
				"wait fails and the process keeps running.",
			Fn: method(processWait)},
		{Name: "Process.kill", Journal: runtime.JournalEffect, Rejoin: true, Replayed: methodReplayed, Sig: `Process.kill(signal="TERM")`,
			Doc: "Sends signal (a name such as \"TERM\" or \"KILL\", or a number) to the process group, without waiting.",
			Fn:  method(processKill)},
		{Name: "Process.pause", Journal: runtime.JournalEffect, Rejoin: true, Replayed: methodReplayed, Sig: "Process.pause()", Doc: "Stops the whole process group (SIGSTOP): the process and everything it started.",
			Fn: method(func(c *runtime.Call, p *Process) (starlark.Value, error) { return p.signalNoArgs(c, "STOP") })},
		{Name: "Process.resume", Journal: runtime.JournalEffect, Rejoin: true, Replayed: methodReplayed, Sig: "Process.resume()", Doc: "Continues the process group paused by pause() (SIGCONT).",
			Fn: method(func(c *runtime.Call, p *Process) (starlark.Value, error) { return p.signalNoArgs(c, "CONT") })},
		{Name: "Process.stop", Journal: runtime.JournalEffect, Rejoin: true, Replayed: methodReplayed, Sig: "Process.stop(grace=3, escalate=True) -> struct(found, died, already_exited, escalated)",
			Doc: "Sends SIGTERM to the process group and waits up to grace seconds for it to die; then, with escalate, " +
				"sends SIGKILL. Reports what happened (the daemon's killAndWait).",
			Fn: method(processStop)},
		{Name: "Process.lines", Journal: runtime.JournalPure, Sig: `Process.lines(stream="stdout") -> iterable of strings`,
			Doc: "The lines of stdout or stderr, from the first, as they arrive; iteration ends when the process exits. " +
				"Lines come without their newline. It is a single pass, and each lines() call iterates from the first " +
				"line again, whatever an earlier loop read: to go on where the last read stopped (write a question, read " +
				"its answer, and again), use read_line(). " +
				"An iteration holds at most 4 MiB of output the recipe has not read yet in memory, and the rest in a " +
				"temporary file, up to 1 GiB; a recipe further behind than that, or a line longer than 16 MiB, fails the " +
				"iteration, after the lines before the gap. The process is not held back for a slow loop.",
			Fn: method(processLines)},
		{Name: "Process.read_line", Journal: runtime.JournalAnswer, Replayed: methodReplayed, Sig: `Process.read_line(stream="stdout", timeout=None) -> string or None`,
			Doc: readLineDoc, Fn: method(processReadLine)},
		{Name: "Process.output", Journal: runtime.JournalAnswer, Replayed: methodReplayed, Sig: `Process.output(stream="stdout") -> string`,
			Doc: "Everything received on stdout or stderr so far (the first 16 MiB).", Fn: method(processOutput)},
		{Name: "Process.resize", Journal: runtime.JournalEffect, Rejoin: true, Replayed: methodReplayed, Sig: "Process.resize(rows, cols)",
			Doc: "Resizes the terminal of a process spawned with tty=True (its programs get SIGWINCH); fails for a process " +
				"without one.", Fn: method(processResize)},
	}
}

func processPid(p *Process) starlark.Value {
	pid := p.pid()
	if !p.opt.showPid || pid == 0 {
		return starlark.None
	}
	return starlark.MakeInt(pid)
}

func processWrite(c *runtime.Call, p *Process) (starlark.Value, error) {
	var buf []byte
	var offset *int64
	if err := bind(c, 1, req("data", data(&buf)), opt("offset", optInteger(&offset, 0))); err != nil {
		return nil, err
	}
	if err := p.ensureLive(c, true); err != nil { // process_durable.go
		return nil, err
	}
	if c.Rejoining && offset == nil {
		// The runner died in this write: it went at the mark the write
		// before it left, and the daemon drops what it already has.
		at := p.applied
		offset = &at
	}
	var applied int64
	err := block(c.Env, c.Env.Ctx, func(ctx context.Context) (err error) {
		if offset == nil {
			applied, err = p.proc.Write(ctx, buf)
		} else {
			applied, _, err = p.proc.WriteAt(ctx, buf, *offset)
		}
		return err
	})
	if err != nil {
		return nil, p.daemonErr(c, err)
	}
	p.applied = applied
	return starlark.MakeInt64(applied), nil
}

func processCloseStdin(c *runtime.Call, p *Process) (starlark.Value, error) {
	if err := bind(c, 0); err != nil {
		return nil, err
	}
	if err := p.ensureLive(c, true); err != nil {
		return nil, err
	}
	// A process that has exited has no stdin left to close, and whether it
	// exited before the call (`head -1` after its line) is a race the
	// recipe cannot win: closing is done either way, as run's stdin is.
	if err := block(c.Env, c.Env.Ctx, p.proc.CloseStdin); err != nil && !wire.IsNotRunning(err) {
		return nil, p.daemonErr(c, err)
	}
	return starlark.None, nil
}

func processWait(c *runtime.Call, p *Process) (starlark.Value, error) {
	var timeout *time.Duration
	if err := bind(c, 1, opt("timeout", optSeconds(&timeout))); err != nil {
		return nil, err
	}
	if err := p.ensureLive(c, false); err != nil {
		return nil, err
	}
	if err := wait(c.Env, p.ended, timeout); err != nil {
		if errors.Is(err, errTimeout) {
			return nil, c.Errorf("process %s still running after %s", p.id, formatSeconds(*timeout))
		}
		return nil, c.Errorf("%v", err)
	}
	r, err := p.result()
	if err != nil {
		return nil, c.Errorf("%v", err)
	}
	return r, nil
}

func processKill(c *runtime.Call, p *Process) (starlark.Value, error) {
	sig := "TERM"
	if err := bind(c, 1, opt("signal", signalName(&sig))); err != nil {
		return nil, err
	}
	err := p.kill(c, sig)
	var we *wire.Error
	if errors.As(err, &we) && we.Code == wire.CodeInvalidParams && strings.HasPrefix(we.Message, "Invalid signal") {
		// Which names a daemon knows is the daemon's to say (a remote one
		// may know more), but what it refused is this argument.
		return nil, c.Errorf("signal: the daemon knows no signal %q (a name such as \"TERM\", \"SIGKILL\" or \"usr1\", or a number from 1 to 64)", sig)
	}
	if err != nil {
		return nil, p.daemonErr(c, err)
	}
	return starlark.None, nil
}

// signalNoArgs is pause and resume: a fixed signal, no arguments.
func (p *Process) signalNoArgs(c *runtime.Call, sig string) (starlark.Value, error) {
	if err := bind(c, 0); err != nil {
		return nil, err
	}
	return p.signal(c, sig)
}

// signal sends sig to the process group.
func (p *Process) signal(c *runtime.Call, sig string) (starlark.Value, error) {
	if err := p.kill(c, sig); err != nil {
		return nil, p.daemonErr(c, err)
	}
	return starlark.None, nil
}

// kill asks the daemon to send sig to the process group; the error is the
// daemon's, unwrapped.
func (p *Process) kill(c *runtime.Call, sig string) error {
	if err := p.ensureLive(c, true); err != nil {
		return err
	}
	return block(c.Env, c.Env.Ctx, func(ctx context.Context) error { return p.proc.Kill(ctx, sig) })
}

// stopSettle bounds how long stop waits for the exit frame of a process the
// daemon reported dead, so that exit_code is set when stop returns.
const stopSettle = 5 * time.Second

func processStop(c *runtime.Call, p *Process) (starlark.Value, error) {
	grace := 3 * time.Second
	escalate := true
	if err := bind(c, 2, opt("grace", seconds(&grace)), opt("escalate", boolean(&escalate))); err != nil {
		return nil, err
	}
	// The daemon reads a grace of 0 as "the default"; a recipe that says 0
	// means "at once".
	grace = max(grace, time.Millisecond)
	if err := p.ensureLive(c, true); err != nil {
		return nil, err
	}
	var res wire.KillAndWaitResult
	err := block(c.Env, c.Env.Ctx, func(ctx context.Context) (err error) {
		res, err = p.proc.KillAndWait(ctx, "TERM", grace, escalate)
		return err
	})
	if err != nil {
		return nil, p.daemonErr(c, err)
	}
	if res.Died {
		settle := stopSettle
		if err := wait(c.Env, p.ended, &settle); err != nil && !errors.Is(err, errTimeout) {
			return nil, c.Errorf("%v", err)
		}
	}
	return starlarkstruct.FromStringDict(starlarkstruct.Default, starlark.StringDict{
		"found":          starlark.Bool(res.Found),
		"died":           starlark.Bool(res.Died),
		"already_exited": starlark.Bool(res.AlreadyExited),
		"escalated":      starlark.Bool(res.Escalated),
	}), nil
}

// streamArg binds a stream name.
func streamArg(dst *wire.Stream) param {
	return paramFunc(func(v starlark.Value) error {
		s, ok := starlark.AsString(v)
		if !ok {
			return want(`"stdout" or "stderr"`, v)
		}
		st, ok := wire.ParseStream(s)
		if _, capturable := streamIndex(st); !ok || !capturable {
			return fmt.Errorf(`want "stdout" or "stderr", got %q`, s)
		}
		*dst = st
		return nil
	})
}

func processLines(c *runtime.Call, p *Process) (starlark.Value, error) {
	stream := wire.Stdout
	if err := bind(c, 1, opt("stream", streamArg(&stream))); err != nil {
		return nil, err
	}
	i, _ := streamIndex(stream)
	p.mu.Lock()
	r, err := p.newLineReader(c, i, stream) // read_line.go
	p.mu.Unlock()
	if err != nil {
		return nil, err
	}
	return &lines{p: p, r: r, stream: i, thread: c.Thread}, nil
}

func processOutput(c *runtime.Call, p *Process) (starlark.Value, error) {
	stream := wire.Stdout
	if err := bind(c, 1, opt("stream", streamArg(&stream))); err != nil {
		return nil, err
	}
	i, _ := streamIndex(stream)
	if err := p.ensureLive(c, false); err != nil {
		return nil, err
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	return starlark.String(p.out[i].buf), nil
}

// daemonErr words an error of a call about p.
func (p *Process) daemonErr(c *runtime.Call, err error) error {
	return c.Errorf("process %s: %s", p.id, daemonMessage(err))
}

// daemonMessage is the text of an error from the daemon: a JSON-RPC
// error's message without its code, else the error itself.
func daemonMessage(err error) string {
	var we *wire.Error
	if errors.As(err, &we) {
		return we.Message
	}
	return err.Error()
}
