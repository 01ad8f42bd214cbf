package proc

import (
	"os"
	"slices"
	"time"

	"golang.org/x/sys/unix"

	"github.com/seed5ad92d46/sous/daemon/mirror"
)

// outputPipe is a new quiet pipe for one output stream, or, when m is
// Direct and passed is set, no read end and passed itself as the child's
// end.
func outputPipe(m mirror.Spec, passed *os.File) (r, w *os.File, err error) {
	if m.Direct && passed != nil {
		return nil, passed, nil
	}
	return quietPipe()
}

// pipeUse says which end of a pipe to children the daemon keeps.
type pipeUse int

const (
	daemonReads   pipeUse = iota // a child's output
	daemonWrites                 // a child's stdin
	betweenStages                // both ends go to children (a pipeline)
)

// childPipe is os.Pipe for a pipe to children: only the end the daemon
// keeps is non-blocking and in the runtime's poller. os.Pipe puts both ends
// there, so a child's end was switched back to blocking for exec and taken
// out of the poller again when closed: 11 syscalls a spawn (strace -c over
// 600 spawns).
func childPipe(use pipeUse) (r, w *os.File, err error) {
	var p [2]int
	if err := unix.Pipe2(p[:], unix.O_CLOEXEC); err != nil {
		return nil, nil, os.NewSyscallError("pipe2", err)
	}
	kept := -1
	switch use {
	case daemonReads:
		kept = p[0]
	case daemonWrites:
		kept = p[1]
	}
	if kept >= 0 {
		// F_SETFL with O_NONBLOCK alone: a new pipe has no other status
		// flag to keep (the access mode is not one), so unix.SetNonblock's
		// F_GETFL first is one system call a pipe for nothing.
		if _, err := unix.FcntlInt(uintptr(kept), unix.F_SETFL, unix.O_NONBLOCK); err != nil {
			unix.Close(p[0])
			unix.Close(p[1])
			return nil, nil, os.NewSyscallError("setnonblock", err)
		}
	}
	// os.NewFile makes a non-blocking descriptor pollable, a blocking one not.
	return os.NewFile(uintptr(p[0]), "|0"), os.NewFile(uintptr(p[1]), "|1"), nil
}

// quietPipe is a pipe for a plain child's stdin or output, both ends left
// blocking and so out of the runtime's poller (os.NewFile puts only a
// non-blocking descriptor there). The child poller watches the output ends
// on its own epoll set, and most children (true, a quick command that
// writes nothing, takes no input) never get a reader or a stdin writer:
// the daemon's end goes into the runtime's poller (pollable) only when one
// starts. In it from the start, each pipe cost an fcntl, an epoll_ctl to
// add it and one to take it out at its close: 9 system calls a spawn, and
// a share of the runtime's poller for a descriptor it never waited on.
func quietPipe() (r, w *os.File, err error) {
	var p [2]int
	if err := unix.Pipe2(p[:], unix.O_CLOEXEC); err != nil {
		return nil, nil, os.NewSyscallError("pipe2", err)
	}
	return os.NewFile(uintptr(p[0]), "|0"), os.NewFile(uintptr(p[1]), "|1"), nil
}

// inPoller reports whether f is in the runtime's poller: only such a file
// takes a deadline. Setting one clears any it had, so it is asked before
// any is set.
func inPoller(f *os.File) bool { return f.SetDeadline(time.Time{}) == nil }

// pollable is f, a quiet pipe's end, moved into the runtime's poller for a
// reader or writer that waits on it: a duplicate of its descriptor made
// non-blocking, for which os.NewFile registers it, and f closed (a file's
// place in the poller is fixed when it is made). When that fails (out of
// descriptors) f is returned as it is: its reader fails at once, as a
// reader that could not start, and ends the pipe.
func pollable(f *os.File) *os.File {
	rc, err := f.SyscallConn()
	if err != nil {
		return f
	}
	nfd, derr := -1, error(nil)
	if err := rc.Control(func(fd uintptr) { nfd, derr = unix.FcntlInt(fd, unix.F_DUPFD_CLOEXEC, 0) }); err != nil || derr != nil {
		return f
	}
	// F_SETFL with O_NONBLOCK alone, as childPipe; the flag is the open
	// file's, shared with f's descriptor, which is closed next.
	if _, err := unix.FcntlInt(uintptr(nfd), unix.F_SETFL, unix.O_NONBLOCK); err != nil {
		unix.Close(nfd)
		return f
	}
	nf := os.NewFile(uintptr(nfd), f.Name())
	f.Close()
	return nf
}

// readOutputs is outs without those the daemon does not read (no read end:
// the child's own, see mirror.Spec.Direct).
func readOutputs(outs ...output) []output {
	return slices.DeleteFunc(outs, func(o output) bool { return o.f == nil })
}

func closeAll(fs ...*os.File) {
	for _, f := range fs {
		f.Close()
	}
}

func setBlocking(f *os.File) error {
	rc, err := f.SyscallConn()
	if err != nil {
		return err
	}
	if cerr := rc.Control(func(fd uintptr) { err = unix.SetNonblock(int(fd), false) }); cerr != nil {
		return cerr
	}
	return err
}
