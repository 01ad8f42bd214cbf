package fileops

import "io"

const (
	// readaheadChunks and readaheadChunkSize bound the decompressed data held
	// ahead of the unpacker to 1 MiB. Chunks are large because each handoff
	// between goroutines costs a wake-up: with the decompressor's own
	// 32 KiB reads, handoffs alone added a third to the time of inflating a
	// large archive on a busy two-vCPU machine.
	readaheadChunks    = 4
	readaheadChunkSize = 256 << 10
)

// readahead decompresses on its own goroutine into a few fixed chunks, so that
// inflating the archive overlaps with creating and writing files, as `tar
// xzf` overlaps with its gzip child process.
type readahead struct {
	full    chan []byte // filled chunks in stream order; closed after the last
	free    chan []byte // drained chunks for the filler to reuse
	done    chan struct{}
	exited  chan struct{}
	unblock io.Closer
	// whole fills each chunk before passing it on. Only for sources whose
	// reads cannot stall (a regular file): from a FIFO or a pipe, data
	// already decompressed must not wait for more input.
	whole bool

	err error  // the source's error; read only after full is closed
	cur []byte // unread part of the chunk being consumed
	buf []byte // that whole chunk, handed back to free once drained
}

// startReadahead starts reading src; whole is as in readahead. unblock is
// closed by stop to wake a filler blocked in a read that would otherwise
// never return.
func startReadahead(src io.Reader, unblock io.Closer, whole bool) *readahead {
	ra := &readahead{
		full:    make(chan []byte, readaheadChunks),
		free:    make(chan []byte, readaheadChunks),
		done:    make(chan struct{}),
		exited:  make(chan struct{}),
		unblock: unblock,
		whole:   whole,
	}
	go ra.fill(src)
	return ra
}

func (ra *readahead) fill(src io.Reader) {
	defer close(ra.exited)
	defer close(ra.full) // after ra.err is set, which the close publishes
	made := 0
	for {
		var b []byte
		select {
		case b = <-ra.free:
		default:
			// Chunks are made on demand: a small archive needs one.
			if made < readaheadChunks {
				b = make([]byte, readaheadChunkSize)
				made++
				break
			}
			select {
			case b = <-ra.free:
			case <-ra.done:
				return
			}
		}
		n, err := src.Read(b)
		for ra.whole && err == nil && n < len(b) {
			var m int
			m, err = src.Read(b[n:])
			n += m
		}
		if n > 0 {
			select {
			case ra.full <- b[:n]:
			case <-ra.done:
				return
			}
		}
		if err != nil {
			if err != io.EOF {
				ra.err = err
			}
			return
		}
	}
}

func (ra *readahead) Read(p []byte) (int, error) {
	for len(ra.cur) == 0 {
		if ra.buf != nil {
			ra.free <- ra.buf[:cap(ra.buf)] // never blocks: free holds every chunk
			ra.buf = nil
		}
		b, ok := <-ra.full
		if !ok {
			if ra.err != nil {
				return 0, ra.err
			}
			return 0, io.EOF
		}
		ra.buf, ra.cur = b, b
	}
	n := copy(p, ra.cur)
	ra.cur = ra.cur[n:]
	return n, nil
}

// stop ends the filler and waits for it, so the source can be closed safely.
func (ra *readahead) stop() {
	close(ra.done)
	_ = ra.unblock.Close() // the owner closes it again; only the wake-up matters here
	<-ra.exited
}
