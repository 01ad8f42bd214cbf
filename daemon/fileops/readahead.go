package fileops

import "io"

const (
	// readaheadChunks and readaheadChunkSize bound the decompressed data held
	// ahead of the unpacker: 1 MiB, enough to keep both cores busy.
	readaheadChunks    = 4
	readaheadChunkSize = 256 << 10
)

// readahead decompresses on its own goroutine into a few fixed chunks, so that
// inflating the archive overlaps with creating and writing files. It is the
// one place an extraction uses a second core (`tar xzf` gets the same from its
// gzip child process).
type readahead struct {
	full    chan []byte // filled chunks in stream order; closed after the last
	free    chan []byte // drained chunks for the filler to reuse
	done    chan struct{}
	exited  chan struct{}
	unblock io.Closer

	err error  // the source's error; read only after full is closed
	cur []byte // unread part of the chunk being consumed
	buf []byte // that whole chunk, handed back to free once drained
}

// startReadahead starts reading src. unblock is closed by stop to wake a
// filler blocked in a read that would otherwise never return.
func startReadahead(src io.Reader, unblock io.Closer) *readahead {
	ra := &readahead{
		full:    make(chan []byte, readaheadChunks),
		free:    make(chan []byte, readaheadChunks),
		done:    make(chan struct{}),
		exited:  make(chan struct{}),
		unblock: unblock,
	}
	for range readaheadChunks {
		ra.free <- make([]byte, readaheadChunkSize)
	}
	go ra.fill(src)
	return ra
}

func (ra *readahead) fill(src io.Reader) {
	defer close(ra.exited)
	defer close(ra.full) // after ra.err is set, which the close publishes
	for {
		var b []byte
		select {
		case b = <-ra.free:
		case <-ra.done:
			return
		}
		n, err := fillChunk(src, b)
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

// fillChunk reads into b until it is full or src fails. Unlike io.ReadFull it
// keeps a source's io.ErrUnexpectedEOF apart from a clean short end.
func fillChunk(src io.Reader, b []byte) (int, error) {
	n := 0
	for n < len(b) {
		m, err := src.Read(b[n:])
		n += m
		if err != nil {
			return n, err
		}
	}
	return n, nil
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
