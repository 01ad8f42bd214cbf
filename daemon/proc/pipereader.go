package proc

import (
	"errors"
	"fmt"
	"io"
	"os"
	"syscall"

	"golang.org/x/sys/unix"

	"github.com/seed5ad92d46/sous/daemon/mirror"
	"github.com/seed5ad92d46/sous/daemon/wire"
	"github.com/seed5ad92d46/sous/internal/iovec"
)

const (
	// smallReadBufs 32 KiB buffers take in a default 64 KiB pipe at once.
	smallReadBufs = 2
	// bigPipeSize is what a pipe grows to once its child outruns the
	// daemon (or a stdin chunk outsizes it), and bigReadBufs how many
	// buffers one read then fills: with the default pipe, a fast child and
	// the daemon took turns in 64 KiB steps, each costing both a sleep and
	// a wake-up.
	bigPipeSize = 1 << 20
	bigReadBufs = 8
	// maxBigPipes bounds the pipes grown at once across the registry. Pipe
	// memory counts against the user's pipe-user-pages-soft (64 MiB by
	// default), past which the kernel gives every new pipe of that user
	// only two pages, so the daemon must not spend that budget freely.
	maxBigPipes = 16
)

// pipeReader reads one output pipe of a child a frame's worth of buffers at
// a time: one readv fills up to bigReadBufs buffers of wire.MaxFrameData.
type pipeReader struct {
	r  *Registry
	f  *os.File
	rc syscall.RawConn
	// bufs are the buffers the next read fills; len is how many. They are
	// taken when there is something to read (fill) and given back while
	// the pipe is empty (park).
	bufs [][]byte
	big  bool // the pipe was grown (it holds a slot of r.bigPipes)

	// mirror is the pipe that what is read is first teed to (Spec.Mirror),
	// until that fails; nil: none. toFile is instead a file (or the null
	// device) that what is read is written to (process.spawn.mirror.files),
	// until a write fails or falls short.
	mirror  syscall.RawConn
	toFile  syscall.RawConn
	scratch [2]int          // a pipe of our own that mirrored output passes through (see consume)
	done    <-chan struct{} // closed when the process is discarded: stop waiting for the mirror
	iov     [][]byte        // reused: the part of bufs a scratch read fills
}

func newPipeReader(r *Registry, f, mirror *os.File, done <-chan struct{}) (*pipeReader, error) {
	rc, err := f.SyscallConn()
	if err != nil {
		return nil, err
	}
	pr := &pipeReader{r: r, f: f, rc: rc, bufs: make([][]byte, smallReadBufs, bigReadBufs), done: done, scratch: [2]int{-1, -1}}
	if mirror != nil {
		pr.mirrorTo(mirror)
	}
	return pr, nil
}

// fill takes the read buffers a read is about to fill.
func (pr *pipeReader) fill() {
	for i, b := range pr.bufs {
		if b == nil {
			pr.bufs[i] = pr.r.getBuf()
		}
	}
}

// park gives the read buffers back while the pipe is empty, and returns
// false for rc.Read to wait: most processes are quiet most of the time, and
// 300 of them, each printing a line and then sleeping, held 128 KiB of
// buffers apiece (87% of the daemon's heap).
func (pr *pipeReader) park() bool {
	for i, b := range pr.bufs {
		if b != nil {
			pr.r.putBuf(b)
			pr.bufs[i] = nil
		}
	}
	return false
}

// mirrorTo sets up mirroring to m. If it cannot (out of descriptors), the
// output is read unmirrored, as output tee cannot take always is.
func (pr *pipeReader) mirrorTo(m *os.File) {
	rc, err := m.SyscallConn()
	if err != nil {
		return
	}
	if !mirror.IsPipe(m) {
		pr.toFile = rc // a file the daemon writes (writeFile): no tee, no scratch pipe
		return
	}
	if err := unix.Pipe2(pr.scratch[:], unix.O_CLOEXEC); err != nil {
		pr.scratch = [2]int{-1, -1}
		return
	}
	// Room for a whole read; if the pipe budget says no, consume takes
	// smaller steps.
	_, _ = unix.FcntlInt(uintptr(pr.scratch[1]), unix.F_SETPIPE_SZ, bigReadBufs*wire.MaxFrameData)
	pr.mirror = rc
}

// read waits for output and returns it as frame-sized chunks appended to
// chunks; each chunk is the caller's (a buffer handed over whole, or a copy
// of a small read). The first mirrored of the n bytes were written to the
// mirror too (all of them, or none, but for a file mirror's last write).
// io.EOF once the pipe is closed and drained; a deadline set on f ends the
// wait with os.ErrDeadlineExceeded.
func (pr *pipeReader) read(chunks [][]byte) (_ [][]byte, n, mirrored int, err error) {
	var rerr error
	err = pr.rc.Read(func(fd uintptr) bool {
		if pr.mirror != nil {
			switch t, terr := pr.tee(int(fd)); {
			case terr == unix.EAGAIN:
				return pr.park() // nothing to read yet
			case terr != nil:
				// The mirror's reader went away (EPIPE), or it cannot be
				// teed to: from here on the caller writes the frames.
				pr.mirror = nil
			case t > 0:
				// An error comes back with the data before it; the
				// caller then stops reading, as it must: what is left in
				// the pipe went to the mirror already.
				pr.fill()
				n, rerr = pr.consume(int(fd), t)
				mirrored = max(n, 0)
				return true
			}
			// t == 0: end of file, which the read below reports.
		}
		pr.fill()
		for {
			n, rerr = unix.Readv(int(fd), pr.bufs)
			switch rerr {
			case unix.EINTR:
			case unix.EAGAIN:
				return pr.park()
			default:
				return true
			}
		}
	})
	if err == nil {
		err = rerr
	}
	if n <= 0 {
		if err == nil {
			err = io.EOF
		}
		return chunks, 0, 0, err
	}
	if pr.toFile != nil {
		mirrored = pr.writeFile(n)
	}
	full := n == len(pr.bufs)*wire.MaxFrameData
	for i, left := 0, n; left > 0; i++ {
		k := min(left, wire.MaxFrameData)
		left -= k
		if k >= wire.MaxFrameData/2 {
			chunks = append(chunks, pr.bufs[i][:k])
			pr.bufs[i] = nil // the next fill takes another
		} else {
			// A small read is copied out so that it does not pin 32 KiB.
			chunks = append(chunks, append([]byte(nil), pr.bufs[i][:k]...))
		}
	}
	if full && !pr.big {
		pr.grow()
	}
	return chunks, n, mirrored, err
}

// writeFile writes the n bytes just read to the file mirror and returns
// how many it took. A write that fails or falls short (a full disk, a file
// size limit, the spawner gone and the mirror closed) ends the mirror: what
// it did not take goes in frames with data, for the spawner to write, and
// to report, as it would without a mirror.
func (pr *pipeReader) writeFile(n int) int {
	pr.iov = pr.iov[:0]
	for i, left := 0, n; left > 0; i++ {
		k := min(left, wire.MaxFrameData)
		pr.iov = append(pr.iov, pr.bufs[i][:k])
		left -= k
	}
	wrote := 0
	err := pr.toFile.Control(func(fd uintptr) {
		for iov := pr.iov; wrote < n; {
			m, werr := unix.Writev(int(fd), iov)
			if werr == unix.EINTR {
				continue
			}
			if werr != nil || m <= 0 {
				return
			}
			wrote += m
			iov = iovec.Consumed(iov, m)
		}
	})
	clear(pr.iov)
	if err != nil || wrote < n {
		pr.toFile = nil
	}
	return wrote
}

// tee copies up to a read's worth of the pipe's content to the mirror
// without consuming it (the pages are shared, not copied). EAGAIN means the
// pipe is empty, and 0 that it is at its end; while it is the mirror that
// is full, tee waits for room.
func (pr *pipeReader) tee(fd int) (int, error) {
	for {
		var t int64
		var terr error
		if err := pr.mirror.Control(func(mfd uintptr) {
			t, terr = unix.Tee(fd, int(mfd), len(pr.bufs)*wire.MaxFrameData, unix.SPLICE_F_NONBLOCK)
		}); err != nil {
			return 0, err // the mirror was closed
		}
		switch {
		case terr == nil && t > 0:
			return int(t), nil
		case terr == unix.EINTR:
			continue
		case terr != nil && terr != unix.EAGAIN:
			return 0, terr
		}
		// EAGAIN or 0: the pipe is empty, or at its end, or the mirror is
		// full. tee looks at the mirror before it sees that nothing is
		// left to copy (EAGAIN at end of file), and at the two pipes before
		// it locks them, so a mirror another writer fills in between (the
		// other stream, bound for the same pipe) makes it copy nothing.
		// One poll of the pipe tells them apart: readable means data is
		// waiting for the mirror; hung up and not readable, end of file.
		pfd := []unix.PollFd{{Fd: int32(fd), Events: unix.POLLIN}}
		switch n, err := unix.Poll(pfd, 0); {
		case err == unix.EINTR:
			continue
		case err != nil:
			return 0, err
		case n == 0:
			return 0, unix.EAGAIN // empty, with a writer left
		case pfd[0].Revents&unix.POLLIN == 0:
			return 0, nil // hung up, nothing left
		}
		if err := pr.waitMirror(); err != nil {
			return 0, err
		}
	}
}

// waitMirror waits until the mirror has room: its reader is slower than the
// child, and the child is held back as a pipe would hold it back. It gives
// up when the process is discarded or the registry shuts down; the rest is
// then read unmirrored.
func (pr *pipeReader) waitMirror() error {
	for {
		select {
		case <-pr.done:
			return errors.New("process discarded")
		case <-pr.r.stopping:
			return errors.New("shutting down")
		default:
		}
		var n int
		var perr error
		if err := pr.mirror.Control(func(mfd uintptr) {
			n, perr = unix.Poll([]unix.PollFd{{Fd: int32(mfd), Events: unix.POLLOUT}}, 100)
		}); err != nil {
			return err
		}
		if perr != nil && perr != unix.EINTR {
			return perr
		}
		if n > 0 {
			return nil // writable, or its reader is gone (POLLERR): tee says which
		}
	}
}

// consume takes the t bytes tee just copied out of the pipe and into the
// read buffers: no more (what follows was not mirrored), and all of them (or
// they would be mirrored twice). It splices them into a scratch pipe first
// and copies them from there: splice only moves page references, so the
// child's pipe is locked briefly, where a read would hold its lock through
// the copy while the child waits to write. Side by side (9 interleaved runs
// of `sous exec -- head -c 1G /dev/zero | cat`, 2 CPUs), reading the child's
// pipe directly instead took 824 ms against 691 (medians), slower in 8 of
// 9. The scratch pipe is not counted in Registry.bigPipes: where the pipe
// budget refuses its size (many clients mirroring at once), it keeps the
// default and splice moves less per step. Should splice fail, the rest is
// read from the child's pipe itself.
func (pr *pipeReader) consume(fd, t int) (int, error) {
	got := 0
	for got < t {
		k, err := unix.Splice(fd, nil, pr.scratch[1], nil, t-got, 0)
		if err == unix.EINTR {
			continue
		}
		if err != nil || k <= 0 {
			err := pr.readInto(fd, got, t-got)
			if err != nil {
				return got, fmt.Errorf("read mirrored output: %w", err)
			}
			return t, nil
		}
		if err := pr.readInto(pr.scratch[0], got, int(k)); err != nil {
			return got, fmt.Errorf("read mirrored output: %w", err)
		}
		got += int(k)
	}
	return got, nil
}

// readInto reads exactly k bytes from fd into the read buffers from
// offset at. They are in the pipe already, so this does not wait.
func (pr *pipeReader) readInto(fd, at, k int) error {
	for end := at + k; at < end; {
		pr.iov = pr.iov[:0]
		for pos := at; pos < end; {
			i, off := pos/wire.MaxFrameData, pos%wire.MaxFrameData
			stop := min(wire.MaxFrameData, off+end-pos)
			pr.iov = append(pr.iov, pr.bufs[i][off:stop])
			pos += stop - off
		}
		m, err := unix.Readv(fd, pr.iov)
		clear(pr.iov)
		if err == unix.EINTR {
			continue
		}
		if m <= 0 || err != nil {
			if err == nil {
				err = io.ErrUnexpectedEOF
			}
			return err
		}
		at += m
	}
	return nil
}

// grow enlarges the pipe and the reads once the child has filled the pipe:
// it writes faster than the daemon reads. Failing to grow (the user's pipe
// budget, or other growers holding every slot) only keeps the defaults.
func (pr *pipeReader) grow() {
	if !pr.r.growPipe(pr.rc) {
		return
	}
	pr.big = true
	for len(pr.bufs) < bigReadBufs {
		pr.bufs = append(pr.bufs, nil)
	}
}

// growPipe enlarges the pipe of rc to bigPipeSize if a slot of bigPipes is
// free, and reports whether it did; the caller then gives the slot back
// (releasePipe) once done with the pipe.
func (r *Registry) growPipe(rc syscall.RawConn) bool {
	if r.bigPipes.Add(1) > maxBigPipes {
		r.releasePipe()
		return false
	}
	var ferr error
	if err := rc.Control(func(fd uintptr) { _, ferr = unix.FcntlInt(fd, unix.F_SETPIPE_SZ, bigPipeSize) }); err != nil || ferr != nil {
		r.releasePipe()
		return false
	}
	return true
}

// releasePipe gives back the slot of a pipe growPipe grew.
func (r *Registry) releasePipe() { r.bigPipes.Add(-1) }

// close returns the buffers and the grown pipe's slot; the caller closes f.
func (pr *pipeReader) close() {
	if pr.scratch[0] >= 0 {
		unix.Close(pr.scratch[0])
		unix.Close(pr.scratch[1])
		pr.scratch = [2]int{-1, -1}
	}
	for i, b := range pr.bufs {
		pr.r.putBuf(b)
		pr.bufs[i] = nil
	}
	if pr.big {
		pr.r.releasePipe()
		pr.big = false
	}
}
