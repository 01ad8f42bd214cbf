package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/signal"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/google/uuid"
	"github.com/spf13/cobra"
	"golang.org/x/sys/unix"

	"github.com/seed5ad92d46/sous/daemon/client"
	"github.com/seed5ad92d46/sous/daemon/proc"
	"github.com/seed5ad92d46/sous/daemon/wire"
)

func init() {
	commandGroups = append(commandGroups, newExecCmd, newAttachCmd)
}

type execOptions struct {
	target  targetFlags
	id      string
	cwd     string
	env     []string
	tty     bool
	timeout time.Duration
	detach  bool
}

func newExecCmd(streams *IO) *cobra.Command {
	var o execOptions
	cmd := &cobra.Command{
		Use:   "exec [flags] -- CMD [ARGS...]",
		Short: "Run one command on a daemon and exit with its exit code",
		Long: `Run a command on the daemon (embedded by default) with its stdout and stderr
streamed to yours, and exit with its exit code. When stdin is a pipe or a file
the command reads it: on the embedded daemon and on one reached through its
Unix socket (--socket) it gets that very pipe or file as its stdin, as after
a shell's redirection; on other daemons sous forwards it, then closes it.

On the embedded daemon, where nothing else can follow the command, a stdout
or stderr that is a pipe or a file is the command's own too: its output goes
to your reader as fast as from a shell. A socket daemon keeps every byte for
replay (sous attach), and writes output bound for a pipe into it itself as it
reads it, without copying the bytes on the way (the pipes are passed with the
spawn); other output is streamed to sous and written by it.

Ctrl-C (and SIGTERM) are forwarded to the command's process group; a second
Ctrl-C within 2 s sends SIGKILL. A command killed by a signal makes sous exit
with 128+n for the signal sous sent (130 for Ctrl-C, 143 for SIGTERM, 137 for
SIGKILL); one that something else killed gives 128+n too, with a line naming
the signal (139 for SIGSEGV), where the daemon says which (else 255). When
the connection to a daemon drops, sous says so and reconnects; a signal while
an earlier one has gone unanswered for a second makes it leave instead. A
Ctrl-C before the spawn is answered (sous waiting to reconnect, say) makes
sous exit 130 too, after sending the signal to the command in case the daemon
started it; if the daemon cannot be told, sous names the id to kill.

--timeout (30s, 5m, or plain seconds: 90, 0.5) stops the whole process group
(SIGTERM, then SIGKILL after 3 s) and exits 124; the daemon enforces it when it can (process.spawn.timeout), so it
holds even if sous is gone. A command that never started exits as in a
shell: 127 when the program is not found, 126 when it cannot be executed,
and 125 when the daemon could not start it for another reason (a missing
--cwd).

With --tty the command gets a pseudo-terminal the size of yours (24x80 when
stdin and stdout are not terminals) and your TERM. Your terminal is put in raw
mode while it runs, so every key, Ctrl-C included, reaches the command as
typed; resizing your terminal resizes the command's; your terminal is
restored when the command ends. The command's stdout and stderr both arrive
on stdout, as on a terminal.

With --detach, sous prints the process id and leaves the command running on a
daemon that outlives it (--socket or --remote); follow it later with
'sous attach ID'.`,
		Example: `  sous exec -- make test
  sous exec --timeout 90 -- ./integration.sh
  sous exec --cwd /src -e GOFLAGS=-race -- go test ./...
  sous exec --remote ssh://build --tty -- htop
  sous exec --socket /tmp/sous.sock --detach --id nightly -- ./long-job.sh
  git diff | sous exec --remote ssh://build -- patch -p1`,
		Args: func(cmd *cobra.Command, args []string) error {
			if len(args) == 0 {
				return usageErrorf("exec: missing the command to run (sous exec [flags] -- CMD [ARGS...])")
			}
			return nil
		},
		RunE: func(cmd *cobra.Command, args []string) error {
			return runExec(cmd.Context(), streams, &o, args)
		},
	}
	f := cmd.Flags()
	f.StringVar(&o.id, "id", "", "process id on the daemon (default a fresh UUID); refused while a process with that id runs")
	f.StringVar(&o.cwd, "cwd", "", "working directory of the command on the daemon's host")
	f.StringArrayVarP(&o.env, "env", "e", nil, "set an environment variable (K=V; K= sets it empty; repeatable)")
	f.BoolVar(&o.tty, "tty", false, "give the command a pseudo-terminal the size of yours (raw mode here while it runs)")
	durationVar(f, &o.timeout, "timeout", 0, "stop the command's process group after this long (30s, 5m, or 90 for seconds)")
	f.BoolVar(&o.detach, "detach", false, "print the id and leave the command running")
	f.SetInterspersed(false)
	o.target.register(cmd)
	return cmd
}

// parseEnv turns K=V flags into the spawn's env overlay.
func parseEnv(kvs []string) (map[string]*string, error) {
	if len(kvs) == 0 {
		return nil, nil
	}
	env := make(map[string]*string, len(kvs))
	for _, kv := range kvs {
		k, v, ok := strings.Cut(kv, "=")
		if !ok || k == "" {
			return nil, usageErrorf("-e %q: want KEY=VALUE", kv)
		}
		env[k] = &v
	}
	return env, nil
}

func runExec(ctx context.Context, streams *IO, o *execOptions, argv []string) error {
	if ctx == nil {
		ctx = context.Background()
	}
	env, err := parseEnv(o.env)
	if err != nil {
		return err
	}
	url, err := o.target.url()
	if err != nil {
		return err
	}
	if o.timeout < 0 {
		return usageErrorf("exec: --timeout must not be negative (0: none), got %s", o.timeout)
	}
	if o.detach && url == "embedded" {
		return usageErrorf("exec: --detach needs a daemon that outlives sous: pass --socket or --remote (or set SOUS_SOCKET)")
	}
	// Signals are caught from here on, not only once the command runs: a
	// Ctrl-C while sous connects or its spawn waits (for a reconnect, say)
	// ended sous by the signal's default action, and a spawn the daemon had
	// started ran on with nobody following it.
	sigs, stopSignals := catchSignals()
	defer stopSignals()
	startCtx, started := cancelOnSignal(ctx, sigs)
	defer started() // idempotent: ends the watch on every way out
	// unlessInterrupted is err, or the exit of a signal that cut it short.
	unlessInterrupted := func(err error) error {
		if sig := started(); sig != 0 {
			return &exitError{code: 128 + int(sig)}
		}
		return err
	}
	o.target.notices = streams.ErrOut
	conn, err := o.target.open(startCtx)
	if err != nil {
		return unlessInterrupted(err)
	}
	defer conn.Shutdown()

	id := o.id
	if id == "" {
		id = uuid.NewString()
	} else if err := checkIDFree(startCtx, conn, id); err != nil {
		return unlessInterrupted(err)
	}
	cwd := o.cwd
	if cwd != "" && isLocal(url) {
		cwd = absPath(cwd)
	}
	out, stopSigpipe := newStreamWriter(streams)
	defer stopSigpipe()
	spec := client.SpawnSpec{ID: id, Command: argv[0], Args: argv[1:], Cwd: cwd, Env: env, Timeout: o.timeout}
	if o.tty {
		ttySpec(streams, &spec) // exec_tty.go
	}
	var handler client.FrameHandler
	if !o.detach {
		handler = out.frame
		if !o.tty {
			// On the embedded daemon nobody else can follow the command, so
			// its output needs no frames: it gets sous's stdout and stderr
			// as a shell would give them (Mirror.Direct). A socket daemon
			// keeps the frames for attach and replay, and tees into pipes.
			direct := url == "embedded"
			spec.Mirror = proc.Mirror{Stdout: outputFile(streams.Out, direct), Stderr: outputFile(streams.ErrOut, direct),
				Stdin: inputFile(streams.In), Direct: direct}
		}
	}
	p, err := conn.Spawn(startCtx, spec, handler)
	switch sig := started(); {
	case sig != 0 && (err != nil || o.detach):
		// Interrupted before the caller learned what runs: the spawn may
		// have reached the daemon all the same, so the signal goes after
		// it, as it would to a command sous follows.
		return interruptedSpawn(ctx, streams, conn, id, sig)
	case sig != 0:
		select { // follow forwards it to the command, as any other
		case sigs <- sig:
		default: // four more came meanwhile
		}
	case err != nil:
		return notStarted(argv[0], err)
	}
	if o.detach {
		fmt.Fprintln(streams.Out, id)
		return nil
	}
	if o.tty {
		return followTTY(ctx, streams, p, o.timeout, sigs) // exec_tty.go
	}
	if p.OutputPassed() {
		stop := out.watchReaders(spec.Mirror.Stdout, spec.Mirror.Stderr)
		defer stop()
	}
	if p.StdinPassed() {
		// The child reads sous's stdin itself, as with a shell's
		// redirection: nothing to forward.
	} else if !isTerminal(streams.In) {
		go forwardStdin(ctx, p, streams.In, streams.ErrOut)
	} else if err := p.CloseStdin(ctx); err != nil && !isNotRunning(err) {
		// A command that is already done (true, echo) needs no stdin.
		fmt.Fprintln(streams.ErrOut, "sous: exec:", err)
	}
	return follow(ctx, streams, p, o.timeout, out, true, sigs, nil)
}

// catchSignals catches the signals exec and attach act on (follow) until
// stop.
func catchSignals() (sigs chan os.Signal, stop func()) {
	sigs = make(chan os.Signal, 4)
	signal.Notify(sigs, syscall.SIGINT, syscall.SIGTERM, syscall.SIGHUP)
	return sigs, func() { signal.Stop(sigs) }
}

// cancelOnSignal returns a context that the first signal on sigs (from
// catchSignals) cancels, and started, which stops watching and says which
// signal that was (0: none). A signal that comes after started stays on
// sigs. (run's interruptible is the same for a run, which then lets the
// signals' default action back instead of forwarding them.)
func cancelOnSignal(ctx context.Context, sigs <-chan os.Signal) (context.Context, func() syscall.Signal) {
	ctx, cancel := context.WithCancel(ctx)
	stop := make(chan struct{})
	caught := make(chan syscall.Signal, 1)
	go func() {
		var sig syscall.Signal
		select {
		case s := <-sigs:
			sig = s.(syscall.Signal)
			cancel()
		case <-stop:
		}
		caught <- sig
	}()
	var once sync.Once
	var sig syscall.Signal
	return ctx, func() syscall.Signal {
		once.Do(func() {
			close(stop)
			sig = <-caught
			cancel()
		})
		return sig
	}
}

// interruptedSpawn sends sig after a spawn that a signal interrupted (or,
// with --detach, that it came during): the command may be running on the
// daemon with nobody to follow it or to know its id. A daemon that cannot
// be told within killStuck gets named with the id instead.
func interruptedSpawn(ctx context.Context, streams *IO, conn *client.Conn, id string, sig syscall.Signal) error {
	ctx, cancel := context.WithTimeout(ctx, killStuck)
	defer cancel()
	err := conn.Call(ctx, "process.kill", map[string]any{"id": id, "signal": signalName(sig)}, nil)
	switch {
	case err == nil:
		fmt.Fprintf(streams.ErrOut, "sous: interrupted; %s had started, and got %s\n", id, unix.SignalName(sig))
	case !isNotRunning(err):
		fmt.Fprintf(streams.ErrOut, "sous: interrupted while starting %s, which may still start or run on the daemon (%v); stop it with: sous kill %s\n", id, err, id)
	}
	return &exitError{code: 128 + int(sig)}
}

// checkIDFree refuses an --id a running process has on the daemon: the
// protocol lets a spawn replace it (and end it), which would lose a job to a
// typo. Without process.list there is nothing to check with.
func checkIDFree(ctx context.Context, conn *client.Conn, id string) error {
	if ok, err := conn.HasFeature(ctx, wire.FeatureProcessList); err != nil || !ok {
		return nil
	}
	var res wire.ProcessListResult
	if err := conn.Call(ctx, "process.list", map[string]any{}, &res); err != nil {
		return fmt.Errorf("exec: check --id %s: %w", id, err)
	}
	for _, p := range res.Processes {
		if p.ID == id && p.Running {
			return fmt.Errorf("exec: a process with id %q is running on %s; stop it first (sous kill --wait %s) or choose another --id", id, conn.Target(), id)
		}
	}
	return nil
}

// notStarted is exec's error for a spawn that failed. When the daemon
// refused it ("spawn PROGRAM: why"), the exit code says why, as a shell's or
// env's does: 127 the program was not found (on $PATH, or at the path
// given), 126 it could not be executed, or the daemon does not allow it
// (--allow-command), 125 something else (its cwd); the message is the
// daemon's reason without the JSON-RPC code. Anything else (the
// connection, a usage mistake the daemon caught) exits 1.
func notStarted(program string, err error) error {
	why, refused := client.SpawnRefused(err, program)
	if !refused {
		return fmt.Errorf("exec %s: %w", program, err)
	}
	code := 125
	notFound := strings.HasSuffix(why, "no such file or directory")
	switch {
	case strings.Contains(why, "executable file not found"),
		notFound && (strings.HasPrefix(why, "fork/exec") || strings.HasPrefix(why, "stat ")):
		code = 127
	case strings.Contains(why, "permission denied"), strings.Contains(why, "exec format error"), strings.Contains(why, "is a directory"),
		strings.HasPrefix(why, wire.MsgCommandNotAllowed):
		code = 126
	}
	return &exitError{code: code, err: fmt.Errorf("exec: cannot start %s: %s", program, why)}
}

// isLocal reports whether paths on the target's host are paths here.
func isLocal(url string) bool {
	return url == "embedded" || strings.HasPrefix(url, "unix://")
}

// forwardStdin copies r to the process's stdin, with offsets, then closes it
// (the process.stdin path: a terminal, a socket, or a link that cannot pass
// descriptors).
func forwardStdin(ctx context.Context, p *client.Proc, r io.Reader, errOut io.Writer) {
	const (
		readSize  = 256 << 10
		readAhead = 8       // reads waiting to be written
		batchSize = 2 << 20 // at most what one Write takes
	)
	type piece struct {
		b   []byte
		err error
	}
	pieces, free := make(chan piece, readAhead), make(chan []byte, readAhead)
	// Reading goes on while a Write waits for its answers, and the next
	// Write takes whatever came meanwhile: over a link with a round trip,
	// the requests of one Write are in flight together (client.Proc.Write),
	// where a Write per read waited a round trip each.
	go func() {
		for {
			var buf []byte
			select {
			case buf = <-free:
			default:
				buf = make([]byte, readSize)
			}
			n, err := r.Read(buf[:readSize])
			select {
			case pieces <- piece{buf[:n], err}:
			case <-ctx.Done():
				return
			}
			if err != nil {
				return
			}
		}
	}()
	// A buffer goes back for the reader to fill again, unless enough wait
	// there already (the reader may be done).
	recycle := func(b []byte) {
		select {
		case free <- b:
		default:
		}
	}
	batch := make([]byte, 0, batchSize)
	for {
		var pc piece
		select {
		case pc = <-pieces:
		case <-ctx.Done():
			return
		}
		batch = append(batch[:0], pc.b...)
		recycle(pc.b)
		err := pc.err
	gather:
		for err == nil && len(batch) < batchSize-readSize {
			select {
			case more := <-pieces:
				batch = append(batch, more.b...)
				recycle(more.b)
				err = more.err
			default:
				break gather
			}
		}
		if len(batch) > 0 {
			if _, werr := p.Write(ctx, batch); werr != nil {
				if !errors.Is(werr, context.Canceled) && !isNotRunning(werr) {
					fmt.Fprintln(errOut, "sous: stdin:", werr)
				}
				return
			}
		}
		if err != nil {
			if cerr := p.CloseStdin(ctx); cerr != nil && !isNotRunning(cerr) {
				fmt.Fprintln(errOut, "sous: stdin:", cerr)
			}
			return
		}
	}
}

func isNotRunning(err error) bool {
	if errors.Is(err, client.ErrClosed) {
		// The process exited and sous closed its connection while stdin
		// was still being forwarded: nothing left to report.
		return true
	}
	var we *wire.Error
	return errors.As(err, &we) && (we.Message == "Process not running" || we.Message == wire.MsgProcessNotFound)
}

// follow waits for p's exit while forwarding the signals on sigs (caught by
// the caller, catchSignals), and turns the exit into sous's own exit code.
// out may be nil (--tty writes the output itself).
//
// own says the command is this sous's (exec), as opposed to one it only
// watches (attach). When out.broken closes (the reader of sous's stdout
// went away), sous exits 141; an own command first gets SIGPIPE, as it
// would have writing to that reader itself, then SIGKILL if it ignores
// that (otherwise a command on a socket daemon would run on with nobody
// reading it), while a watched one is left running, as it was before the
// viewer came. When out.brokenErr closes (stderr's reader went away), an
// own command gets SIGPIPE only and its exit status stands: one that
// ignores it goes on (its stdout may still have a reader). Unlike in a
// shell, its later writes to stderr do not fail, since they go to the
// daemon's pipe; they are dropped.
//
// detach, when set, is what a signal does instead of being forwarded: it
// stops the following, and follow returns its error (attach, which only
// watches).
func follow(ctx context.Context, streams *IO, p *client.Proc, timeout time.Duration, out *streamWriter, own bool, sigs <-chan os.Signal, detach func(syscall.Signal) error) error {
	var broken, brokenErr <-chan struct{} // nil, never ready, without out (a terminal's output)
	if out != nil {
		broken, brokenErr = out.broken, out.brokenErr
	}
	var sent syscall.Signal
	var lastInt time.Time
	// Signals are forwarded on goroutines of their own: while the
	// connection is down, a kill waits for the reconnect, and the user must
	// still be able to leave (killStuck).
	left := make(chan struct{})
	defer close(left)
	killed := make(chan error)
	var unanswered []time.Time // when each kill under way was sent, oldest first
	for {
		select {
		case err := <-killed:
			unanswered = unanswered[1:]
			if err != nil && !isNotRunning(err) {
				fmt.Fprintln(streams.ErrOut, "sous: forward signal:", err)
			}
		case <-broken:
			if own { // killAndWait returns once the group is gone, SIGKILLed after the grace
				if _, err := p.KillAndWait(ctx, "PIPE", client.TimeoutGrace, true); err != nil && !isNotRunning(err) {
					fmt.Fprintln(streams.ErrOut, "sous: stop the command after its reader went away:", err)
				}
				<-p.Done() // its last frames are written (or dropped) before SIGPIPE is ours again
			}
			return &exitError{code: 128 + int(syscall.SIGPIPE)}
		case <-brokenErr:
			brokenErr = nil
			if !own {
				continue
			}
			sent = syscall.SIGPIPE
			if err := p.Kill(ctx, "PIPE"); err != nil && !isNotRunning(err) {
				fmt.Fprintln(streams.ErrOut, "sous: signal the command after its stderr's reader went away:", err)
			}
		case <-p.Done():
			code, exited := p.Exited()
			if !exited {
				return &exitError{code: 1, err: p.Err()}
			}
			switch {
			case p.TimedOut(): // the spawn's Timeout: the daemon's, or the client's
				return &exitError{code: 124, err: fmt.Errorf("timed out after %s; the process group was stopped", timeout)}
			case code == -1 && sent != 0:
				return &exitError{code: 128 + int(sent)}
			case code == -1 && out != nil && out.readerGone():
				// Writing straight to a pipe whose reader went away
				// (Mirror.Direct), it got SIGPIPE from the kernel before
				// sous saw the reader go.
				return &exitError{code: 128 + int(syscall.SIGPIPE)}
			case code == -1 && p.ExitSignal() > 0:
				// What a shell reports, and a line that names the
				// signal: SIGSEGV is a crash, SIGKILL often the OOM killer.
				sig := syscall.Signal(p.ExitSignal())
				return &exitError{code: 128 + int(sig), err: fmt.Errorf("the command was killed by %s (%v)", unix.SignalName(sig), sig)}
			case code == -1:
				return &exitError{code: 255, err: errors.New("the command was killed by a signal")}
			case code != 0:
				return &exitError{code: code}
			}
			return nil
		case s := <-sigs:
			sig := s.(syscall.Signal)
			if detach != nil {
				return detach(sig)
			}
			if sig == syscall.SIGINT && time.Since(lastInt) < 2*time.Second {
				sig = syscall.SIGKILL
			}
			if sig == syscall.SIGINT {
				lastInt = time.Now()
			}
			if len(unanswered) > 0 && time.Since(unanswered[0]) > killStuck {
				fmt.Fprintf(streams.ErrOut, "sous: the daemon has not answered for %s; leaving without waiting for %s, which may still be running\n",
					time.Since(unanswered[0]).Round(100*time.Millisecond), p.ID)
				return &exitError{code: 128 + int(s.(syscall.Signal))}
			}
			sent = sig
			unanswered = append(unanswered, time.Now())
			go func() {
				err := p.Kill(ctx, signalName(sig))
				select {
				case killed <- err:
				case <-left:
				}
			}()
		}
	}
}

// killStuck is how long a forwarded signal may go unanswered (the
// connection is down, and the client reconnecting) before the next signal
// makes sous leave instead of forwarding it too.
const killStuck = time.Second

func signalName(s syscall.Signal) string {
	switch s {
	case syscall.SIGINT:
		return "INT"
	case syscall.SIGTERM:
		return "TERM"
	case syscall.SIGHUP:
		return "HUP"
	case syscall.SIGKILL:
		return "KILL"
	}
	return fmt.Sprint(int(s))
}

// streamWriter copies a process's frames to stdout and stderr. Frames arrive
// on the client's reader goroutine in seq order; writes block when the
// terminal or pipe is slow, which pushes back all the way to the child.
type streamWriter struct {
	mu     sync.Mutex
	out    io.Writer
	errOut io.Writer
	// broken and brokenErr are closed when a write to out or errOut fails
	// with EPIPE: whoever read sous's stdout or stderr is gone (see follow).
	broken, brokenErr         chan struct{}
	brokenOnce, brokenErrOnce sync.Once
	stopped                   bool        // set by stop: frames still arriving are dropped
	lastSeq                   int64       // the seq of the last frame written (or the daemon wrote: Mirrored)
	watched                   [2]*os.File // stdout and stderr the command writes itself (watchReaders)
}

// newStreamWriter writes a process's output to streams. It asks for SIGPIPE
// (until stop is called) so that a write to a closed stdout returns EPIPE
// instead of killing sous before it can stop the command. After stop, frames
// that still arrive (attach leaves a running process) are dropped, so that
// none is written once SIGPIPE would kill sous again.
func newStreamWriter(streams *IO) (w *streamWriter, stop func()) {
	growPipe(streams.Out)
	sigpipe := make(chan os.Signal, 1)
	signal.Notify(sigpipe, syscall.SIGPIPE)
	w = &streamWriter{out: streams.Out, errOut: streams.ErrOut, broken: make(chan struct{}), brokenErr: make(chan struct{})}
	return w, func() {
		w.mu.Lock()
		w.stopped = true
		w.mu.Unlock()
		signal.Stop(sigpipe)
	}
}

// outPipeSize is what sous exec grows its stdout to when that is a pipe: the
// consumer then drains in large steps instead of taking turns with sous
// every 64 KiB (which costs both a sleep and a wake-up per step).
const outPipeSize = 1 << 20

// growPipe enlarges w's pipe, if w is one; failing (the user's pipe budget)
// keeps the size it had.
func growPipe(w io.Writer) {
	f := outputFile(w, false)
	if f == nil {
		return
	}
	if rc, err := f.SyscallConn(); err == nil {
		_ = rc.Control(func(fd uintptr) { _, _ = unix.FcntlInt(fd, unix.F_SETPIPE_SZ, outPipeSize) })
	}
}

// outputFile returns w if a daemon can take it as a child's output: a pipe
// to tee into, or with direct a pipe or regular file to be the child's own
// (see proc.Mirror); else nil. A terminal is never passed: the command
// would find a terminal where sous gives it a pipe (use --tty for that).
func outputFile(w io.Writer, direct bool) *os.File {
	f, ok := w.(*os.File)
	if !ok || !proc.IsPipe(f) && !(direct && proc.IsPipeOrRegular(f)) {
		return nil
	}
	return f
}

// inputFile returns r if it can be a child's stdin as it is (a pipe or a
// regular file: what a daemon takes as process.spawn.mirror's stdin), else
// nil.
func inputFile(r io.Reader) *os.File {
	f, ok := r.(*os.File)
	if !ok || !proc.IsPipeOrRegular(f) {
		return nil
	}
	return f
}

// stopAt stops writing frames and returns the seq of the last one written:
// replay after it (--from-seq) goes on exactly where this output ends.
func (w *streamWriter) stopAt() int64 {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.stopped = true
	return w.lastSeq
}

// watchReaders stands in for the failed writes that tell frame the reader
// of sous's stdout or stderr went away, for output the command writes
// itself (Mirror.Direct): it waits for either pipe to lose its reader and
// closes broken or brokenErr, so that follow treats the command as it
// would have. stop ends the watch.
func (w *streamWriter) watchReaders(stdout, stderr *os.File) (stop func()) {
	var wake [2]int
	if unix.Pipe2(wake[:], unix.O_CLOEXEC) != nil {
		return func() {} // the command still gets SIGPIPE from the kernel itself
	}
	w.watched = [2]*os.File{stdout, stderr}
	done := make(chan struct{})
	go func() {
		defer close(done)
		defer unix.Close(wake[0])
		fds := []unix.PollFd{{Fd: int32(wake[0]), Events: unix.POLLIN}}
		marks := []func(){nil}
		for i, f := range w.watched {
			if f == nil || !proc.IsPipe(f) {
				continue
			}
			// Events 0: a write end reports only POLLERR, once its
			// reader is gone.
			fds = append(fds, unix.PollFd{Fd: rawFd(f), Events: 0})
			if i == 0 {
				marks = append(marks, func() { w.brokenOnce.Do(func() { close(w.broken) }) })
			} else {
				marks = append(marks, func() { w.brokenErrOnce.Do(func() { close(w.brokenErr) }) })
			}
		}
		for len(fds) > 1 {
			if _, err := unix.Poll(fds, -1); err != nil && err != unix.EINTR {
				return
			}
			if fds[0].Revents != 0 {
				return
			}
			for i := len(fds) - 1; i > 0; i-- {
				if fds[i].Revents&(unix.POLLERR|unix.POLLHUP) != 0 {
					marks[i]()
					fds = append(fds[:i], fds[i+1:]...)
					marks = append(marks[:i], marks[i+1:]...)
				}
			}
		}
	}()
	return func() {
		unix.Write(wake[1], []byte{0})
		<-done
		unix.Close(wake[1])
	}
}

// readerGone reports whether the reader of a pipe the command wrote to
// itself (watchReaders) is gone.
func (w *streamWriter) readerGone() bool {
	for _, f := range w.watched {
		if f == nil || !proc.IsPipe(f) {
			continue
		}
		fds := []unix.PollFd{{Fd: rawFd(f), Events: 0}}
		if n, err := unix.Poll(fds, 0); err == nil && n > 0 && fds[0].Revents&unix.POLLERR != 0 {
			return true
		}
	}
	return false
}

// rawFd is f's descriptor, without Fd's side effect of making it blocking
// (the description is the command's too). f stays open while it is used.
func rawFd(f *os.File) int32 {
	fd := int32(-1)
	if rc, err := f.SyscallConn(); err == nil {
		_ = rc.Control(func(d uintptr) { fd = int32(d) })
	}
	return fd
}

func (w *streamWriter) frame(f *wire.Frame) {
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.stopped {
		return
	}
	w.lastSeq = f.Seq
	if f.Mirrored {
		return // the daemon wrote it already (SpawnSpec.Mirror)
	}
	switch f.Stream {
	case wire.Stdout:
		if _, err := w.out.Write(f.Data); errors.Is(err, syscall.EPIPE) {
			w.brokenOnce.Do(func() { close(w.broken) })
		}
	case wire.Stderr:
		if _, err := w.errOut.Write(f.Data); errors.Is(err, syscall.EPIPE) {
			w.brokenErrOnce.Do(func() { close(w.brokenErr) })
		}
	}
}

type attachOptions struct {
	target          targetFlags
	fromSeq         int64
	killOnInterrupt bool
}

func newAttachCmd(streams *IO) *cobra.Command {
	var o attachOptions
	cmd := &cobra.Command{
		Use:   "attach ID",
		Short: "Replay and follow a process until it exits, with its exit code",
		Long: `Reattach to a process on a daemon: replay its output after --from-seq (0 =
everything the daemon retained), then follow it live until it exits, and exit
with its exit code (as 'sous exec' does).

attach only watches. Ctrl-C (SIGINT), SIGTERM and SIGHUP (a closed terminal)
stop the watching and leave the process running: attach prints a line with
the command that follows it again from where this output ended (--from-seq)
and exits 128+n as an interrupted command does (130 for Ctrl-C, 143 for
SIGTERM, 129 for SIGHUP). With --kill-on-interrupt they are forwarded to the
process's group instead, as 'sous exec' forwards them (a second Ctrl-C
within 2 s sends SIGKILL), and attach exits as the process does. When the
reader of attach's output goes away (| head), attach exits 141 and leaves
the process running.`,
		Example: `  sous attach --socket /tmp/sous.sock nightly          # Ctrl-C stops watching
  sous attach --remote ssh://build nightly --from-seq 120
  sous attach --socket /tmp/sous.sock --kill-on-interrupt nightly   # Ctrl-C stops the job`,
		Args:              exactArgs(1, "attach ID"),
		ValidArgsFunction: completeProcessIDs(&o.target),
		RunE: func(cmd *cobra.Command, args []string) error {
			return runAttach(cmd.Context(), streams, &o, args[0])
		},
	}
	cmd.Flags().Int64Var(&o.fromSeq, "from-seq", 0, "replay frames after this seq (exclusive)")
	cmd.Flags().BoolVar(&o.killOnInterrupt, "kill-on-interrupt", false, "forward Ctrl-C, SIGTERM and SIGHUP to the process instead of detaching from it")
	o.target.register(cmd)
	return cmd
}

func runAttach(ctx context.Context, streams *IO, o *attachOptions, id string) error {
	if ctx == nil {
		ctx = context.Background()
	}
	if o.fromSeq < 0 {
		return usageErrorf("attach: --from-seq must be 0 or more")
	}
	// Signals are caught from the start: one while attach connects or its
	// replay begins (output may already be on the screen) must not end
	// sous by the signal's default action before it can detach.
	sigs, stopSignals := catchSignals()
	defer stopSignals()
	startCtx, started := cancelOnSignal(ctx, sigs)
	defer started()
	o.target.notices = streams.ErrOut
	conn, err := o.target.open(startCtx)
	if err != nil {
		if sig := started(); sig != 0 {
			return &exitError{code: 128 + int(sig)}
		}
		return err
	}
	defer conn.Shutdown()
	out, stopSigpipe := newStreamWriter(streams)
	defer stopSigpipe()
	p, res, err := conn.Reattach(startCtx, id, o.fromSeq, out.frame)
	sig := started()
	switch {
	case sig != 0 && err != nil:
		// The reattach was cut short; its replay may be on the screen.
		return interruptedAttach(ctx, streams, conn, o, id, out.stopAt(), sig)
	case sig != 0 && !res.Found:
		return &exitError{code: 128 + int(sig)} // nothing there to follow
	case err != nil:
		return fmt.Errorf("attach %s: %w", id, err)
	case !res.Found:
		hint := ""
		if conn.Target() == "embedded" {
			hint = " (the embedded daemon starts empty: pass --socket or --remote)"
		}
		return fmt.Errorf("attach: no process with id %q on %s%s", id, conn.Target(), hint)
	}
	if res.FirstSeq > o.fromSeq+1 {
		fmt.Fprintf(streams.ErrOut, "sous: attach: output before seq %d is no longer retained by the daemon\n", res.FirstSeq)
	}
	var detach func(syscall.Signal) error
	if !o.killOnInterrupt {
		detach = func(sig syscall.Signal) error {
			again := o.reattachCommand(id, out.stopAt())
			if _, exited := p.Exited(); exited || !res.Running {
				// Ctrl-C during the replay of a process that is done.
				fmt.Fprintf(streams.ErrOut, "sous: stopped the replay of %s, which has exited; the rest: %s\n", id, again)
			} else {
				fmt.Fprintf(streams.ErrOut, "sous: detached from %s, which is still running; follow it again with: %s\n", id, again)
			}
			return &exitError{code: 128 + int(sig)}
		}
	}
	if sig != 0 {
		if detach != nil {
			return detach(sig)
		}
		select { // follow forwards it, as any other
		case sigs <- sig:
		default: // four more came meanwhile
		}
	}
	return follow(ctx, streams, p, 0, out, false, sigs, detach) // attach watches: a viewer going away leaves the process be
}

// interruptedAttach handles a signal that came before the reattach was
// answered: attach says how to follow the process again, having printed
// its output up to seq; with --kill-on-interrupt it sends the signal after
// it instead, as it would to a process it follows.
func interruptedAttach(ctx context.Context, streams *IO, conn *client.Conn, o *attachOptions, id string, seq int64, sig syscall.Signal) error {
	if !o.killOnInterrupt {
		fmt.Fprintf(streams.ErrOut, "sous: interrupted while attaching to %s, which was left as it was; follow it with: %s\n", id, o.reattachCommand(id, seq))
		return &exitError{code: 128 + int(sig)}
	}
	ctx, cancel := context.WithTimeout(ctx, killStuck)
	defer cancel()
	switch err := conn.Call(ctx, "process.kill", map[string]any{"id": id, "signal": signalName(sig)}, nil); {
	case err == nil:
		fmt.Fprintf(streams.ErrOut, "sous: interrupted while attaching to %s, which got %s\n", id, unix.SignalName(sig))
	case !isNotRunning(err):
		fmt.Fprintf(streams.ErrOut, "sous: interrupted while attaching to %s, which could not be signalled (%v); stop it with: sous kill %s\n", id, err, id)
	}
	return &exitError{code: 128 + int(sig)}
}

// reattachCommand is the attach command line that follows id again after
// frame seq, on the daemon these flags named.
func (o *attachOptions) reattachCommand(id string, seq int64) string {
	argv := []string{"sous", "attach"}
	for _, f := range []struct{ name, value string }{
		{"--socket", o.target.socket}, {"--remote", o.target.remote},
		{"--token-file", o.target.tokenFile}, {"--bridge-cmd", o.target.bridgeCmd},
	} {
		if f.value != "" {
			argv = append(argv, f.name, f.value)
		}
	}
	argv = append(argv, id)
	if seq > 0 {
		argv = append(argv, "--from-seq", strconv.FormatInt(seq, 10))
	}
	return shellJoin(argv)
}

// exactArgs is cobra.ExactArgs with a usage error (exit code 2) that shows
// the expected form.
func exactArgs(n int, form string) cobra.PositionalArgs {
	return func(cmd *cobra.Command, args []string) error {
		if len(args) != n {
			return usageErrorf("%s: want %d argument(s), got %d (usage: sous %s)", cmd.Name(), n, len(args), form)
		}
		return nil
	}
}
