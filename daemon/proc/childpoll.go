package proc

import (
	"os"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"golang.org/x/sys/unix"
)

// childPoller watches every plain child's pidfd and output pipes on one
// epoll descriptor of its own, which is itself in the runtime's poller, with
// one goroutine for the whole registry. A spawn then starts no goroutine
// and readies none until its child writes or exits.
//
// With a goroutine per child that reaps it and one per pipe that reads it,
// every spawn started three goroutines while its child was still execing,
// and the child's exit readied three more through the runtime's poller.
// Each of those made Go wake an idle CPU to look for work (wakep), which on
// a 2-vCPU machine took the CPU the child needed; see docs/PERFORMANCE.md,
// "Spawn to exit". Now a child that writes gets a reader for that pipe on
// its first output, as before; one that exits having written nothing is
// reaped and given its exit frame on the poller's goroutine, its pipes
// closed at their end without a reader ever starting.
//
// The daemon keeps the child's ends of the output pipes until the child is
// reaped (output.held): the kernel closes a dying child's descriptors one
// by one before its pidfd turns readable, and each pipe's end woke the
// poller on its own, three wake-ups for one exit (runtime/trace). Held,
// the pipes end only when the poller lets go of them, after the exit, and
// one wake-up does it all. The cost is two descriptors a running child.
type childPoller struct {
	r    *Registry
	ep   *os.File // the epoll descriptor, in the runtime's poller
	rc   syscall.RawConn
	epfd int

	// batches counts the batches of events handled: the poller's
	// wake-ups, which TestChildPollerOneWakePerExit holds to one an exit.
	batches atomic.Int64

	mu      sync.Mutex
	watched map[uint64]watchedFD // by the token in its epoll event; guarded by mu
	token   uint64               // the last token given; guarded by mu
}

// watchedFD is what a descriptor in the poller's epoll set is: a child's
// pidfd (out < 0) or one of its outputs (p.outputs[out]). Events name it by
// a token, not by its number: a number closed while its event waits in a
// batch may be a new child's descriptor by the time the event is read.
type watchedFD struct {
	c   *polledChild
	fd  int
	out int
}

// polledChild is a child the poller reaps.
type polledChild struct {
	p      *Process
	pidfd  int
	fds    []int        // the outputs' descriptors (p.outputs order)
	tokens []uint64     // the pidfd's token, then the outputs'; set by watch
	state  []pipeState  // touched by the poller's goroutine only, after watch
	left   atomic.Int32 // the readers and the reaper still to finish
}

// pipeState is where one of a polled child's outputs is.
type pipeState int8

const (
	pipeWatched pipeState = iota // in the epoll set: nothing read it yet
	pipeReading                  // handed to a reader goroutine (readPipe)
	pipeClosed                   // ended with nothing in it: closed by the poller
)

// newChildPoller makes the epoll descriptor and starts the poller's
// goroutine; nil when the descriptor cannot be polled by the runtime, and
// children are then supervised as before (supervise.go).
func newChildPoller(r *Registry) *childPoller {
	epfd, err := unix.EpollCreate1(unix.EPOLL_CLOEXEC)
	if err != nil {
		return nil
	}
	if err := unix.SetNonblock(epfd, true); err != nil {
		unix.Close(epfd)
		return nil
	}
	ep := os.NewFile(uintptr(epfd), "epoll") // non-blocking: in the runtime's poller
	rc, err := ep.SyscallConn()
	if err != nil {
		ep.Close()
		return nil
	}
	// A descriptor the runtime could not add to its poller fails a
	// deadline; one it did accepts it.
	if err := ep.SetReadDeadline(time.Time{}); err != nil {
		ep.Close()
		return nil
	}
	cp := &childPoller{r: r, ep: ep, rc: rc, epfd: epfd, watched: map[uint64]watchedFD{}}
	go cp.run()
	return cp
}

// close stops the poller's goroutine. Children still watched are left
// unreaped: Shutdown closes it only once every child has finished.
func (cp *childPoller) close() { cp.ep.Close() }

// watch hands p to the poller, which reaps it and appends its exit frame
// (finish) once it has exited and its outputs have ended. It reports false
// when p cannot be watched (no pidfd), and nothing was taken then.
func (cp *childPoller) watch(p *Process) bool {
	if len(p.cmds) != 1 {
		return false // a pipeline: its stages are reaped in order (reap)
	}
	pidfd, err := unix.PidfdOpen(p.Pid, 0)
	if err != nil {
		return false
	}
	c := &polledChild{p: p, pidfd: pidfd, fds: make([]int, len(p.outputs)), state: make([]pipeState, len(p.outputs))}
	c.left.Store(int32(len(p.outputs)) + 1)
	for i, o := range p.outputs {
		c.fds[i] = -1
		if rc, err := o.f.SyscallConn(); err == nil {
			rc.Control(func(fd uintptr) { c.fds[i] = int(fd) })
		}
		if c.fds[i] < 0 {
			unix.Close(pidfd)
			return false
		}
	}
	cp.mu.Lock()
	defer cp.mu.Unlock()
	var added []uint64
	add := func(fd, out int) bool {
		cp.token++
		cp.watched[cp.token] = watchedFD{c: c, fd: fd, out: out}
		ev := unix.EpollEvent{Events: unix.EPOLLIN}
		setToken(&ev, cp.token)
		if err := unix.EpollCtl(cp.epfd, unix.EPOLL_CTL_ADD, fd, &ev); err != nil {
			delete(cp.watched, cp.token)
			return false
		}
		added = append(added, cp.token)
		return true
	}
	ok := add(pidfd, -1)
	for i := 0; ok && i < len(c.fds); i++ {
		ok = add(c.fds[i], i)
	}
	if !ok {
		// Taken back under mu: the poller's goroutine, which looks them up
		// under it, finds none of them.
		for _, t := range added {
			unix.EpollCtl(cp.epfd, unix.EPOLL_CTL_DEL, cp.watched[t].fd, nil)
			delete(cp.watched, t)
		}
		unix.Close(pidfd)
		return false
	}
	c.tokens = added
	return true
}

// run waits for the epoll set in the runtime's poller and handles what is
// ready, until close.
func (cp *childPoller) run() {
	events := make([]unix.EpollEvent, 64)
	for {
		n := 0
		err := cp.rc.Read(func(fd uintptr) bool {
			var werr error
			n, werr = unix.EpollWait(int(fd), events, 0)
			if werr != nil {
				n = 0 // EINTR: nothing was taken; wait again
			}
			return n > 0
		})
		if err != nil {
			return // closed
		}
		cp.batches.Add(1)
		cp.handle(events[:n])
	}
}

// handle handles one batch of events in three passes. Pipes that ended
// empty first: final, they need neither a reader nor a question to the
// pipe. Then exits: a child's pipes end with it, in the same batch or the
// one before, and reaping it ends those still watched (reaped). Then the
// pipes with data: a reader each.
func (cp *childPoller) handle(events []unix.EpollEvent) {
	for _, ev := range events {
		if ev.Events&(unix.EPOLLHUP|unix.EPOLLIN) != unix.EPOLLHUP {
			continue
		}
		if w, ok := cp.peek(tokenOf(ev)); ok && w.out >= 0 && w.c.p.outputs[w.out].mirror == nil {
			cp.take(tokenOf(ev))
			cp.endEmpty(w.c, w.out)
		}
	}
	for _, ev := range events {
		if w, ok := cp.peek(tokenOf(ev)); ok && w.out < 0 {
			cp.take(tokenOf(ev))
			cp.exited(w.c)
		}
	}
	for _, ev := range events {
		if w, ok := cp.take(tokenOf(ev)); ok {
			cp.startReader(w.c, w.out, false)
		}
	}
}

// peek reports what token names, if it is still in the epoll set.
func (cp *childPoller) peek(token uint64) (watchedFD, bool) {
	cp.mu.Lock()
	w, ok := cp.watched[token]
	cp.mu.Unlock()
	return w, ok
}

// endEmpty closes output i, known to have ended holding nothing, and
// counts it done, unless it mirrors somewhere: then a reader still has to
// end the mirror's side.
func (cp *childPoller) endEmpty(c *polledChild, i int) bool {
	o := c.p.outputs[i]
	if o.mirror != nil {
		return false
	}
	c.state[i] = pipeClosed
	o.f.Close()
	cp.done(c)
	return true
}

// take removes the descriptor of token from the epoll set and reports what
// it was. Each is handled once: level-triggered, it would stay ready.
func (cp *childPoller) take(token uint64) (watchedFD, bool) {
	cp.mu.Lock()
	w, ok := cp.watched[token]
	delete(cp.watched, token)
	cp.mu.Unlock()
	if ok {
		unix.EpollCtl(cp.epfd, unix.EPOLL_CTL_DEL, w.fd, nil)
	}
	return w, ok
}

// setToken and tokenOf put a token in an epoll event's data and read it
// back (the event's Fd and Pad are its two halves).
func setToken(ev *unix.EpollEvent, t uint64) { ev.Fd, ev.Pad = int32(uint32(t)), int32(uint32(t>>32)) }
func tokenOf(ev unix.EpollEvent) uint64      { return uint64(uint32(ev.Fd)) | uint64(uint32(ev.Pad))<<32 }

// startReader hands output i to a reader goroutine: it has data, or has
// ended while the child lives on (a closed stdout), or the child has exited
// with something still in it or a descendant still holding it (afterExit:
// then the drain deadline applies, as in supervise).
func (cp *childPoller) startReader(c *polledChild, i int, afterExit bool) {
	c.state[i] = pipeReading
	o := c.p.readable(i)
	if afterExit {
		o.f.SetReadDeadline(time.Now().Add(cp.r.opt.DrainAfterExit))
	}
	cp.r.wg.Add(1) // while the child's own count is held
	go func() {
		defer cp.r.wg.Done()
		cp.r.readPipe(c.p, o)
		cp.done(c)
	}()
}

// exited reaps a child whose pidfd is readable, then ends the outputs no
// reader has: closed when they hold nothing and nobody else holds their
// write end, else handed to a reader under the drain deadline.
func (cp *childPoller) exited(c *polledChild) {
	var info unix.Siginfo
	err := unix.Waitid(unix.P_PIDFD, c.pidfd, &info, unix.WEXITED|unix.WNOWAIT|unix.WNOHANG, nil)
	for err == unix.EINTR {
		err = unix.Waitid(unix.P_PIDFD, c.pidfd, &info, unix.WEXITED|unix.WNOWAIT|unix.WNOHANG, nil)
	}
	unix.Close(c.pidfd)
	wait := waitExited
	if err == nil && info.Signo != 0 {
		wait = nil // exited: reaping it does not wait
	}
	// Else readable yet not exited, which is not what a pidfd says (or
	// reaped by someone else: then waitExited returns at once): wait as
	// supervise does.
	//
	// The pipes nothing read yet leave the epoll set before the daemon
	// lets go of the child's ends, or their ending would make the set
	// ready again for nothing.
	for i := range c.p.outputs {
		if c.state[i] == pipeWatched {
			cp.take(c.tokens[1+i])
		}
	}
	c.p.closeHeld()
	c.p.reap(cp.r.addStrays, wait) // closes reapedCh
	cp.reaped(c)
}

// reaped is exited's second half, once the child is reaped.
func (cp *childPoller) reaped(c *polledChild) {
	deadline := time.Now().Add(cp.r.opt.DrainAfterExit)
	var ask []unix.PollFd // the pipes nothing read yet, asked in one poll(2)
	for i, o := range c.p.outputs {
		switch c.state[i] {
		case pipeReading:
			o.f.SetReadDeadline(deadline)
		case pipeWatched: // out of the epoll set (exited)
			ask = append(ask, unix.PollFd{Fd: int32(c.fds[i]), Events: unix.POLLIN})
		}
	}
	if len(ask) > 0 {
		endedEmpty(ask)
	}
	for i := range c.p.outputs {
		if c.state[i] != pipeWatched {
			continue
		}
		ended := ask[0].Revents&(unix.POLLIN|unix.POLLHUP) == unix.POLLHUP
		ask = ask[1:]
		if !ended || !cp.endEmpty(c, i) {
			cp.startReader(c, i, true)
		}
	}
	cp.done(c)
}

// done counts one reader or the reaper finished; the last one appends the
// exit frame and releases the child's share of the registry's WaitGroup.
func (cp *childPoller) done(c *polledChild) {
	if c.left.Add(-1) == 0 {
		cp.r.finish(c.p)
		cp.r.wg.Done()
	}
}

// endedEmpty asks pipe read ends, without waiting, whether they hold data
// (POLLIN) and whether any writer is left (POLLHUP once none is): a pipe
// with POLLHUP alone would read only its end. On an error every Revents
// stays 0: not ended, and a reader finds out.
func endedEmpty(pfds []unix.PollFd) {
	_, err := unix.Poll(pfds, 0)
	for err == unix.EINTR {
		_, err = unix.Poll(pfds, 0)
	}
	if err != nil {
		for i := range pfds {
			pfds[i].Revents = 0
		}
	}
}
