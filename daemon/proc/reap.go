package proc

import (
	"errors"
	"os"
	"os/exec"
	"syscall"

	"golang.org/x/sys/unix"
)

// reap waits for the child to exit without reaping it, then reaps it under
// the lock that signalling takes, so no signal can reach a recycled pgid.
// A pipeline's leader (its first stage, whose pid is the group's id) is
// reaped last, after the other stages: until then it holds the group's id,
// alive or as a zombie. What the leader left of its group, if anything,
// goes to keep before reapedCh closes (strays.go). wait waits for a pid to
// exit (waitExited); nil when the caller knows they all have.
func (p *Process) reap(keep func(*strayGroup), wait func(pid int)) {
	n := len(p.cmds)
	codes, shell := make([]int, n), make([]int, n)
	for k := range n {
		i := (k + 1) % n // 1, 2, ..., n-1, then 0
		if wait != nil {
			wait(p.cmds[i].Process.Pid)
		}
		p.mu.Lock()
		err := p.cmds[i].Wait()
		code := 0
		if err != nil {
			var ee *exec.ExitError
			if errors.As(err, &ee) {
				if ws, ok := ee.Sys().(syscall.WaitStatus); ok && ws.Signaled() {
					code = -1
				} else {
					code = ee.ExitCode()
				}
			} else {
				code = -1
			}
		}
		codes[i], shell[i] = code, shellStatus(err)
		if i != 0 {
			p.mu.Unlock()
			continue
		}
		p.exitCode = codes[n-1]
		if p.ext.pipeline {
			p.stageCodes = shell
		}
		if codes[n-1] == -1 && shell[n-1] > 128 {
			p.signal = shell[n-1] - 128
		}
		p.reaped = true
		// Members left now hold the group's id, so it cannot have been
		// recycled yet: findStrays may look for them. Before reapedCh
		// closes, so that a kill right after wait() finds them.
		strays := findStrays(p.Pid)
		p.strays = strays
		p.mu.Unlock()
		keep(strays)
		close(p.reapedCh)
	}
}

// waitExited waits until the child pid has exited, without reaping it. It
// waits on a pidfd through the runtime's poller where the kernel gives one
// (Linux 5.10), rather than in waitid: a blocked waitid holds an OS thread,
// so every running child cost the daemon a thread (300 quiet children, 307
// threads), and Go ends a program that reaches 10,000 of them.
func waitExited(pid int) {
	if fd, err := unix.PidfdOpen(pid, unix.PIDFD_NONBLOCK); err == nil {
		f := os.NewFile(uintptr(fd), "pidfd")
		defer f.Close()
		if rc, err := f.SyscallConn(); err == nil {
			exited := false
			rerr := rc.Read(func(fd uintptr) bool {
				for {
					var info unix.Siginfo // Signo stays 0 while the child runs
					err := unix.Waitid(unix.P_PIDFD, int(fd), &info, unix.WEXITED|unix.WNOWAIT|unix.WNOHANG, nil)
					if err == unix.EINTR {
						continue // not false: the poller reports the exit once
					}
					exited = err == nil && info.Signo != 0
					return exited || err != nil
				}
			})
			if rerr == nil && exited {
				return
			}
		}
	}
	var info unix.Siginfo
	for unix.Waitid(unix.P_PID, pid, &info, unix.WEXITED|unix.WNOWAIT, nil) == unix.EINTR {
	}
}
