package agent

import (
	"context"
	"fmt"
	"strings"
	"sync"
	"time"

	"github.com/seed5ad92d46/sous/daemon/client"
	"github.com/seed5ad92d46/sous/daemon/wire"
)

// cliProc is the CLI running as a daemon process: it keeps a bounded tail of
// stderr for error messages and reports the end of the process to the
// session after every line before it.
type cliProc struct {
	p      *client.Proc
	cmd    string
	stderr *tail
}

// spawnCLI starts the CLI on the daemon. onStdout receives stdout bytes as
// they arrive (on the client's reader goroutine: it must not block); nil
// keeps stdout in the error tail instead.
func spawnCLI(ctx context.Context, c *client.Client, s *Session, args []string, env map[string]string, onStdout func(cp *cliProc, data []byte, exited bool)) (*cliProc, error) {
	cp := &cliProc{cmd: strings.Join(s.opt.CLI, " "), stderr: newTail(stderrTailSize)}
	spec := client.SpawnSpec{ID: s.opt.ProcessID, Command: s.opt.CLI[0], Args: args, Cwd: s.opt.Cwd}
	if len(s.opt.Env)+len(env) > 0 {
		spec.Env = make(map[string]*string, len(s.opt.Env)+len(env))
		for k, v := range s.opt.Env {
			spec.Env[k] = &v
		}
		for k, v := range env {
			spec.Env[k] = &v
		}
	}
	h := func(f *wire.Frame) {
		switch f.Stream {
		case wire.Stdout:
			if onStdout != nil {
				onStdout(cp, f.Data, false)
			} else {
				cp.stderr.Write(f.Data)
			}
		case wire.Stderr:
			cp.stderr.Write(f.Data)
		case wire.Exit:
			if onStdout != nil {
				onStdout(cp, nil, true)
			}
		}
	}
	p, err := c.Spawn(ctx, spec, h)
	if err != nil {
		// The daemon's message names the command ("spawn claude: executable
		// file not found in $PATH"); cli names the option that chose it,
		// unless what failed was the directory, which cwd chose.
		if why, ok := client.SpawnRefused(err, spec.Command); ok && strings.HasPrefix(why, "cwd: ") {
			return nil, fmt.Errorf("agent: %s", why)
		}
		return nil, fmt.Errorf("agent: cli: %w", err)
	}
	cp.p = p
	go func() {
		<-p.Done()
		s.ended(cp.exitError())
	}()
	return cp, nil
}

// cli gives the session the process under either transport.
func (cp *cliProc) cli() *cliProc { return cp }

// note adds a line to the error tail (e.g. a non-JSON line on stdout).
func (cp *cliProc) note(s string) { cp.stderr.Write([]byte(s + "\n")) }

// exitError describes how the process ended, with the end of its stderr.
func (cp *cliProc) exitError() error {
	var what string
	if code, ok := cp.p.Exited(); ok {
		what = fmt.Sprintf("%s: %s exited with code %d", ErrCLIExited, cp.cmd, code)
		if code == -1 {
			what = fmt.Sprintf("%s: %s was killed by a signal", ErrCLIExited, cp.cmd)
		}
	} else {
		what = fmt.Sprintf("lost the claude CLI process %s: %v", cp.p.ID, cp.p.Err())
	}
	if t := cp.stderr.String(); t != "" {
		what += "; stderr: " + t
	}
	return &cliError{msg: what, exited: cp.p.Err() == nil}
}

// cliError is the session's error once the CLI is gone.
type cliError struct {
	msg    string
	exited bool
}

func (e *cliError) Error() string { return e.msg }

func (e *cliError) Is(target error) bool { return target == ErrCLIExited && e.exited }

// stop kills the process group (TERM, 3 s grace, then KILL) and waits for
// the exit frame, so the process is reaped before Close returns.
func (cp *cliProc) stop() error {
	ctx, cancel := context.WithTimeout(context.Background(), killGrace+10*time.Second)
	defer cancel()
	select {
	case <-cp.p.Done():
		return nil
	default:
	}
	if _, err := cp.p.KillAndWait(ctx, "TERM", killGrace, true); err != nil {
		return fmt.Errorf("agent: stop %s: %w", cp.cmd, err)
	}
	select {
	case <-cp.p.Done():
	case <-ctx.Done():
		return fmt.Errorf("agent: stop %s: the daemon did not report its exit: %w", cp.cmd, ctx.Err())
	}
	return nil
}

// stdioTransport speaks to the CLI through its stdin and stdout on the
// daemon: stdin writes carry offsets, so a write retried after a reconnect
// is applied exactly once; stdout frames are replayed from the last seq.
type stdioTransport struct {
	*cliProc
	mu    sync.Mutex
	lines lineSplitter
}

func startStdio(ctx context.Context, c *client.Client, s *Session, args []string) (*stdioTransport, error) {
	t := &stdioTransport{}
	cp, err := spawnCLI(ctx, c, s, args, nil, func(cp *cliProc, data []byte, exited bool) {
		t.mu.Lock()
		defer t.mu.Unlock()
		t.lines.feed(data, s.deliver)
		if exited {
			if last := t.lines.flush(); last != nil {
				s.deliver(last)
			}
			if t.lines.dropped > 0 {
				cp.note(fmt.Sprintf("sous dropped %d stdout lines longer than %d bytes", t.lines.dropped, maxLine))
			}
		}
	})
	if err != nil {
		return nil, err
	}
	t.cliProc = cp
	return t, nil
}

func (t *stdioTransport) send(ctx context.Context, o outbound) error {
	_, err := t.p.Write(ctx, o.line)
	return err
}
