package proc

import (
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"golang.org/x/sys/unix"
)

// spawnLeaver runs script, a shell script that starts a background command
// in the child's group, prints its pid and exits. It returns the process,
// exited and its exit frame in, and a pidfd of the background command,
// which is still running.
func spawnLeaver(t *testing.T, r *Registry, id, script string) (*Process, int) {
	t.Helper()
	p, err := r.Spawn(Spec{ID: id, Command: "sh", Args: []string{"-c", script}})
	if err != nil {
		t.Fatal(err)
	}
	var out strings.Builder
	for _, f := range frames(t, p) {
		out.Write(f.Data)
	}
	pid, err := strconv.Atoi(strings.TrimSpace(out.String()))
	if err != nil {
		t.Fatalf("%s printed %q", script, out.String())
	}
	fd, err := unix.PidfdOpen(pid, 0)
	if err != nil {
		t.Fatalf("pidfd of the background command: %v", err)
	}
	t.Cleanup(func() {
		unix.PidfdSendSignal(fd, syscall.SIGKILL, nil, 0)
		unix.Close(fd)
	})
	if !pidfdAlive(fd) {
		t.Fatalf("%s: the background command is gone already", script)
	}
	return p, fd
}

// gone waits up to d for the process behind pidfd to exit.
func gone(fd int, d time.Duration) bool {
	deadline := time.Now().Add(d)
	for {
		fds := []unix.PollFd{{Fd: int32(fd), Events: unix.POLLIN}}
		n, err := unix.Poll(fds, int(max(time.Until(deadline).Milliseconds(), 0)))
		if err == unix.EINTR && time.Now().Before(deadline) {
			continue // the runtime's preemption signal
		}
		return err == nil && n == 1
	}
}

const (
	leaveSleep       = "sleep 60 & echo $!"
	leaveStubbornOne = "(trap '' TERM; exec sleep 60) & echo $!" // ignores SIGTERM
)

// A signal for a process whose leader has exited reaches what the leader
// left running in its group: process.kill "tears down the whole child tree",
// and a recipe's stop() or timeout is meant to. The signal is not reported
// as sent to the process itself.
func TestSignalReachesStrays(t *testing.T) {
	r := newTestRegistry(t)
	p, fd := spawnLeaver(t, r, "leaver", leaveSleep)
	if p.Signal(syscall.SIGTERM) {
		t.Error("Signal reported a reaped process as signalled")
	}
	if !gone(fd, 5*time.Second) {
		t.Fatal("the background sleep survived SIGTERM to its exited leader")
	}
}

// Shutdown stops what exited leaders left running, as it stops running
// children: SIGTERM, then SIGKILL after the grace for what ignores it.
func TestShutdownStopsStrays(t *testing.T) {
	r := NewRegistry(Options{DrainAfterExit: 50 * time.Millisecond})
	_, plain := spawnLeaver(t, r, "plain", leaveSleep)
	_, stubborn := spawnLeaver(t, r, "stubborn", leaveStubbornOne)
	// And one whose leader is still running when the shutdown starts, and
	// dies of its SIGTERM while the member it started ignores it.
	_, late := spawnStubbornLeader(t, r, Spec{ID: "running"})

	start := time.Now()
	r.Shutdown(false, 300*time.Millisecond)
	took := time.Since(start)
	for name, fd := range map[string]int{"plain": plain, "stubborn": stubborn, "running's": late} {
		if !gone(fd, time.Second) {
			t.Errorf("%s background sleep survived the shutdown", name)
		}
	}
	if took > 5*time.Second {
		t.Errorf("shutdown took %v", took)
	}
}

// With keep (--keep-children), the strays are left running too.
func TestShutdownKeepLeavesStrays(t *testing.T) {
	r := NewRegistry(Options{DrainAfterExit: 50 * time.Millisecond})
	_, fd := spawnLeaver(t, r, "kept", leaveSleep)
	r.Shutdown(true, 100*time.Millisecond)
	if gone(fd, 300*time.Millisecond) {
		t.Fatal("a stray was stopped by a shutdown that keeps children")
	}
}

// Only the group's members are strays: a child that exits alone leaves
// none (one kill(2) finds that), and a background command that moved to a
// session of its own is not the process's to signal.
func TestStraysAreTheGroupsMembers(t *testing.T) {
	r := newTestRegistry(t)
	p, err := r.Spawn(Spec{ID: "alone", Command: "true"})
	if err != nil {
		t.Fatal(err)
	}
	<-p.Done()
	p.mu.Lock()
	s := p.strays
	p.mu.Unlock()
	if s != nil {
		t.Errorf("a child that exited alone has strays: %+v", s.members)
	}
	// The leader waits until the command has moved (it prints its pid
	// after setsid), so that the move is not raced by the reap.
	q, fd := spawnLeaver(t, r, "moved", "setsid sh -c 'echo $$; exec sleep 60' & sleep 0.3")
	<-q.Done()
	q.Signal(syscall.SIGTERM)
	if gone(fd, 300*time.Millisecond) {
		t.Fatal("a signal for the process reached a command in another session")
	}
}

// spawnStubbornLeader runs a leader that starts a member ignoring SIGTERM
// and then waits (dying of SIGTERM itself); it returns the process and a
// pidfd of the member.
func spawnStubbornLeader(t *testing.T, r *Registry, spec Spec) (*Process, int) {
	t.Helper()
	// The member prints its own pid once it ignores SIGTERM (an ignored
	// signal stays ignored across exec), so no signal can come before.
	spec.Command, spec.Args = "sh", []string{"-c", `(trap '' TERM; exec sh -c 'echo $$; exec sleep 60') & exec sleep 60`}
	p, err := r.Spawn(spec)
	if err != nil {
		t.Fatal(err)
	}
	c := p.Log.NewCursor(0)
	fs, err := c.Next(t.Context(), nil, 1)
	c.Close()
	if err != nil || len(fs) != 1 {
		t.Fatalf("first frame: %v %v", fs, err)
	}
	pid, err := strconv.Atoi(strings.TrimSpace(string(fs[0].Data)))
	if err != nil {
		t.Fatal(err)
	}
	fd, err := unix.PidfdOpen(pid, 0)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		unix.PidfdSendSignal(fd, syscall.SIGKILL, nil, 0)
		unix.Close(fd)
	})
	return p, fd
}

// A kill right after the exit is seen reaches what the leader left, even
// when that holds no pipe (so the exit frame comes at once): the members
// are found before the reap is announced.
func TestKillRightAfterExitReachesStrays(t *testing.T) {
	r := newTestRegistry(t)
	for i := range 20 {
		p, fd := spawnLeaver(t, r, "quiet", "sleep 60 >/dev/null 2>&1 & echo $!")
		<-p.Done()
		p.Signal(syscall.SIGKILL)
		if !gone(fd, 2*time.Second) {
			t.Fatalf("round %d: the member survived a kill right after the exit", i)
		}
	}
}

// A timeout ends the whole group: a member that ignores SIGTERM gets the
// SIGKILL when the grace ends, although the leader died of the SIGTERM.
func TestTimeoutKillsStubbornStrays(t *testing.T) {
	r := NewRegistry(Options{DrainAfterExit: 50 * time.Millisecond, TimeoutGrace: 300 * time.Millisecond})
	t.Cleanup(func() { r.Shutdown(false, 100*time.Millisecond) })
	_, fd := spawnStubbornLeader(t, r, Spec{ID: "timed", Timeout: 200 * time.Millisecond})
	if !gone(fd, 3*time.Second) {
		t.Fatal("the member that ignores SIGTERM survived the timeout")
	}
}

// killAndWait with escalate does the same within its grace, and says it
// escalated.
func TestKillAndWaitEscalatesToStrays(t *testing.T) {
	r := newTestRegistry(t)
	p, fd := spawnStubbornLeader(t, r, Spec{ID: "stopped"})
	res := p.KillAndWait(t.Context(), syscall.SIGTERM, 300*time.Millisecond, true)
	if !res.Died || !res.Escalated {
		t.Errorf("KillAndWait = %+v, want died and escalated", res)
	}
	if !gone(fd, time.Second) {
		t.Fatal("the member that ignores SIGTERM survived KillAndWait's escalation")
	}
}
