package daemon

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"time"

	"github.com/seed5ad92d46/sous/daemon/proc"
	"github.com/seed5ad92d46/sous/daemon/wire"
)

// The process.spawn extensions (each advertised in
// server.capabilities.features; a frame of a process that uses none of them
// is byte-identical to claustrum's):
//
//   - process.spawn.pipeline: {"pipeline": [[cmd, args...], ...]} instead of
//     command and args. The stages run joined by OS pipes in one process
//     group (led by the first stage: its pid is the group's and the one
//     wantPid reports). Stdout frames carry the last stage's stdout; stderr
//     frames carry every stage's stderr, each with "stage": n (from 0) after
//     "data". The exit frame's exitCode is the last stage's (-1 for a
//     signal, as always) and "stageExitCodes": [...] after it lists every
//     stage's status as a shell gives it (128+n for signal n).
//   - process.spawn.timeout: {"timeoutMs": n} (n > 0). Once n ms pass the
//     daemon sends SIGTERM (and SIGCONT, for a paused group) to the group,
//     then SIGKILL after a 3 s grace; the exit frame carries "timedOut": true
//     after exitCode (and stageExitCodes), only when that happened.
//   - process.spawn.exitsignal: {"exitSignal": true}. When a signal ends the
//     process (a pipeline's last stage), the exit frame carries "signal": n
//     after exitCode (which stays -1) and timedOut.
//   - process.spawn.env.unset: {"env": {"NAME": null}} unsets an inherited
//     variable (claustrum sets it to "").
//   - process.spawn.tty: {"tty": true, "size": {"rows": r, "cols": c}}
//     (size optional, default 24x80). The child leads a new session with a
//     pseudo-terminal of that size as its controlling terminal and its
//     stdin, stdout and stderr; the terminal's output arrives as stdout
//     frames, process.stdin writes to the terminal, and closing stdin sends
//     the end-of-file character (^D). TERM defaults to xterm-256color when
//     the environment has none. process.resize {id, rows, cols} resizes it
//     (the child gets SIGWINCH) and answers {"success":true}.
//   - process.spawn.key: {"spawnKey": k}. A spawn whose id names a process
//     still in the registry that was spawned with the same key starts
//     nothing and answers with that process, which the connection then
//     follows from its first frame (proc.Registry.SpawnFollowed); spawns
//     of one id are serialised. A client's resend after a lost connection
//     is then harmless however late the daemon handles the first request.
//     (A resend answered again changes nothing of that process, whatever
//     its other params say: stdinClosed, timeoutMs, ...)
//   - process.spawn.stdin.closed: {"stdinClosed": true}. The child's stdin
//     is closed as it starts (a pipeline's first stage's): it reads
//     end-of-file at once, and process.stdin answers as after
//     {"close":true} (proc.Spec.StdinClosed). A terminal cannot be
//     half-closed (closing its stdin is a ^D the child may read past), so
//     with tty it is -32602; so it is with a passed stdin (mirror
//     "stdin"), which the spawner has given the child to read.
//
// Allowed commands (Config.AllowCommands, --allow-command) are checked here,
// for the command and for every stage of a pipeline.

// enabled reports whether the daemon honours an extension.
func (s *Server) enabled(feature string) bool {
	return !slices.Contains(s.cfg.DisableFeatures, feature)
}

// withoutDisabled drops disabled features (and process.resize with the
// terminal) from what server.capabilities lists.
func (s *Server) withoutDisabled(methods, feats []string) ([]string, []string) {
	if len(s.cfg.DisableFeatures) == 0 {
		return methods, feats
	}
	feats = slices.DeleteFunc(slices.Clone(feats), func(f string) bool { return !s.enabled(f) })
	methods = slices.DeleteFunc(methods, func(m string) bool {
		return m == "process.resize" && !s.enabled(wire.FeatureSpawnTTY) ||
			slices.Contains(wire.GitMethods, m) && !s.enabled(m) || // the method is its feature
			slices.Contains(wire.ApprovalMethods, m) && !s.enabled(wire.FeatureApprovalQueue) ||
			slices.Contains(wire.RunJournalMethods, m) && !s.enabled(wire.FeatureRunJournal) ||
			slices.Contains(wire.ConnectionMethods, m) && !s.enabled(m)
	})
	return methods, feats
}

// The -32602 messages of stdinClosed with what it cannot be combined with.
const (
	MsgStdinClosedTTY    = "stdinClosed cannot be combined with tty: a terminal's input cannot be closed, only sent ^D"
	MsgStdinClosedPassed = "stdinClosed cannot be combined with a passed stdin (mirror \"stdin\"): the child reads that descriptor"
)

// maxTimeout keeps timeoutMs from overflowing a time.Duration.
const maxTimeout = 1<<63 - 1

// spawnSpec checks process.spawn's params, in order: the id, the command
// (or the pipeline), the extensions' options, the allowed commands. An
// extension the daemon has disabled is ignored, as claustrum ignores
// unknown params.
func (s *Server) spawnSpec(p wire.ProcessParams) (proc.Spec, error) {
	if p.ID == "" {
		return proc.Spec{}, wire.InvalidParams("Process ID is required")
	}
	spec := proc.Spec{ID: p.ID, Command: p.Command, Args: p.Args, Cwd: p.Cwd, Env: p.Env}
	if p.Pipeline != nil && s.enabled(wire.FeatureSpawnPipeline) {
		if p.Command != "" || len(p.Args) > 0 {
			return spec, wire.InvalidParams("pipeline replaces command and args: send one or the other")
		}
		if len(p.Pipeline) == 0 {
			return spec, wire.InvalidParams("pipeline needs at least one stage")
		}
		for i, st := range p.Pipeline {
			if len(st) == 0 || st[0] == "" {
				return spec, wire.InvalidParams(fmt.Sprintf("pipeline stage %d: Command is required", i))
			}
		}
		spec.Pipeline = p.Pipeline
	} else if p.Command == "" {
		return spec, wire.InvalidParams("Command is required")
	}
	if !s.enabled(wire.FeatureSpawnEnvUnset) {
		// What claustrum does with a null: the variable is set, empty.
		env := make(map[string]*string, len(p.Env))
		for k, v := range p.Env {
			if v == nil {
				v = new(string)
			}
			env[k] = v
		}
		spec.Env = env
	}
	if s.enabled(wire.FeatureSpawnTTY) {
		switch {
		case p.Tty && spec.Pipeline != nil:
			return spec, wire.InvalidParams("tty cannot be combined with pipeline")
		case p.Tty:
			size := wire.DefaultTermSize
			if p.Size != nil {
				size = *p.Size
			}
			if err := checkSize(size); err != nil {
				return spec, err
			}
			spec.TTY = &size
		case p.Size != nil:
			return spec, wire.InvalidParams("size is only valid with tty")
		}
	}
	spec.ExitSignal = p.ExitSignal && s.enabled(wire.FeatureSpawnExitSignal)
	if p.StdinClosed && s.enabled(wire.FeatureSpawnStdinClosed) {
		if spec.TTY != nil {
			return spec, wire.InvalidParams(MsgStdinClosedTTY)
		}
		spec.StdinClosed = true
	}
	if s.enabled(wire.FeatureSpawnKey) {
		spec.Key = p.SpawnKey
	}
	if p.TimeoutMs != nil && s.enabled(wire.FeatureSpawnTimeout) {
		if *p.TimeoutMs <= 0 {
			return spec, wire.InvalidParams("timeoutMs must be a positive number of milliseconds")
		}
		spec.Timeout = time.Duration(min(*p.TimeoutMs, maxTimeout/int64(time.Millisecond))) * time.Millisecond
	}
	sb, err := s.sandboxPolicy(p.Sandbox) // spawn_sandbox.go
	if err != nil {
		return spec, err
	}
	spec.Sandbox = sb
	if err := s.checkAllowed(&spec); err != nil {
		return spec, err
	}
	return spec, nil
}

func checkSize(size wire.TermSize) error {
	if size.Rows < 1 || size.Cols < 1 || size.Rows > 0xffff || size.Cols > 0xffff {
		return wire.InvalidParams("size: rows and cols must be between 1 and 65535")
	}
	return nil
}

// processResize is the process.resize extension: {id, rows, cols}.
func processResize(_ context.Context, se *Session, raw json.RawMessage) (any, func(), error) {
	if !se.s.enabled(wire.FeatureSpawnTTY) {
		return nil, nil, wire.Errorf(wire.CodeMethodNotFound, "Unknown method: process.resize")
	}
	p, err := decodeParams[wire.ProcessParams](raw)
	if err != nil {
		return nil, nil, err
	}
	if p.ID == "" {
		return nil, nil, wire.InvalidParams("Process ID is required")
	}
	size := wire.TermSize{Rows: p.Rows, Cols: p.Cols}
	if err := checkSize(size); err != nil {
		return nil, nil, err
	}
	pr := se.s.reg.Get(p.ID)
	if pr == nil {
		return nil, nil, wire.InvalidParams(wire.MsgProcessNotFound)
	}
	switch err := pr.Resize(size); {
	case errors.Is(err, proc.ErrNoTerminal):
		return nil, nil, wire.InvalidParams("Process has no terminal (spawned without tty)")
	case errors.Is(err, proc.ErrNotRunning):
		return nil, nil, wire.InvalidParams(wire.MsgProcessNotRunning)
	case errors.Is(err, proc.ErrTerminalClosed):
		return nil, nil, wire.InvalidParams("Process terminal closed")
	case err != nil:
		return nil, nil, wire.Internal(err)
	}
	return wire.SuccessResult{Success: true}, nil, nil
}

// CheckAllowCommands validates Config.AllowCommands (New does too): each
// entry is a program name (no slash) or an absolute path. A command line
// checks its flags with it before it does anything that cannot be undone.
func CheckAllowCommands(entries []string) error {
	for _, e := range entries {
		if e == "" || strings.Contains(e, "/") && !filepath.IsAbs(e) {
			return fmt.Errorf("allowed command %q: want a program name (git) or an absolute path (/usr/bin/git)", e)
		}
	}
	return nil
}

// checkAllowed refuses a spawn whose command, or any of whose pipeline
// stages, AllowCommands does not list. It is a guard against mistakes, not a
// sandbox: an allowed shell or interpreter runs anything it is told to.
// A plain command it had to resolve is passed on as spec.Program, so that
// the spawn runs the file it checked and does not look it up again.
func (s *Server) checkAllowed(spec *proc.Spec) error {
	if len(s.cfg.AllowCommands) == 0 {
		return nil
	}
	commands := [][]string{{spec.Command}}
	if spec.Pipeline != nil {
		commands = spec.Pipeline
	}
	for i, st := range commands {
		if ok, program := s.allowed(st[0], *spec); ok {
			if spec.Pipeline == nil {
				spec.Program = program
			}
			continue
		}
		s.stats.RefusedSpawns.Add(1)
		where := ""
		if spec.Pipeline != nil {
			where = fmt.Sprintf(" in pipeline stage %d", i)
		}
		s.log.Warn("spawn refused: command not allowed", "id", spec.ID, "command", st[0], "stage", i, "allowed", strings.Join(s.cfg.AllowCommands, ","))
		return wire.InvalidParams(fmt.Sprintf(wire.MsgCommandNotAllowed+"%q%s (this daemon allows only %s; start it with --allow-command %s to allow it)",
			st[0], where, strings.Join(s.cfg.AllowCommands, ", "), allowHint(st[0])))
	}
	return nil
}

// allowHint is the --allow-command value that would allow command: its
// name, or the absolute path of a command given with a relative path.
func allowHint(command string) string {
	if strings.Contains(command, "/") {
		if filepath.IsAbs(command) {
			return filepath.Clean(command)
		}
		return filepath.Base(command)
	}
	return command
}

// allowed matches command against AllowCommands. A name entry matches a
// command with that base name ("git" allows "git", "/usr/bin/git" and
// "./git"). An absolute entry matches a command that resolves (on the
// child's PATH, or from its cwd) to the same file, compared by identity
// (device and inode), so /bin/sh and /usr/bin/sh are one program where /bin
// links to /usr/bin; when either cannot be read, by the cleaned path.
//
// program is the path the spawn should exec when allowed's answer came from
// resolving command ("" when a name entry matched without it).
func (s *Server) allowed(command string, spec proc.Spec) (ok bool, program string) {
	base := filepath.Base(command)
	var (
		resolved     string
		resolvedInfo os.FileInfo
		tried        bool
	)
	for _, e := range s.cfg.AllowCommands {
		if !strings.Contains(e, "/") {
			if e == base {
				return true, program
			}
			continue
		}
		if !tried {
			tried = true
			if abs, prog, err := s.reg.Resolve(command, spec.Env, spec.Cwd); err == nil {
				resolved, program = abs, prog
				resolvedInfo, _ = os.Stat(abs)
			}
		}
		if resolved == "" {
			continue // it would not start anyway: refused as not allowed
		}
		if filepath.Clean(e) == resolved {
			return true, program
		}
		if fi, err := os.Stat(e); err == nil && resolvedInfo != nil && os.SameFile(fi, resolvedInfo) {
			return true, program
		}
	}
	return false, ""
}
