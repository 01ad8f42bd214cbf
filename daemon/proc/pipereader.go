package proc

import (
	"io"
	"os"
	"syscall"

	"golang.org/x/sys/unix"

	"github.com/seed5ad92d46/sous/daemon/wire"
)

const (
	// smallReadBufs 32 KiB buffers take in a default 64 KiB pipe at once.
	smallReadBufs = 2
	// bigPipeSize is what a pipe grows to once its child outruns the
	// daemon, and bigReadBufs how many buffers one read then fills: with
	// the default pipe, a fast child and the daemon took turns in 64 KiB
	// steps, each costing both a sleep and a wake-up.
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
	r    *Registry
	f    *os.File
	rc   syscall.RawConn
	bufs [][]byte // the buffers the next read fills; len is how many
	big  bool     // the pipe was grown (it holds a slot of r.bigPipes)
}

func newPipeReader(r *Registry, f *os.File) (*pipeReader, error) {
	rc, err := f.SyscallConn()
	if err != nil {
		return nil, err
	}
	pr := &pipeReader{r: r, f: f, rc: rc, bufs: make([][]byte, smallReadBufs, bigReadBufs)}
	for i := range pr.bufs {
		pr.bufs[i] = r.getBuf()
	}
	return pr, nil
}

// read waits for output and returns it as frame-sized chunks appended to
// chunks; each chunk is the caller's (a buffer handed over whole, or a copy
// of a small read). io.EOF once the pipe is closed and drained; a deadline
// set on f ends the wait with os.ErrDeadlineExceeded.
func (pr *pipeReader) read(chunks [][]byte) ([][]byte, int, error) {
	var n int
	var rerr error
	err := pr.rc.Read(func(fd uintptr) bool {
		for {
			n, rerr = unix.Readv(int(fd), pr.bufs)
			if rerr != unix.EINTR {
				return rerr != unix.EAGAIN
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
		return chunks, 0, err
	}
	full := n == len(pr.bufs)*wire.MaxFrameData
	for i, left := 0, n; left > 0; i++ {
		k := min(left, wire.MaxFrameData)
		left -= k
		if k >= wire.MaxFrameData/2 {
			chunks = append(chunks, pr.bufs[i][:k])
			pr.bufs[i] = pr.r.getBuf()
		} else {
			// A small read is copied out so that it does not pin 32 KiB.
			chunks = append(chunks, append([]byte(nil), pr.bufs[i][:k]...))
		}
	}
	if full && !pr.big {
		pr.grow()
	}
	return chunks, n, nil
}

// grow enlarges the pipe and the reads once the child has filled the pipe:
// it writes faster than the daemon reads. Failing to grow (the user's pipe
// budget, or other growers holding every slot) only keeps the defaults.
func (pr *pipeReader) grow() {
	if pr.r.bigPipes.Add(1) > maxBigPipes {
		pr.r.bigPipes.Add(-1)
		return
	}
	var ferr error
	if err := pr.rc.Control(func(fd uintptr) { _, ferr = unix.FcntlInt(fd, unix.F_SETPIPE_SZ, bigPipeSize) }); err != nil || ferr != nil {
		pr.r.bigPipes.Add(-1)
		return
	}
	pr.big = true
	for len(pr.bufs) < bigReadBufs {
		pr.bufs = append(pr.bufs, pr.r.getBuf())
	}
}

// close returns the buffers and the grown pipe's slot; the caller closes f.
func (pr *pipeReader) close() {
	for i, b := range pr.bufs {
		pr.r.putBuf(b)
		pr.bufs[i] = nil
	}
	if pr.big {
		pr.r.bigPipes.Add(-1)
		pr.big = false
	}
}
