// Package proc runs the daemon's child processes: each in its own process
// group, its stdout and stderr read into a streamlog.Log as frames, its stdin
// fed through an exactly-once offset queue, and its reaping ordered with
// signalling so that a reaped group is never signalled (its pgid could belong
// to someone else by then).
package proc

import (
	"context"
	"log/slog"
	"os"
	"sort"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/seed5ad92d46/sous/daemon/streamlog"
)

// Options configure a Registry.
type Options struct {
	Log      streamlog.Options // per process
	Env      []string          // the environment children inherit (default os.Environ())
	Dir      string            // the default working directory (default the daemon's)
	Logger   *slog.Logger
	StdinMax int // bytes of stdin queued per process before writers wait (default 8 MiB)
	// DrainAfterExit is how long output keeps being read after the child
	// exits while descendants still hold its pipes and stay quiet (default 250 ms).
	DrainAfterExit time.Duration
	// OnExit, when set, is called after a process's exit frame is appended.
	OnExit func(*Process)
	// RetainExited is how many exited processes stay reattachable (default
	// 1000); RetainFor how long after exiting (default 1 h). See retain.go.
	RetainExited int
	RetainFor    time.Duration
	// ReplayDiskTotal bounds the replay spilled to disk by all processes
	// together (default 4 GiB); past it, the spill of the processes that
	// exited longest ago is dropped. See retain.go.
	ReplayDiskTotal int64
	// ReplayMemTotal bounds the replay that exited processes keep in memory,
	// all together (default 64 MiB); past it, the processes that exited
	// longest ago move theirs to disk, or drop it where nothing spills
	// (streamlog.Log.Shed). Running processes keep their own windows
	// (Log.MemLimit each). See retain.go.
	ReplayMemTotal int
	// OnOutput, when set, is called for every output read with its byte
	// count and how many of those bytes went to a client's passed pipe or
	// file on the daemon's side (mirrored: teed or written, see
	// pipeReader), the rest reaching subscribers only as frames' data.
	OnOutput func(n, mirrored int)
	// TimeoutGrace is how long a group killed for its Spec.Timeout gets
	// between SIGTERM and SIGKILL (default DefaultGrace, 3 s).
	TimeoutGrace time.Duration
	// DieWithDaemon has the kernel SIGKILL every child (each stage of a
	// pipeline) when the daemon's process dies, even by SIGKILL, when no
	// shutdown can run: for an embedded daemon, whose processes nobody can
	// reach once it is gone. Grandchildren are not covered.
	DieWithDaemon bool
}

// Registry holds the daemon's processes by id.
type Registry struct {
	opt Options

	mu    sync.Mutex
	procs map[string]*Process
	wg    sync.WaitGroup // every process's goroutines
	bufs  sync.Pool      // *frameBuf: see getBuf
	// stdinBufs holds *stdinBuf: see StdinBuffer.
	stdinBufs sync.Pool
	// bigPipes counts the output pipes grown beyond the default (pipereader.go).
	bigPipes atomic.Int64
	// spilled is the replay on disk across every log; reclaiming is set
	// while a goroutine frees some of it (retain.go).
	spilled      atomic.Int64
	reclaiming   atomic.Bool
	reclaimFloor atomic.Int64 // no reclaim below this: the last one found nothing more

	// exited queues exited processes in exit order, nexited counts the
	// entries still retained (retain.go); both guarded by mu.
	exited  []exitedProc
	nexited int
	// exitedMem is the replay memory of the retained exited processes
	// (Options.ReplayMemTotal); guarded by mu.
	exitedMem int
	// expiry forgets exited processes once RetainFor has passed although
	// nothing else exits (retain.go); noExpiry once the registry shut down.
	// Both guarded by mu.
	expiry   *time.Timer
	noExpiry bool

	// stopping is closed when Shutdown starts: readers waiting for a full
	// mirror (a consumer that stopped reading) give up on it then, or
	// Shutdown would wait for them forever.
	stopping     chan struct{}
	stoppingOnce sync.Once

	// spawning counts the spawns between their start and their entry in
	// procs, so that Shutdown waits for them before it decides what to stop:
	// a child started just before would otherwise be neither killed nor
	// kept, only leaked. shutting, once set, refuses new spawns. Add and
	// the flag are guarded by mu.
	spawning sync.WaitGroup
	shutting bool
	// starting holds, for each id a SpawnFollowed is starting, what is
	// closed once it is in procs or failed: the next spawn of the id
	// waits for it (awaitSpawnOf). Guarded by mu.
	starting map[string]chan struct{}

	// strays are the groups reaped leaders left members in, for Shutdown
	// (strays.go); guarded by mu.
	strays []*strayGroup

	// poller reaps and reads the plain children (childpoll.go); nil when
	// the kernel gives no pollable epoll, and children then get goroutines
	// of their own.
	poller *childPoller
}

// NewRegistry returns an empty registry.
func NewRegistry(opt Options) *Registry {
	if opt.Env == nil {
		opt.Env = os.Environ()
	}
	if opt.Logger == nil {
		opt.Logger = slog.New(slog.DiscardHandler)
	}
	if opt.DrainAfterExit <= 0 {
		opt.DrainAfterExit = 250 * time.Millisecond
	}
	if opt.RetainExited <= 0 {
		opt.RetainExited = defaultRetainExited
	}
	if opt.RetainFor <= 0 {
		opt.RetainFor = defaultRetainFor
	}
	if opt.ReplayDiskTotal <= 0 {
		opt.ReplayDiskTotal = defaultReplayDiskTotal
	}
	if opt.ReplayMemTotal <= 0 {
		opt.ReplayMemTotal = defaultReplayMemTotal
	}
	r := &Registry{opt: opt, procs: make(map[string]*Process), starting: make(map[string]chan struct{}), stopping: make(chan struct{})}
	r.opt.Log.Recycle = r.putBuf
	r.opt.Log.OnDisk = r.spilledChanged
	if r.opt.Log.WriteSlots == nil {
		r.opt.Log.WriteSlots = streamlog.NewWriteSlots(maxStreamingSpills)
	}
	if r.opt.Log.Spares == nil && r.opt.Log.SpillDir != "" {
		r.opt.Log.Spares = streamlog.NewSpares(maxSpareSpills, spareSpillIdle)
	}
	// Made now, not at the first spawn: its goroutine and descriptor are
	// the registry's from the start, not a leak a caller finds later.
	r.poller = newChildPoller(r)
	return r
}

// maxSpareSpills and spareSpillIdle bound the files of dropped spill
// segments the registry keeps for new segments to write over
// (streamlog.Spares): a stream at the replay disk total has a segment of an
// exited process's dropped as each of its own pushes the total over, and
// takes that file for its next one, so few are kept at once (by design;
// not counted). Four of 64 MiB is at most 256 MiB beyond the total, for
// no more than 10 s after the spilling stops.
const (
	maxSpareSpills = 4
	spareSpillIdle = 10 * time.Second
)

// maxStreamingSpills bounds the processes whose replay spills through 8 MiB
// write buffers at once (streamlog.WriteSlots): each holds two while it
// spills (the next spill file takes them over from a full one), until it
// exits or goes Options.IdleRelease without spilling; the others write
// 1 MiB at a time. Two of them hold 32 MiB, what four held when the
// buffers were 4 MiB.
const maxStreamingSpills = 2

// Get returns the process with id, or nil.
func (r *Registry) Get(id string) *Process {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.procs[id]
}

// List returns every process, ordered by start time.
func (r *Registry) List() []*Process {
	r.mu.Lock()
	ps := make([]*Process, 0, len(r.procs))
	for _, p := range r.procs {
		ps = append(ps, p)
	}
	r.mu.Unlock()
	sort.Slice(ps, func(i, j int) bool { return ps[i].StartTime < ps[j].StartTime })
	return ps
}

// Shutdown stops every running child: SIGTERM to each group, SIGKILL after
// grace. With keep, children are left running (they lose their stdio) and
// only the daemon's side is released. It returns the number of children that
// were running, and waits for the registry's goroutines.
func (r *Registry) Shutdown(keep bool, grace time.Duration) int {
	r.stoppingOnce.Do(func() { close(r.stopping) })
	r.mu.Lock()
	r.shutting = true
	r.mu.Unlock()
	r.spawning.Wait() // every child started is in procs now
	r.mu.Lock()
	r.noExpiry = true
	if r.expiry != nil {
		r.expiry.Stop()
		r.expiry = nil
	}
	r.mu.Unlock()
	running := 0
	var wg sync.WaitGroup
	for _, p := range r.List() {
		if !p.Running() {
			continue
		}
		running++
		if keep {
			p.release()
			continue
		}
		wg.Add(1)
		go func() {
			defer wg.Done()
			p.KillAndWait(context.Background(), syscall.SIGTERM, grace, true)
		}()
	}
	if keep {
		r.releaseStrays()
	} else {
		r.stopStrays(&wg, grace)
	}
	wg.Wait()
	if !keep {
		// Children that died of the SIGTERM just now may have left members
		// that ignore it (their reap recorded them before KillAndWait
		// returned). Before waiting for the registry's goroutines: a member
		// that keeps writing keeps its process's reader draining.
		r.stopStrays(&wg, grace)
		wg.Wait()
		r.wg.Wait()
		// Every child is reaped and finished: nothing is left to poll.
		if r.poller != nil {
			r.poller.close()
		}
	}
	for _, p := range r.List() {
		p.Log.Close()
		p.cancel()
	}
	r.opt.Log.Spares.Close()
	return running
}
