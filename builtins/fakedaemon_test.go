package builtins

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"path"
	"sort"
	"strings"
	"sync"
	"time"

	"github.com/seed5ad92d46/sous/daemon/client"
	"github.com/seed5ad92d46/sous/daemon/wire"
	"github.com/seed5ad92d46/sous/runtime"
)

// fakeDaemon is an in-memory daemon for the builtins' own tests: it
// answers files.*, git.info, git.status and git.list_branches from what the
// test put in it, and spawns "programs" that write canned output and exit
// with a canned code. It stands where runtime's Connector and Daemon do,
// so what a test on it checks is the builtins' side: their arguments, the
// params they send, how they shape the answers. The daemon's own
// behaviour is tested against the real one (daemon/, cmd/sous); so are
// the builtins that need real processes or an agent.
//
// Its answers follow docs/PROTOCOL.md for what it models; it models
// nothing else: other methods fail with "Method not found", features are
// never advertised, and a process cannot be written to at an offset,
// signalled or resized (the call fails saying so).
type fakeDaemon struct {
	mu       sync.Mutex
	files    map[string]fakeFile    // by path as the builtin sends it
	repos    map[string]fakeRepo    // by path as the builtin sends it
	programs map[string]fakeProgram // by program name
	calls    []string               // every call, "method {params}", in order
	spawned  int
	closed   bool
}

// fakeFile is a file or, with dir set, a directory.
type fakeFile struct {
	content string
	dir     bool
	mode    string // ls-style; "-rw-r--r--" or "drwxr-xr-x" when empty
}

// fakeRepo is what git.info, git.status and git.list_branches say about
// a path inside a repository.
type fakeRepo struct {
	info     wire.GitInfoResult // IsRepo is set for it
	changes  []string
	branches []string
}

// fakeProgram is what a spawned program writes and how it exits.
type fakeProgram struct {
	stdout, stderr string
	exit           int
}

var (
	_ runtime.Connector = (*fakeDaemon)(nil)
	_ runtime.Daemon    = (*fakeDaemon)(nil)
	_ runtime.Proc      = (*fakeProc)(nil)
)

func newFakeDaemon() *fakeDaemon {
	return &fakeDaemon{files: make(map[string]fakeFile), repos: make(map[string]fakeRepo), programs: make(map[string]fakeProgram)}
}

// file adds a file (content) or a directory (dir) at p.
func (d *fakeDaemon) file(p string, f fakeFile) {
	d.mu.Lock()
	defer d.mu.Unlock()
	d.files[p] = f
}

// repo adds a repository's answers for the path p.
func (d *fakeDaemon) repo(p string, r fakeRepo) {
	d.mu.Lock()
	defer d.mu.Unlock()
	r.info.IsRepo = true
	d.repos[p] = r
}

// program makes name a program that spawns.
func (d *fakeDaemon) program(name string, p fakeProgram) {
	d.mu.Lock()
	defer d.mu.Unlock()
	d.programs[name] = p
}

// sent returns the calls made so far.
func (d *fakeDaemon) sent() []string {
	d.mu.Lock()
	defer d.mu.Unlock()
	return append([]string(nil), d.calls...)
}

// Default implements runtime.Connector: the fake is the default host.
func (d *fakeDaemon) Default(context.Context) (runtime.Daemon, error) { return d, d.checkOpen() }

// DefaultTarget implements runtime.Connector. The fake stands for the
// embedded daemon: a host on this machine, to the builtins.
func (d *fakeDaemon) DefaultTarget() string { return "embedded" }

// Open implements runtime.Connector: host("embedded") is the fake again.
func (d *fakeDaemon) Open(_ context.Context, target, _ string) (runtime.Daemon, error) {
	if target != "embedded" {
		return nil, fmt.Errorf("target %s: the fake daemon is only \"embedded\"", target)
	}
	return d, d.checkOpen()
}

// Close implements runtime.Connector.
func (d *fakeDaemon) Close() error {
	d.mu.Lock()
	defer d.mu.Unlock()
	d.closed = true
	return nil
}

func (d *fakeDaemon) checkOpen() error {
	d.mu.Lock()
	defer d.mu.Unlock()
	if d.closed {
		return errors.New("the run is over")
	}
	return nil
}

// Client implements runtime.Daemon: there is no client connection behind
// the fake, so no agent session can start on it.
func (d *fakeDaemon) Client() *client.Client { return nil }

// HasFeature implements runtime.Daemon: the fake has no extension.
func (d *fakeDaemon) HasFeature(context.Context, string) (bool, error) { return false, nil }

// Call implements runtime.Daemon for the methods the fake models.
func (d *fakeDaemon) Call(_ context.Context, method string, params, result any) error {
	raw, err := json.Marshal(params)
	if err != nil {
		return err
	}
	d.mu.Lock()
	defer d.mu.Unlock()
	d.calls = append(d.calls, method+" "+string(raw))
	var answer any
	switch method {
	case "files.stat", "files.list", "files.read", "files.validate":
		var p wire.PathParams
		if err := json.Unmarshal(raw, &p); err != nil {
			return wire.InvalidParams(err.Error())
		}
		answer, err = d.filesCall(method, p)
	case "git.info", "git.status", "git.list_branches":
		var p wire.GitParams
		if err := json.Unmarshal(raw, &p); err != nil {
			return wire.InvalidParams(err.Error())
		}
		answer = d.gitCall(method, p.Path)
	default:
		return &wire.Error{Code: wire.CodeMethodNotFound, Message: "Method not found: " + method}
	}
	if err != nil {
		return err
	}
	// The answer travels as JSON, as over a connection.
	b, err := json.Marshal(answer)
	if err != nil {
		return err
	}
	return json.Unmarshal(b, result)
}

// filesCall answers the files methods. d.mu is held.
func (d *fakeDaemon) filesCall(method string, p wire.PathParams) (any, error) {
	f, exists := d.files[p.Path]
	switch method {
	case "files.stat":
		if !exists {
			return wire.StatResult{}, nil
		}
		return wire.StatResult{Exists: true, IsDir: f.dir, Size: int64(len(f.content)), Mode: f.lsMode()}, nil
	case "files.list":
		if !exists || !f.dir {
			return nil, &wire.Error{Code: wire.CodeInternal, Message: "open " + p.Path + ": no such file or directory"}
		}
		entries := []wire.ListEntry{}
		for name, child := range d.files {
			if path.Dir(name) == p.Path && name != p.Path {
				entries = append(entries, wire.ListEntry{Name: path.Base(name), Path: name, IsDir: child.dir})
			}
		}
		sort.Slice(entries, func(i, j int) bool { return entries[i].Name < entries[j].Name })
		return wire.ListResult{Entries: entries}, nil
	case "files.read":
		switch {
		case !exists:
			return wire.ReadResult{}, nil
		case f.dir:
			return nil, wire.InvalidParams("files.read: path is a directory")
		case p.MaxBytes != nil && int64(len(f.content)) > *p.MaxBytes:
			return nil, wire.InvalidParams("files.read: file exceeds maxBytes")
		}
		return wire.ReadResult{Exists: true, Content: f.content}, nil
	}
	if !exists {
		return wire.ValidateResult{Error: "Path does not exist"}, nil
	}
	return wire.ValidateResult{Valid: true, IsDir: f.dir}, nil
}

func (f fakeFile) lsMode() string {
	switch {
	case f.mode != "":
		return f.mode
	case f.dir:
		return "drwxr-xr-x"
	}
	return "-rw-r--r--"
}

// gitCall answers the git queries; a path with no repository is outside
// one. d.mu is held.
func (d *fakeDaemon) gitCall(method, p string) any {
	r, ok := d.repos[p]
	switch method {
	case "git.info":
		if !ok {
			return wire.GitInfoNotRepo{}
		}
		return r.info
	case "git.status":
		return wire.GitStatusResult{IsRepo: ok, Clean: ok && len(r.changes) == 0, Changes: r.changes}
	}
	return wire.GitBranchesResult{IsRepo: ok, Branches: append([]string{}, r.branches...)}
}

// Spawn implements runtime.Daemon: the program's output arrives before
// Spawn returns, as the embedded daemon's may, and the process has ended
// by then.
func (d *fakeDaemon) Spawn(_ context.Context, spec client.SpawnSpec, h client.FrameHandler) (runtime.Proc, error) {
	d.mu.Lock()
	d.calls = append(d.calls, "process.spawn "+strings.Join(append([]string{spec.Command}, spec.Args...), " "))
	prog, ok := d.programs[spec.Command]
	d.spawned++
	pid := 1000 + d.spawned
	d.mu.Unlock()
	switch {
	case spec.Pipeline != nil || spec.TTY || spec.Sandbox != nil:
		return nil, errors.New("the fake daemon spawns plain programs only")
	case !ok:
		return nil, &wire.Error{Code: wire.CodeInternal, Message: "spawn " + spec.Command + ": executable file not found in $PATH"}
	}
	seq := int64(0)
	for _, out := range []struct {
		stream wire.Stream
		data   string
	}{{wire.Stdout, prog.stdout}, {wire.Stderr, prog.stderr}} {
		if out.data != "" {
			seq++
			h(&wire.Frame{Seq: seq, Stream: out.stream, Data: []byte(out.data)})
		}
	}
	p := &fakeProc{pid: pid, code: prog.exit, done: make(chan struct{})}
	close(p.done)
	return p, nil
}

// Reattach implements runtime.Daemon: the fake keeps no processes to
// reattach to.
func (d *fakeDaemon) Reattach(context.Context, string, int64, client.FrameHandler) (runtime.Proc, wire.ReattachResult, error) {
	return nil, wire.ReattachResult{Found: false}, nil
}

// CreateWorktree implements runtime.Daemon; the fake has no worktrees.
func (d *fakeDaemon) CreateWorktree(context.Context, wire.GitParams) (wire.WorktreeResult, error) {
	return wire.WorktreeResult{}, errors.New("the fake daemon has no worktrees")
}

// RemoveWorktree implements runtime.Daemon; the fake has no worktrees.
func (d *fakeDaemon) RemoveWorktree(context.Context, wire.GitParams, bool) (wire.WorktreeResult, error) {
	return wire.WorktreeResult{}, errors.New("the fake daemon has no worktrees")
}

// fakeProc is a process of the fake daemon: it has exited by the time the
// builtin sees it. Its stdin takes writes, as a real one's does until the
// daemon answers "Process not running".
type fakeProc struct {
	pid  int
	code int
	done chan struct{}

	mu    sync.Mutex
	stdin []byte
}

func (p *fakeProc) Pid() int                         { return p.pid }
func (p *fakeProc) Lost() int64                      { return 0 }
func (p *fakeProc) Done() <-chan struct{}            { return p.done }
func (p *fakeProc) Exited() (int, bool)              { return p.code, true }
func (p *fakeProc) Err() error                       { return nil }
func (p *fakeProc) ExitSignal() int                  { return 0 }
func (p *fakeProc) TimedOut() bool                   { return false }
func (p *fakeProc) StageExitCodes() []int            { return nil }
func (p *fakeProc) CloseStdin(context.Context) error { return nil }

func (p *fakeProc) Write(_ context.Context, data []byte) (int64, error) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.stdin = append(p.stdin, data...)
	return int64(len(p.stdin)), nil
}

func (p *fakeProc) WriteAt(context.Context, []byte, int64) (int64, bool, error) {
	return 0, false, errors.New("the fake daemon's processes take no stdin offsets")
}

func (p *fakeProc) Kill(context.Context, string) error {
	return &wire.Error{Code: wire.CodeInvalidParams, Message: "Process not running"}
}

func (p *fakeProc) KillAndWait(context.Context, string, time.Duration, bool) (wire.KillAndWaitResult, error) {
	return wire.KillAndWaitResult{}, errors.New("the fake daemon's processes cannot be signalled")
}

func (p *fakeProc) Resize(context.Context, int, int) error {
	return errors.New("the fake daemon's processes have no terminal")
}
