package agent

import (
	"bytes"
	"context"
	"fmt"
	"strings"
	"sync"
	"time"

	"github.com/seed5ad92d46/sous/daemon/client"
	"github.com/seed5ad92d46/sous/daemon/wire"
)

const (
	// killGrace is how long the CLI's process group has between SIGTERM and
	// SIGKILL.
	killGrace = 3 * time.Second
	// stderrTailSize is how much of the end of the CLI's stderr is kept.
	stderrTailSize = 16 << 10
)

// cliProc is the CLI running as a daemon process: it keeps a bounded tail of
// stderr for error messages and reports the end of the process to the
// session after every line before it. Both transports embed it, which gives
// them stop, note, output and waitExit.
type cliProc struct {
	p      *client.Proc
	cmd    string
	stderr *tail
}

// spawnSpec is the daemon's spawn request for the CLI with args after its
// program, under id, with extraEnv merged over Options.Env.
func spawnSpec(l launch, id string, args []string, extraEnv map[string]string) client.SpawnSpec {
	spec := client.SpawnSpec{ID: id, Command: l.cli[0], Args: args, Cwd: l.cwd}
	if len(l.env)+len(extraEnv) > 0 {
		spec.Env = make(map[string]*string, len(l.env)+len(extraEnv))
		for k, v := range l.env {
			spec.Env[k] = &v
		}
		for k, v := range extraEnv {
			spec.Env[k] = &v
		}
	}
	return spec
}

// spawnCLI starts the CLI on the daemon with args (buildArgs plus what the
// transport adds) and extraEnv. onStdout receives stdout bytes as they
// arrive (on the client's reader goroutine: it must not block); nil keeps
// stdout in the error tail instead.
func spawnCLI(ctx context.Context, l launch, args []string, extraEnv map[string]string, onStdout func(cp *cliProc, data []byte, exited bool)) (*cliProc, error) {
	cp := &cliProc{cmd: strings.Join(l.cli, " "), stderr: newTail(stderrTailSize)}
	spec := spawnSpec(l, l.processID, args, extraEnv)
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
	p, err := l.client.Spawn(ctx, spec, h)
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
		l.to.ended(cp.exitError())
	}()
	return cp, nil
}

// note adds a line to the error tail (e.g. a non-JSON line on stdout).
func (cp *cliProc) note(s string) { cp.stderr.Write([]byte(s + "\n")) }

// output is the kept end of stderr and the notes.
func (cp *cliProc) output() string { return cp.stderr.String() }

// waitExit gives the daemon up to d to report the CLI's exit.
func (cp *cliProc) waitExit(d time.Duration) error {
	select {
	case <-cp.p.Done():
		return cp.exitError()
	case <-time.After(d):
		return nil
	}
}

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

// tail keeps the last max bytes written to it: the CLI's stderr, for error
// messages, without letting a chatty CLI grow memory.
type tail struct {
	mu  sync.Mutex
	max int
	buf []byte
	cut bool // bytes were discarded from the front
}

func newTail(max int) *tail { return &tail{max: max} }

func (t *tail) Write(p []byte) {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.buf = append(t.buf, p...)
	if over := len(t.buf) - t.max; over > 0 {
		// Keep the buffer from creeping: copy down only when it has doubled.
		if len(t.buf) > 2*t.max {
			t.buf = append(t.buf[:0], t.buf[over:]...)
		} else {
			t.buf = t.buf[over:]
		}
		t.cut = true
	}
}

// String is the kept text, trimmed, marked when the front was cut.
func (t *tail) String() string {
	t.mu.Lock()
	defer t.mu.Unlock()
	s := string(bytes.TrimSpace(t.buf))
	if t.cut && s != "" {
		s = "..." + s
	}
	return s
}
