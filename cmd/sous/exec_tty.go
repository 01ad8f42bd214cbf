package main

import (
	"context"
	"fmt"
	"os"
	"os/signal"
	"syscall"
	"time"

	"golang.org/x/term"

	"github.com/seed5ad92d46/sous/daemon/client"
	"github.com/seed5ad92d46/sous/daemon/wire"
)

// sous exec --tty: the command gets a pseudo-terminal on the daemon's host
// (the process.spawn.tty extension) the size of the local one, the local
// terminal goes into raw mode so that every key reaches it as typed (Ctrl-C
// too, which the remote terminal turns into SIGINT), SIGWINCH is forwarded as
// process.resize, and the local terminal is restored however sous ends.

// ttySpec asks for a terminal the size of the local one (24x80 when there
// is none) and passes the local TERM (t) on, unless -e sets it.
func ttySpec(streams *IO, spec *client.SpawnSpec, t string) {
	spec.TTY = true
	if rows, cols, ok := localSize(streams); ok {
		spec.Size = wire.TermSize{Rows: rows, Cols: cols}
	}
	if t != "" {
		if _, set := spec.Env["TERM"]; !set {
			env := make(map[string]*string, len(spec.Env)+1)
			for k, v := range spec.Env {
				env[k] = v
			}
			env["TERM"] = &t
			spec.Env = env
		}
	}
}

// localSize is the size of the local terminal: stdin's, else stdout's.
func localSize(streams *IO) (rows, cols int, ok bool) {
	for _, v := range []any{streams.In, streams.Out} {
		if fd, isTerm := terminalFd(v); isTerm {
			if c, r, err := term.GetSize(fd); err == nil && r > 0 && c > 0 {
				return r, c, true
			}
		}
	}
	return 0, 0, false
}

// followTTY runs the local side of a terminal session: raw mode while it
// lasts, keys forwarded as raw bytes, size changes forwarded, then the exit
// code as follow gives it.
func followTTY(ctx context.Context, streams *IO, p *client.Proc, timeout time.Duration, sigs <-chan os.Signal) error {
	if fd, ok := terminalFd(streams.In); ok {
		state, rerr := term.MakeRaw(fd)
		if rerr != nil {
			p.Kill(ctx, "KILL") // started, but nobody could type into it
			return fmt.Errorf("exec --tty: raw mode: %w", rerr)
		}
		// Every way out of here passes this: the exit, an error, a panic;
		// signals that end sous are forwarded by follow, which then returns.
		defer term.Restore(fd, state)
	}
	winch := make(chan os.Signal, 1)
	signal.Notify(winch, syscall.SIGWINCH)
	defer signal.Stop(winch)
	stop := make(chan struct{})
	defer close(stop)
	go func() {
		for {
			select {
			case <-stop:
				return
			case <-p.Done():
				return
			case <-winch:
				if rows, cols, ok := localSize(streams); ok {
					if err := p.Resize(ctx, rows, cols); err != nil && !isNotRunning(err) {
						fmt.Fprintf(streams.ErrOut, "sous: resize: %v\r\n", err)
					}
				}
			}
		}
	}()
	go forwardStdin(ctx, p, streams.In, streams.ErrOut) // raw bytes: one key at a time from a raw terminal
	return follower{proc: p, errOut: streams.ErrOut, timeout: timeout, own: true, sigs: sigs}.follow(ctx)
}
