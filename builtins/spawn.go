package builtins

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"unicode/utf8"

	"github.com/google/uuid"
	"go.starlark.net/starlark"

	"github.com/seed5ad92d46/sous/daemon/client"
	"github.com/seed5ad92d46/sous/daemon/wire"
	"github.com/seed5ad92d46/sous/runtime"
)

func spawnEntries() []runtime.Entry {
	return []runtime.Entry{
		{Name: "spawn", Host: true, Journal: runtime.JournalEffect, Rejoin: true, Replayed: spawnReplayed,
			Sig: "spawn(cmd, args=[], *, id=None, cwd=None, env=None, tty=False, size=None, sandbox=None, echo=True, want_pid=True, replace=False) -> Process",
			Doc: "Starts a process on the host and returns at once. cmd is the program (a string) or a list of program and " +
				"arguments (then args must be empty). id defaults to a fresh UUID. An id a running process has on the host " +
				"(this run's, or another client's where the daemon has process.list) fails the spawn; with replace=True the " +
				"daemon kills that process and the id is the new one's (the old handle's wait then fails). env is merged over the host's " +
				"environment; a value of None unsets a variable. echo=True streams stdout and stderr to the runner's as " +
				"they arrive, line by line. From the moment a second process echoes while another does, every line of " +
				"every process is prefixed \"[id] \" for the rest of the run, so a process's lines do not lose their id " +
				"when the other ends; processes that echo one after another (run after run) stay bare. A spawned " +
				"process's lines are held until the recipe's next builtin call other than spawn or its end (at the latest " +
				"after 100 ms of recipe code since the last spawn returned, or 1 s); if two or more processes echo " +
				"then, the held lines carry their ids too, so " +
				"processes spawned together are prefixed from their first line, and a lone one stays bare. " +
				ttyDoc + " Processes of the embedded daemon " +
				"still running when the recipe ends are stopped. " + sandboxDoc,
			Fn: spawnBuiltin},
		{Name: "reattach", Host: true, Journal: runtime.JournalAnswer, Replayed: reattachReplayed, Sig: "reattach(id, *, from_seq=0, echo=True) -> Process",
			Doc: "Follows a process already on the host (spawned by this run, another run or another client), " +
				"replaying its output after frame from_seq. A process this run already follows gets a second handle: " +
				"each handle gets every frame after its own from_seq, once, in order.",
			Fn: reattachBuiltin},
	}
}

// spawnSpec is what spawn, run and pipeline agree on before starting.
type spawnSpec struct {
	argv    []string
	id      string
	cwd     string
	env     map[string]*string
	sandbox *wire.Sandbox // sandbox.go
	ext     spawnExt      // spawn_ext.go: tty, timeout, pipeline
	replace bool          // spawn's replace=True: take the id of a running process
	// noStdin has the spawn close the child's stdin (client.SpawnSpec's
	// StdinClosed): a command run, sh or pipeline give no stdin to. Over
	// a daemon with process.spawn.stdin.closed no process.stdin request
	// is sent for it at all.
	noStdin bool
}

// commandLine joins cmd (a string, or a list when list is set) and args
// into an argv.
func commandLine(c *runtime.Call, cmd []string, list bool, args []string) ([]string, error) {
	if list && len(args) > 0 {
		return nil, c.Errorf("args: must be empty when cmd is a list")
	}
	argv := append(cmd, args...)
	if len(argv) == 0 || argv[0] == "" {
		return nil, c.Errorf("cmd: empty command")
	}
	return argv, nil
}

func spawnBuiltin(c *runtime.Call) (starlark.Value, error) {
	spec, opt, err := spawnArgs(c)
	if err != nil {
		return nil, err
	}
	return startProcess(c, c.Host, spec, opt)
}

// spawnArgs reads spawn's arguments.
func spawnArgs(c *runtime.Call) (spawnSpec, procOptions, error) {
	var (
		cmd, args     []string
		cmdList       bool
		spec          spawnSpec
		tty           bool
		size          starlark.Value = starlark.None
		echo, wantPid                = true, true
	)
	err := bind(c, 2,
		req("cmd", command(&cmd, &cmdList)), opt("args", strList(&args)),
		opt("id", optStr(&spec.id)), opt("cwd", optStr(&spec.cwd)), opt("env", envDict(&spec.env)),
		opt("tty", boolean(&tty)), opt("size", value(&size)), opt("sandbox", sandboxArg(&spec.sandbox)),
		opt("echo", boolean(&echo)), opt("want_pid", boolean(&wantPid)), opt("replace", boolean(&spec.replace)))
	if err != nil {
		return spec, procOptions{}, err
	}
	if spec.ext.tty, err = terminalArg(c, tty, size); err != nil { // spawn_ext.go
		return spec, procOptions{}, err
	}
	if spec.argv, err = commandLine(c, cmd, cmdList, args); err != nil {
		return spec, procOptions{}, err
	}
	return spec, procOptions{echo: echo, showPid: wantPid, limit: DefaultOutputCap, beside: true}, nil
}

// startProcess spawns spec on host and follows it.
func startProcess(c *runtime.Call, host *runtime.Host, spec spawnSpec, opt procOptions) (*Process, error) {
	cl, err := hostClient(c, host)
	if err != nil {
		return nil, err
	}
	// A relative cwd is the recipe's, as for files.* (hostpath.go); without
	// one the command runs where the host's daemon runs, as the protocol
	// has it.
	if spec.cwd, err = hostPath(c, spec.cwd); err != nil {
		return nil, err
	}
	generated := spec.id == ""
	if generated {
		// In a durable run, an id a resume finds again (durablelive.go).
		if spec.id = c.NewProcessID(); spec.id == "" {
			spec.id = uuid.NewString()
		}
	}
	if c.Rejoining {
		// The runner died in this call: the process may be running
		// already (process_durable.go).
		if p, err := rejoinProcess(c, cl, host, spec, opt); p != nil || err != nil {
			return p, err
		}
	} else if !generated && !spec.replace {
		if err := checkIDFree(c, cl, spec.id); err != nil { // live.go
			return nil, err
		}
	}
	p := newProcess(c.Env, host, spec.id, spec.argv, opt)
	if err := p.launch(c, cl, spec); err != nil {
		return nil, err
	}
	return p, nil
}

// launch spawns spec, with p's id, and follows it as p.
func (p *Process) launch(c *runtime.Call, cl runtime.Daemon, spec spawnSpec) error {
	req := client.SpawnSpec{ID: spec.id, Command: spec.argv[0], Args: spec.argv[1:], Cwd: spec.cwd, Env: spec.env, Sandbox: spec.sandbox,
		StdinClosed: spec.noStdin}
	spec.ext.apply(&req, p) // spawn_ext.go
	// Settled: a spawn interrupted on its way stops what the daemon
	// started (client.Spawn), and must get to do it.
	err := blockSettled(c.Env, c.Env.Ctx, func(ctx context.Context) (err error) {
		if p.proc, err = cl.Spawn(ctx, req, p.onFrame); err == nil && spec.noStdin {
			p.fed = closedFeed()
		}
		return err
	})
	if err != nil {
		// The command is named here, as the daemon names its program.
		why, refused := client.SpawnRefused(err, spec.argv[0])
		if !refused {
			why = daemonMessage(err)
		}
		msg := fmt.Sprintf("cannot start %s: %s", spec.ext.describe(spec.argv), why)
		var we *wire.Error
		// A sandbox the daemon cannot set up is the recipe's error, not
		// the command's failure: it stops the recipe even with check=False.
		if errors.As(err, &we) && !strings.HasPrefix(why, "sandbox") {
			return &notStartedError{err: c.Errorf("%s", msg), msg: msg}
		}
		return c.Errorf("%s", msg)
	}
	procOf(c.Env).live.add(cl, p)
	p.announce(false)
	return nil
}

// notStartedError is a spawn the daemon refused: no such program, a cwd
// that is not there. run, sh and pipeline with check=False report it as a
// failed Result (exit code 127, as a shell does, and the reason as stderr)
// rather than stopping the recipe, so that a recipe can probe for a tool; a
// daemon that cannot be reached, or a sandbox it cannot set up, still
// stops it.
type notStartedError struct {
	err error
	msg string // the reason, without the builtin's name
}

func (e *notStartedError) Error() string { return e.err.Error() }
func (e *notStartedError) Unwrap() error { return e.err }

func reattachBuiltin(c *runtime.Call) (starlark.Value, error) {
	var id string
	var fromSeq int64
	echo := true
	if err := bind(c, 1, req("id", str(&id)), opt("from_seq", integer(&fromSeq, 0)), opt("echo", boolean(&echo))); err != nil {
		return nil, err
	}
	cl, err := hostClient(c, c.Host)
	if err != nil {
		return nil, err
	}
	p := newProcess(c.Env, c.Host, id, nil, procOptions{echo: echo, showPid: true, limit: DefaultOutputCap})
	var res wire.ReattachResult
	err = block(c.Env, c.Env.Ctx, func(ctx context.Context) (err error) {
		p.proc, res, err = cl.Reattach(ctx, id, fromSeq, p.onFrame)
		return err
	})
	if err != nil {
		return nil, c.Errorf("%s: %s", id, daemonMessage(err))
	}
	if !res.Found {
		return nil, c.Errorf("no process %q on %s", id, c.Host.Target())
	}
	procOf(c.Env).live.add(cl, p)
	p.announce(true)
	return p, nil
}

// quoteArgs renders an argv for messages, quoting what a shell would need.
func quoteArgs(argv []string) string {
	parts := make([]string, len(argv))
	for i, a := range argv {
		if a != "" && !strings.ContainsAny(a, " \t\n'\"\\$`|&;<>()*?[]#~!{}") {
			parts[i] = a
			continue
		}
		parts[i] = shellQuote(a)
	}
	return strings.Join(parts, " ")
}

// shellQuote quotes s for a POSIX shell: single quotes keep every byte
// literal, and a single quote itself is closed, escaped and reopened.
func shellQuote(s string) string {
	return "'" + strings.ReplaceAll(s, "'", `'\''`) + "'"
}

// describe names a process for messages, cut to maxDescribe bytes: a
// command with megabytes of arguments must not make a megabyte error.
func describe(argv []string) string {
	s := quoteArgs(argv)
	if len(s) > maxDescribe {
		cut := maxDescribe
		for cut > 0 && !utf8.RuneStart(s[cut]) {
			cut--
		}
		s = fmt.Sprintf("%s... (%d more bytes)", s[:cut], len(s)-cut)
	}
	return "`" + s + "`"
}

const maxDescribe = 300
