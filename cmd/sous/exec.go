package main

import (
	"context"
	"fmt"
	"strings"
	"syscall"
	"time"

	"github.com/google/uuid"
	"github.com/spf13/cobra"
	"golang.org/x/sys/unix"

	"github.com/seed5ad92d46/sous/daemon/client"
	"github.com/seed5ad92d46/sous/daemon/mirror"
	"github.com/seed5ad92d46/sous/daemon/wire"
)

// ExecOptions are the flags and arguments of `sous exec`.
type ExecOptions struct {
	IO     *IO
	Getenv func(string) string // TERM, for --tty
	Target *Target
	// Command is the command line to run: CMD and its ARGS.
	Command []string
	ID      string
	Cwd     string
	Env     []string // -e K=V
	TTY     bool
	Timeout time.Duration
	Detach  bool

	// Set by validate: Env as the spawn's overlay, and the target's URL.
	envOverlay map[string]*string
	url        string
}

func newCmdExec(f *Factory, runF func(*ExecOptions) error) *cobra.Command {
	opts := &ExecOptions{IO: f.IO, Getenv: f.Getenv, Target: f.newTarget()}
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
			opts.Command = args
			if err := opts.validate(); err != nil {
				return err
			}
			if runF != nil {
				return runF(opts)
			}
			return execRun(opts)
		},
	}
	fl := cmd.Flags()
	fl.StringVar(&opts.ID, "id", "", "process id on the daemon (default a fresh UUID); refused while a process with that id runs")
	fl.StringVar(&opts.Cwd, "cwd", "", "working directory of the command on the daemon's host")
	fl.StringArrayVarP(&opts.Env, "env", "e", nil, "set an environment variable (K=V; K= sets it empty; repeatable)")
	fl.BoolVar(&opts.TTY, "tty", false, "give the command a pseudo-terminal the size of yours (raw mode here while it runs)")
	durationVar(fl, &opts.Timeout, "timeout", 0, "stop the command's process group after this long (30s, 5m, or 90 for seconds)")
	fl.BoolVar(&opts.Detach, "detach", false, "print the id and leave the command running")
	fl.SetInterspersed(false)
	opts.Target.register(cmd)
	return cmd
}

// validate refuses, before anything starts, what cannot run: a malformed
// -e, target flags that contradict each other, a negative --timeout, and
// --detach from a daemon that ends with sous.
func (o *ExecOptions) validate() error {
	env, err := parseEnv(o.Env)
	if err != nil {
		return err
	}
	url, err := o.Target.URL()
	if err != nil {
		return err
	}
	if o.Timeout < 0 {
		return usageErrorf("exec: --timeout must not be negative (0: none), got %s", o.Timeout)
	}
	if o.Detach && client.IsEmbedded(url) {
		return usageErrorf("exec: --detach needs a daemon that outlives sous: pass --socket or --remote (or set SOUS_SOCKET)")
	}
	o.envOverlay, o.url = env, url
	return nil
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

// execRun runs a validated exec.
func execRun(o *ExecOptions) error {
	ctx, streams := context.Background(), o.IO
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
	o.Target.Notices = streams.ErrOut
	conn, err := o.Target.Open(startCtx)
	if err != nil {
		return unlessInterrupted(err)
	}
	defer conn.Shutdown()

	id := o.ID
	if id == "" {
		id = uuid.NewString()
	} else if err := checkIDFree(startCtx, conn, id); err != nil {
		return unlessInterrupted(err)
	}
	out, stopSigpipe := newStreamWriter(streams)
	defer stopSigpipe()
	spec := o.spawnSpec(id)
	if spec.StdinClosed {
		// A daemon that can close no stdin (claustrum's own): the command
		// runs with its stdin open, and the terminal is not forwarded all
		// the same. A command that reads stdin then waits, as before
		// either extension. (A daemon whose capabilities cannot be read
		// is left to Spawn, which says what failed.)
		if closes, err := conn.ClosesStdin(startCtx); err == nil && !closes {
			fmt.Fprintln(streams.ErrOut, "sous: exec: this daemon cannot close the command's stdin (no process.stdin.close): a command that reads its stdin will wait for it")
			spec.StdinClosed = false
		}
	}
	var handler client.FrameHandler
	if !o.Detach {
		handler = out.frame
	}
	p, err := conn.Spawn(startCtx, spec, handler)
	switch sig := started(); {
	case sig != 0 && (err != nil || o.Detach):
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
		return notStarted(o.Command[0], err)
	}
	if o.Detach {
		fmt.Fprintln(streams.Out, id)
		return nil
	}
	if o.TTY {
		return followTTY(ctx, streams, p, o.Timeout, sigs) // exec_tty.go
	}
	if p.OutputPassed() {
		stop := out.watchReaders(spec.Mirror.Stdout, spec.Mirror.Stderr)
		defer stop()
	}
	feedStdin(ctx, p, streams)
	return follower{proc: p, errOut: streams.ErrOut, timeout: o.Timeout, out: out, own: true, sigs: sigs}.follow(ctx)
}

// spawnSpec is the spawn of the command as id: with a terminal for --tty;
// else, unless --detach, with sous's stdin, stdout and stderr for the
// daemon to take as the command's own where it can (Mirror).
func (o *ExecOptions) spawnSpec(id string) client.SpawnSpec {
	streams, argv := o.IO, o.Command
	cwd := o.Cwd
	if cwd != "" && isLocal(o.url) {
		cwd = absPath(cwd)
	}
	spec := client.SpawnSpec{ID: id, Command: argv[0], Args: argv[1:], Cwd: cwd, Env: o.envOverlay, Timeout: o.Timeout}
	switch {
	case o.TTY:
		ttySpec(streams, &spec, o.Getenv("TERM")) // exec_tty.go
	case !o.Detach:
		// On the embedded daemon nobody else can follow the command, so
		// its output needs no frames: it gets sous's stdout and stderr as
		// a shell would give them (Mirror.Direct). A socket daemon keeps
		// the frames for attach and replay, tees into pipes and writes to
		// files itself (process.spawn.mirror.files).
		direct := client.IsEmbedded(o.url)
		spec.Mirror = mirror.Spec{Stdout: outputFile(streams.Out, direct), Stderr: outputFile(streams.ErrOut, direct),
			Stdin: inputFile(streams.In), Direct: direct}
		// A terminal is not forwarded without --tty: the command's stdin
		// is closed by the spawn itself (feedStdin then has nothing to do).
		spec.StdinClosed = streams.IsStdinTTY()
	}
	return spec
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
