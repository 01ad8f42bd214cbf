package builtins

import (
	"context"
	"fmt"
	"sync"

	"github.com/seed5ad92d46/sous/daemon/wire"
	"github.com/seed5ad92d46/sous/runtime"
)

// liveProcesses are the processes of a run that have not ended, by
// connection and id: what spawn checks an id against before the daemon's
// process.spawn would replace (and kill) the process that has it. The zero
// value is ready to use.
type liveProcesses struct {
	mu    sync.Mutex
	procs map[liveKey]*Process
}

type liveKey struct {
	conn runtime.Daemon
	id   string
}

// add records p, followed through conn, until p ends (see Process.watch).
func (l *liveProcesses) add(conn runtime.Daemon, p *Process) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.procs == nil {
		l.procs = make(map[liveKey]*Process)
	}
	l.procs[liveKey{conn, p.id}] = p
	p.unlist = func() { l.remove(conn, p) }
}

// remove forgets p, unless another handle has taken its place (a
// replacement, or a second reattach).
func (l *liveProcesses) remove(conn runtime.Daemon, p *Process) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if k := (liveKey{conn, p.id}); l.procs[k] == p {
		delete(l.procs, k)
	}
}

// running returns the process of the run with id on conn, if it runs.
func (l *liveProcesses) running(conn runtime.Daemon, id string) (*Process, bool) {
	l.mu.Lock()
	p := l.procs[liveKey{conn, id}]
	l.mu.Unlock()
	if p == nil {
		return nil, false
	}
	closed, _, _ := p.state()
	return p, !closed
}

// checkIDFree refuses an id a running process has, as `sous exec --id`
// does: the daemon's process.spawn replaces (and kills) it, which a
// recipe that reused an id by mistake would only notice when the first
// handle's wait failed. The run's own processes are known here; those of
// other clients come from process.list, where the daemon has it.
func checkIDFree(c *runtime.Call, conn runtime.Daemon, id string) error {
	pid := 0
	if p, running := procOf(c.Env).live.running(conn, id); running {
		pid = p.proc.Pid()
	} else {
		var found bool
		var err error
		if found, pid, err = runningOnDaemon(c, conn, id); err != nil {
			return c.Errorf("check id %q: %s", id, daemonMessage(err))
		} else if !found {
			return nil
		}
	}
	which := ""
	if pid != 0 {
		which = fmt.Sprintf(" (pid %d)", pid)
	}
	return c.Errorf("id %q is already running%s; pass replace=True to kill and replace it", id, which)
}

// runningOnDaemon asks the daemon whether a process with id runs, and its
// pid. A daemon without process.list has nothing to ask: found is false.
func runningOnDaemon(c *runtime.Call, conn runtime.Daemon, id string) (found bool, pid int, err error) {
	var res wire.ProcessListResult
	err = block(c.Env, c.Env.Ctx, func(ctx context.Context) error {
		ok, err := conn.HasFeature(ctx, wire.FeatureProcessList)
		if err != nil || !ok {
			return err
		}
		return conn.Call(ctx, "process.list", map[string]any{}, &res)
	})
	if err != nil {
		return false, 0, err // res may still be written to: an interrupted block leaves fn running
	}
	for _, p := range res.Processes {
		if p.ID == id && p.Running {
			return true, p.Pid, nil
		}
	}
	return false, 0, nil
}
