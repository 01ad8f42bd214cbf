package proc

import (
	"errors"
	"os"
	"strconv"
	"sync"
	"syscall"
	"time"

	"golang.org/x/sys/unix"

	"github.com/seed5ad92d46/sous/daemon/procstat"
)

// Strays are what is left of a process group once the daemon has reaped its
// leader: background descendants such as the `sleep` of `sh -c 'sleep 60 &
// echo started'`, which keep the group (and its id) alive. Signalling the
// group by its id is safe only while the daemon knows the id is still that
// group's: once the last member is gone the id can be recycled, and a
// process that becomes a group leader under it would get our signals. So
// the members are found when the leader is reaped, while their group is
// certainly still ours, and held by pidfds, which no recycled pid can
// satisfy. Later, the group is signalled by its id only while one of those
// members is alive and still in it.
//
// That lets process.kill, the timeout's escalation, a replaced id and
// shutdown reach what the leader left running, as they reach a running
// process's whole group.

// maxStrayPidfds bounds the members a stray group holds a pidfd for; the
// group's id reaches any others while one of those stays in it.
const maxStrayPidfds = 4

// strayGroup is a process group whose leader has been reaped.
type strayGroup struct {
	pgid int

	mu      sync.Mutex
	members []strayMember // alive when last looked at
}

type strayMember struct {
	pid   int
	pidfd int
}

// findStrays returns the group pgid's members, right after its leader was
// reaped, or nil when it has none (the usual case: one kill(2) tells). The
// caller must not let the group's id be reused in between: it calls this
// before anything can have recycled it.
func findStrays(pgid int) *strayGroup {
	if err := unix.Kill(-pgid, 0); err != nil {
		return nil // ESRCH: nobody left; EPERM: nothing we could signal anyway
	}
	g := &strayGroup{pgid: pgid}
	entries, err := os.ReadDir("/proc")
	if err != nil {
		return nil
	}
	for _, e := range entries {
		pid, err := strconv.Atoi(e.Name())
		if err != nil || pid == pgid {
			continue
		}
		if pg, ok := processGroup(pid); !ok || pg != pgid {
			continue
		}
		fd, err := unix.PidfdOpen(pid, 0)
		if err != nil {
			continue // gone meanwhile, or no pidfds here (before Linux 5.3)
		}
		// The pid may have been recycled between the read and the open:
		// the group read again now, while the pidfd holds the process, is
		// this process's if it is still alive after the read.
		if pg, ok := processGroup(pid); !ok || pg != pgid || !pidfdAlive(fd) {
			unix.Close(fd)
			continue
		}
		g.members = append(g.members, strayMember{pid: pid, pidfd: fd})
		if len(g.members) == maxStrayPidfds {
			break
		}
	}
	if len(g.members) == 0 {
		return nil
	}
	return g
}

// signal sends sig to what is left of the group and reports whether any of
// its known members was still alive. It signals the group by its id, and
// only while a known member is alive and in it: then the id is still this
// group's. Members that moved to a group of their own are left alone, as a
// signal to the group would have left them while its leader lived.
func (g *strayGroup) signal(sig syscall.Signal) bool {
	g.mu.Lock()
	defer g.mu.Unlock()
	g.prune()
	for _, m := range g.members {
		// Alive after the read: the group read was this process's.
		if pg, ok := processGroup(m.pid); ok && pg == g.pgid && pidfdAlive(m.pidfd) {
			unix.Kill(-g.pgid, sig)
			break
		}
	}
	return len(g.members) > 0
}

// alive reports whether any known member is still alive, forgetting those
// that are not.
func (g *strayGroup) alive() bool {
	g.mu.Lock()
	defer g.mu.Unlock()
	g.prune()
	return len(g.members) > 0
}

// prune closes the pidfds of members that exited. Called with mu held.
func (g *strayGroup) prune() {
	live := g.members[:0]
	for _, m := range g.members {
		if pidfdAlive(m.pidfd) {
			live = append(live, m)
		} else {
			unix.Close(m.pidfd)
		}
	}
	clear(g.members[len(live):])
	g.members = live
}

// release closes every pidfd: the group is left alone from here on.
func (g *strayGroup) release() {
	g.mu.Lock()
	defer g.mu.Unlock()
	for _, m := range g.members {
		unix.Close(m.pidfd)
	}
	g.members = nil
}

// stop ends the group as Shutdown ends a running child: SIGTERM (and
// SIGCONT, for a stopped member), then SIGKILL to what is left after grace.
func (g *strayGroup) stop(grace time.Duration) {
	if !g.signal(syscall.SIGTERM) {
		return
	}
	g.signal(syscall.SIGCONT)
	if g.gone(time.Now().Add(grace)) {
		return
	}
	g.signal(syscall.SIGKILL)
	g.release()
}

// gone waits until every known member has exited, or deadline, and
// reports whether they all did.
func (g *strayGroup) gone(deadline time.Time) bool {
	for g.alive() {
		if !time.Now().Before(deadline) {
			return false
		}
		time.Sleep(20 * time.Millisecond)
	}
	return true
}

// escalateStrays ends a grace the group's leader did not need: members
// it left that outlive deadline get SIGKILL, as the leader would have. It
// reports whether any did.
func (p *Process) escalateStrays(deadline time.Time) bool {
	p.mu.Lock()
	g := p.strays
	p.mu.Unlock()
	if g == nil || g.gone(deadline) {
		return false
	}
	g.signal(syscall.SIGKILL)
	return true
}

// pidfdAlive reports whether the process behind a pidfd has not exited: a
// pidfd polls readable once it has.
func pidfdAlive(fd int) bool {
	fds := []unix.PollFd{{Fd: int32(fd), Events: unix.POLLIN}}
	for {
		n, err := unix.Poll(fds, 0)
		if errors.Is(err, unix.EINTR) {
			continue
		}
		return err == nil && n == 0
	}
}

// processGroup reads pid's process group from /proc/PID/stat.
func processGroup(pid int) (int, bool) {
	s, err := procstat.Read(pid)
	if err != nil {
		return 0, false
	}
	pg, ok := s.Int(5)
	return int(pg), ok
}

// addStrays keeps g, if any, for Shutdown, and forgets the groups whose
// known members have all exited.
func (r *Registry) addStrays(g *strayGroup) {
	if g == nil {
		return
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	live := r.strays[:0]
	for _, s := range r.strays {
		if s.alive() {
			live = append(live, s)
		}
	}
	clear(r.strays[len(live):])
	r.strays = append(live, g)
}

// takeStrays empties the registry's list of stray groups.
func (r *Registry) takeStrays() []*strayGroup {
	r.mu.Lock()
	defer r.mu.Unlock()
	gs := r.strays
	r.strays = nil
	return gs
}

// stopStrays stops every stray group on goroutines counted by wg.
func (r *Registry) stopStrays(wg *sync.WaitGroup, grace time.Duration) {
	for _, g := range r.takeStrays() {
		wg.Go(func() { g.stop(grace) })
	}
}

// releaseStrays leaves every stray group running (Shutdown keeping the
// children).
func (r *Registry) releaseStrays() {
	for _, g := range r.takeStrays() {
		g.release()
	}
}
