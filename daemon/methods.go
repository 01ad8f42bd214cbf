package daemon

import (
	"bytes"
	"context"
	"encoding/json"
	"runtime"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/seed5ad92d46/sous/daemon/fileops"
	"github.com/seed5ad92d46/sous/daemon/proc"
	"github.com/seed5ad92d46/sous/daemon/wire"
)

// handler runs one method. after, when set, runs once the response has been
// written (spawn starts streaming only then, so its reply comes first); it
// must run whatever happens to the response, as it may own resources.
type handler func(ctx context.Context, se *Session, params json.RawMessage) (result any, after func(), err error)

// extensionMethods follow the 19 of the contract in server.capabilities.
var extensionMethods = append(append(append([]string{"process.list", "process.resize"}, wire.GitMethods...), append(wire.ApprovalMethods, wire.RunJournalMethods...)...), wire.ConnectionMethods...)

// features advertised in server.capabilities.
var features = []string{wire.FeatureStdinOffset, wire.FeatureStdinClose, wire.FeatureStdinOrdered, wire.FeatureProcessList, wire.FeatureProcessGone,
	wire.FeatureSpawnPipeline, wire.FeatureSpawnTimeout, wire.FeatureSpawnExitSignal, wire.FeatureSpawnEnvUnset, wire.FeatureSpawnTTY, wire.FeatureSpawnMirror,
	wire.FeatureSpawnMirrorStdin, wire.FeatureSpawnMirrorDirect, wire.FeatureSpawnMirrorFiles, wire.FeatureSpawnKey, wire.FeatureSpawnStdinClosed,
	wire.FeatureWorktreeRemoveStrict, wire.FeatureWorktreeCreateNewBranch,
	wire.FeatureExtractOptions,
	wire.FeatureGitDiff, wire.FeatureGitCommit, wire.FeatureGitMerge, wire.FeatureGitPush,
	wire.FeatureWorktreeCreateInclude, wire.FeatureApprovalQueue, wire.FeatureRunJournal, wire.FeatureBinaryFrames, wire.FeatureConnectionStdio}

// namespaces maps each namespace to its methods. server.* and
// approval.list take no params; the others require a params object. It is
// built on the first request, not at package init: a run whose embedded
// daemon never starts (a recipe that touches no process) does not pay for
// its closures and maps at every start.
var namespaces = sync.OnceValue(func() map[string]map[string]handler {
	return map[string]map[string]handler{
		"approval":   approvalNamespace(),   // approvalqueue.go
		"run":        runNamespace(),        // runjournal.go
		"connection": connectionNamespace(), // binframes.go
		"server": {
			"ping":         serverPing,
			"version":      serverVersion,
			"capabilities": serverCapabilities,
		},
		"files": {
			"list": withPath(func(_ context.Context, _ *Session, p wire.PathParams) (any, error) { return fileops.List(p.Path) }),
			"validate": withPath(func(_ context.Context, _ *Session, p wire.PathParams) (any, error) {
				return fileops.Validate(p.Path), nil
			}),
			"stat": withPath(func(_ context.Context, _ *Session, p wire.PathParams) (any, error) { return fileops.Stat(p.Path), nil }),
			"read": withPath(func(_ context.Context, _ *Session, p wire.PathParams) (any, error) {
				return fileops.Read(p.Path, p.MaxBytes)
			}),
			"extract_tar": filesExtractTar, // extract.go
		},
		"git": {
			"info": withGit(func(ctx context.Context, se *Session, p wire.GitParams) (any, error) {
				return se.s.git.Info(ctx, p.Path)
			}),
			"status": withGit(func(ctx context.Context, se *Session, p wire.GitParams) (any, error) {
				return se.s.git.Status(ctx, p.Path)
			}),
			"list_branches": withGit(func(ctx context.Context, se *Session, p wire.GitParams) (any, error) {
				return se.s.git.Branches(ctx, p.Path)
			}),
			"worktree_create": withGit(func(ctx context.Context, se *Session, p wire.GitParams) (any, error) {
				p.ReportNewBranch = p.ReportNewBranch && se.s.enabled(wire.FeatureWorktreeCreateNewBranch)
				if !se.s.enabled(wire.FeatureWorktreeCreateInclude) {
					p.Include = nil // ignored, as a daemon from before it would
				}
				return se.s.git.WorktreeCreate(ctx, p)
			}),
			"worktree_remove": withGit(func(ctx context.Context, se *Session, p wire.GitParams) (any, error) {
				p.Strict = p.Strict && se.s.enabled(wire.FeatureWorktreeRemoveStrict)
				return se.s.git.WorktreeRemove(ctx, p)
			}),
			// Extension methods (gitfinish.go).
			"diff": gitMethod(wire.FeatureGitDiff, func(ctx context.Context, se *Session, p wire.GitDiffParams) (any, error) {
				return se.s.git.Diff(ctx, p)
			}),
			"commit": gitMethod(wire.FeatureGitCommit, func(ctx context.Context, se *Session, p wire.GitCommitParams) (any, error) {
				return se.s.git.Commit(ctx, p)
			}),
			"merge": gitMethod(wire.FeatureGitMerge, func(ctx context.Context, se *Session, p wire.GitMergeParams) (any, error) {
				return se.s.git.Merge(ctx, p)
			}),
			"push": gitMethod(wire.FeatureGitPush, func(ctx context.Context, se *Session, p wire.GitPushParams) (any, error) {
				return se.s.git.Push(ctx, p)
			}),
		},
		"process": {
			"spawn":       processSpawn,
			"stdin":       processStdin,
			"kill":        processKill,
			"killAndWait": processKillAndWait,
			"reattach":    processReattach,
			"list":        processList,
			"resize":      processResize, // spawn_ext.go
		},
	}
})

// dispatch resolves the method and runs it: the "method" and "params" steps
// of the validation order.
func (se *Session) dispatch(ctx context.Context, method string, params json.RawMessage) (any, func(), error) {
	ns, name, ok := strings.Cut(method, ".")
	if !ok {
		return nil, nil, wire.Errorf(wire.CodeMethodNotFound, "Invalid method format: %s", method)
	}
	methods, ok := namespaces()[ns]
	if !ok {
		return nil, nil, wire.Errorf(wire.CodeMethodNotFound, "Unknown namespace: %s", ns)
	}
	h, ok := methods[name]
	if !ok {
		return nil, nil, wire.Errorf(wire.CodeMethodNotFound, "Unknown method: %s", method)
	}
	return h(ctx, se, params)
}

// decodeParams binds a params object into T. Absent params, a non-object, or
// a field of the wrong type are all -32602 Invalid params; unknown fields are
// ignored.
func decodeParams[T any](raw json.RawMessage) (T, error) {
	var v T
	raw = bytes.TrimSpace(raw)
	if len(raw) == 0 || raw[0] != '{' {
		return v, wire.InvalidParams(wire.MsgInvalidParams)
	}
	if err := json.Unmarshal(raw, &v); err != nil {
		return v, wire.InvalidParams(wire.MsgInvalidParams)
	}
	return v, nil
}

func withPath(f func(context.Context, *Session, wire.PathParams) (any, error)) handler {
	return func(ctx context.Context, se *Session, raw json.RawMessage) (any, func(), error) {
		p, err := decodeParams[wire.PathParams](raw)
		if err != nil {
			return nil, nil, err
		}
		r, err := f(ctx, se, p)
		return r, nil, err
	}
}

func withGit(f func(context.Context, *Session, wire.GitParams) (any, error)) handler {
	return func(ctx context.Context, se *Session, raw json.RawMessage) (any, func(), error) {
		p, err := decodeParams[wire.GitParams](raw)
		if err != nil {
			return nil, nil, err
		}
		r, err := f(ctx, se, p)
		return r, nil, err
	}
}

// ---- server.* (params ignored, whatever their type) ----

func serverPing(context.Context, *Session, json.RawMessage) (any, func(), error) {
	return pong, nil, nil
}

// pong is server.ping's result, encoded once (a json.RawMessage, in an
// interface already so that returning it does not box it again): a ping is
// the one request a client may send as fast as it can, and encoding the
// struct by reflection each time was a sixth of what the daemon did for one
// besides the socket reads and writes. Nothing modifies it. It is written
// out rather than marshalled at init, which every start of sous paid
// (encoding/json's first use); TestPongIsThePingResult holds it to
// json.Marshal(wire.PingResult{Pong: true}).
var pong any = json.RawMessage(`{"pong":true}`)

func serverVersion(_ context.Context, se *Session, _ json.RawMessage) (any, func(), error) {
	return wire.VersionResult{Version: se.s.cfg.Version, Platform: runtime.GOOS, Arch: runtime.GOARCH}, nil, nil
}

func serverCapabilities(_ context.Context, se *Session, _ json.RawMessage) (any, func(), error) {
	methods := append(append([]string(nil), wire.Methods...), extensionMethods...)
	methods, feats := se.s.withoutDisabled(methods, withSandbox(se.s.features())) // spawn_ext.go, spawn_sandbox.go
	return wire.CapabilitiesResult{Version: se.s.cfg.Version, Methods: methods, Features: feats}, nil, nil
}

// ---- process.* ----

func processSpawn(ctx context.Context, se *Session, raw json.RawMessage) (any, func(), error) {
	p, err := decodeSpawnParams(raw) // fastspawn.go
	if err != nil {
		return nil, nil, err
	}
	spec, err := se.s.spawnSpec(p) // spawn_ext.go: the contract's checks, the extensions', allowed commands
	if err != nil {
		return nil, nil, err
	}
	// process.spawn.mirror: pipes passed with the request (fdpass.go). With
	// the extension disabled, "mirror" is ignored as claustrum ignores it:
	// the descriptors are closed and the frames carry their data.
	mirrored := len(p.Mirror) > 0 && se.s.enabled(wire.FeatureSpawnMirror)
	if mirrored {
		kinds := mirrorKinds{stdin: se.s.enabled(wire.FeatureSpawnMirrorStdin), direct: se.s.enabled(wire.FeatureSpawnMirrorDirect),
			files: se.s.enabled(wire.FeatureSpawnMirrorFiles)}
		if spec.Mirror, err = passedMirror(ctx, p.Mirror, p.Direct, kinds); err != nil {
			return nil, nil, err
		}
		if spec.TTY != nil && (spec.Mirror.Stdin != nil || spec.Mirror.Direct) {
			closeMirror(spec.Mirror)
			return nil, nil, wire.InvalidParams("mirror: " + proc.MsgStdioToTerminal)
		}
		if spec.StdinClosed && spec.Mirror.Stdin != nil {
			closeMirror(spec.Mirror)
			return nil, nil, wire.InvalidParams(MsgStdinClosedPassed)
		}
	}
	pr, cur, again, err := se.s.reg.SpawnFollowed(spec)
	switch {
	case err != nil:
		closeMirror(spec.Mirror)
		return nil, nil, wire.Internal(err)
	case again:
		// process.spawn.key: a resend of a spawn already done. What the
		// first request passed is the process's; this one's copies go.
		// Like a reattach with "mirrored", its spawner keeps the marks.
		closeMirror(spec.Mirror)
	case spec.Mirror.Tees():
		go closeMirrorWhenDone(se, pr, spec.Mirror)
	}
	if !again {
		se.s.stats.Spawns.Add(1)
	}
	// When the id was reused, this session may still be delivering the
	// replaced process's frames; they must all precede the reply, so that no
	// stray frame arrives under the id once the new process is announced.
	// (A resend answered again may follow that very process already: the
	// cursor from its first frame replays what it had, which the client
	// drops by seq.)
	se.unfollow(p.ID)
	res := wire.SpawnResult{Success: true}
	if p.WantPid {
		res.Pid, res.StartTime = pr.Pid, pr.StartTime
	}
	// The frames follow the reply; the cursor taken at spawn keeps them all.
	return res, func() { se.followCursor(pr, cur, -1, p.NotifyGone, mirrored) }, nil
}

func processStdin(ctx context.Context, se *Session, raw json.RawMessage) (any, func(), error) {
	p, err := decodeStdinParams(raw, se.s.reg.StdinBuffer)
	if err != nil {
		return nil, nil, err
	}
	data := p.Data
	// The contract's order is decode -> exists -> running -> offset, with no
	// id-required step: a missing id is an unknown one ("Process not found").
	pr := se.s.reg.Get(p.ID)
	if pr == nil {
		return nil, nil, wire.InvalidParams(wire.MsgProcessNotFound)
	}
	if !pr.Running() {
		return nil, nil, wire.InvalidParams(wire.MsgProcessNotRunning)
	}
	// The requests sent before this one to the same process go first.
	if t := ticketOf(ctx); t != 0 && se.s.enabled(wire.FeatureStdinOrdered) {
		if err := se.order.wait(ctx, t, p.ID); err != nil {
			return nil, nil, err
		}
	}
	applied, dup, err := pr.WriteStdin(ctx, data, p.Offset)
	if err != nil {
		return nil, nil, err
	}
	if !dup {
		se.s.stats.StdinBytes.Add(int64(len(data)))
	}
	if p.Close && se.s.enabled(wire.FeatureStdinClose) {
		// Disabled, the param is unknown, as to a daemon without the
		// extension (claustrum's), which leaves stdin open.
		pr.CloseStdin()
	}
	return wire.StdinResult{Success: true, Applied: applied, Duplicate: dup}, nil, nil
}

// decodeStdinParams decodes process.stdin's params and its base64 data: in
// one pass for the common shape (into a buffer from alloc), else through the
// namespace's struct.
func decodeStdinParams(raw json.RawMessage, alloc func(n int) []byte) (stdinParams, error) {
	p, dataErr, ok := decodeStdinFast(raw, alloc)
	if !ok {
		pp, err := decodeParams[wire.ProcessParams](raw)
		if err != nil {
			return p, err
		}
		p = stdinParams{ID: pp.ID, Offset: pp.Offset, Close: pp.Close}
		p.Data, err = wire.DecodeBase64Bytes([]byte(pp.Data)) // the rare shape: one copy more is fine
		dataErr = err != nil
	}
	if dataErr {
		return p, wire.InvalidParams("Invalid base64 data")
	}
	// A negative offset names no place in the stream: the offset rules
	// would take it for an overlap and write the data's tail as if it
	// followed the applied mark.
	if p.Offset != nil && *p.Offset < 0 {
		return p, wire.InvalidParams(wire.MsgInvalidParams + ": offset must not be negative")
	}
	return p, nil
}

func processKill(_ context.Context, se *Session, raw json.RawMessage) (any, func(), error) {
	p, err := decodeParams[wire.ProcessParams](raw)
	if err != nil {
		return nil, nil, err
	}
	if p.ID == "" {
		return nil, nil, wire.InvalidParams("Process ID is required")
	}
	sig, err := ParseSignal(p.Signal)
	if err != nil {
		return nil, nil, err
	}
	pr := se.s.reg.Get(p.ID)
	if pr == nil {
		return nil, nil, wire.InvalidParams(wire.MsgProcessNotFound)
	}
	pr.Signal(sig) // skipped once reaped: the pgid may be someone else's by then
	return wire.SuccessResult{Success: true}, nil, nil
}

func processKillAndWait(ctx context.Context, se *Session, raw json.RawMessage) (any, func(), error) {
	p, err := decodeParams[wire.ProcessParams](raw)
	if err != nil {
		return nil, nil, err
	}
	if p.ID == "" {
		return nil, nil, wire.InvalidParams("Process ID is required")
	}
	sig, err := ParseSignal(p.Signal)
	if err != nil {
		return nil, nil, err
	}
	pr := se.s.reg.Get(p.ID)
	if pr == nil {
		return wire.KillAndWaitResult{}, nil, nil
	}
	escalate := p.Escalate == nil || *p.Escalate
	return pr.KillAndWait(ctx, sig, killGrace(p.TimeoutMs), escalate), nil, nil
}

// killGrace turns killAndWait's timeoutMs into the grace: absent or
// non-positive is the 3000 ms default, larger values are capped at 600000 ms.
// The cap is applied in milliseconds, before the conversion could overflow.
func killGrace(timeoutMs *int64) time.Duration {
	if timeoutMs == nil || *timeoutMs <= 0 {
		return proc.DefaultGrace
	}
	return time.Duration(min(*timeoutMs, proc.MaxGrace.Milliseconds())) * time.Millisecond
}

func processReattach(_ context.Context, se *Session, raw json.RawMessage) (any, func(), error) {
	p, err := decodeParams[wire.ProcessParams](raw)
	if err != nil {
		return nil, nil, err
	}
	// The contract lists no id-required error for reattach (unlike spawn and
	// killAndWait): a missing id is an unknown one, answered with the zeros.
	pr := se.s.reg.Get(p.ID)
	if pr == nil {
		return wire.ReattachResult{}, nil, nil
	}
	se.s.stats.Reattaches.Add(1)
	running := pr.Running()
	st := pr.Log.Stats()
	res := wire.ReattachResult{
		Found:        true,
		Running:      running,
		FirstSeq:     st.FirstSeq,
		LastSeq:      st.LastSeq,
		StdinApplied: pr.StdinApplied(),
	}
	if p.WantPid {
		res.Pid, res.StartTime = pr.Pid, pr.StartTime
	}
	// Replay what is retained up to lastSeq before answering, then follow.
	// The spawner of a mirrored process, back on a new connection, keeps
	// the marks: it has those frames (wire.ProcessParams.Mirrored).
	ownsMirror := p.Mirrored && se.s.enabled(wire.FeatureSpawnMirror)
	if err := se.follow(pr, p.FromSeq, st.LastSeq, p.NotifyGone, ownsMirror); err != nil {
		return nil, nil, wire.Internal(err)
	}
	return res, nil, nil
}

// processList is the process.list extension. Like every process.* method it
// requires a params object (docs/PROTOCOL.md, "Params presence and typing"); it reads
// no field of it.
func processList(_ context.Context, se *Session, raw json.RawMessage) (any, func(), error) {
	if _, err := decodeParams[wire.ProcessParams](raw); err != nil {
		return nil, nil, err
	}
	list := wire.ProcessListResult{Processes: []wire.ProcessInfo{}}
	for _, pr := range se.s.reg.List() {
		info := wire.ProcessInfo{
			ID:        pr.ID,
			Pid:       pr.Pid,
			Command:   pr.Command,
			Args:      pr.Args,
			StartTime: pr.StartTime,
			LastSeq:   pr.Log.Stats().LastSeq,
			Pipeline:  pr.Stages(),
			Tty:       pr.HasTTY(),
		}
		if info.Args == nil {
			info.Args = []string{}
		}
		if code, exited := pr.ExitCode(); exited {
			info.ExitCode = &code
			info.Signal = pr.EndSignal()
		} else {
			info.Running = true
		}
		list.Processes = append(list.Processes, info)
	}
	return list, nil, nil
}

// ParseSignal accepts "TERM", "SIGTERM", "sigterm" or a number; empty means
// SIGTERM.
func ParseSignal(name string) (syscall.Signal, error) {
	if name == "" {
		return syscall.SIGTERM, nil
	}
	if n, err := strconv.Atoi(name); err == nil && n > 0 && n < 65 {
		return syscall.Signal(n), nil
	}
	up := strings.TrimPrefix(strings.ToUpper(name), "SIG")
	if sig, ok := signals[up]; ok {
		return sig, nil
	}
	return 0, wire.InvalidParams("Invalid signal: " + name)
}

// signals are the names kill(1) knows on Linux: a user who writes SEGV
// should not have to know it is 11.
var signals = map[string]syscall.Signal{
	"HUP": syscall.SIGHUP, "INT": syscall.SIGINT, "QUIT": syscall.SIGQUIT, "KILL": syscall.SIGKILL,
	"TERM": syscall.SIGTERM, "USR1": syscall.SIGUSR1, "USR2": syscall.SIGUSR2, "STOP": syscall.SIGSTOP,
	"CONT": syscall.SIGCONT, "ALRM": syscall.SIGALRM, "PIPE": syscall.SIGPIPE, "ABRT": syscall.SIGABRT,
	"WINCH": syscall.SIGWINCH, "TSTP": syscall.SIGTSTP, "IOT": syscall.SIGIOT,
	"ILL": syscall.SIGILL, "TRAP": syscall.SIGTRAP, "BUS": syscall.SIGBUS, "FPE": syscall.SIGFPE,
	"SEGV": syscall.SIGSEGV, "STKFLT": syscall.SIGSTKFLT, "CHLD": syscall.SIGCHLD, "CLD": syscall.SIGCHLD,
	"TTIN": syscall.SIGTTIN, "TTOU": syscall.SIGTTOU, "URG": syscall.SIGURG, "XCPU": syscall.SIGXCPU,
	"XFSZ": syscall.SIGXFSZ, "VTALRM": syscall.SIGVTALRM, "PROF": syscall.SIGPROF, "IO": syscall.SIGIO,
	"POLL": syscall.SIGPOLL, "PWR": syscall.SIGPWR, "SYS": syscall.SIGSYS,
}
