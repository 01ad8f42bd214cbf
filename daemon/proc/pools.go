package proc

import (
	"github.com/seed5ad92d46/sous/daemon/wire"
)

// frameBuf is one read's worth of output. Buffers go round from readPipe to
// the stream log and back (streamlog.Options.Recycle): a fresh 32 KiB buffer
// per read cost a third of the daemon's time in clearing memory, faulting in
// pages and collecting garbage.
type frameBuf = [wire.MaxFrameData]byte

func (r *Registry) getBuf() []byte {
	if b, ok := r.bufs.Get().(*frameBuf); ok {
		return b[:]
	}
	return new(frameBuf)[:]
}

// putBuf takes back a frame's data; only whole buffers that came from getBuf
// (the small reads readPipe copies out are smaller) are kept.
func (r *Registry) putBuf(b []byte) {
	if cap(b) == wire.MaxFrameData {
		r.bufs.Put((*frameBuf)(b[:wire.MaxFrameData]))
	}
}

// StdinBufSize is the most data one process.stdin request can carry: the
// decoding of a request line's worth (wire.MaxLine) of base64.
const StdinBufSize = wire.MaxLine / 4 * 3

// stdinBuf is a pooled buffer for process.stdin data (StdinBuffer).
type stdinBuf = [StdinBufSize]byte

// pooledStdin is the smallest request data StdinBuffer takes from the pool:
// below it, a buffer of its own costs little, where pinning a pooled one
// would keep StdinBufSize queued for each small write.
const pooledStdin = 64 << 10

// StdinBuffer returns n bytes to decode process.stdin data into, for
// WriteStdin, which takes the buffer over: large ones come from a pool the
// stdin writer refills as it writes them to the child.
func (r *Registry) StdinBuffer(n int) []byte {
	if n < pooledStdin || n > StdinBufSize {
		return make([]byte, n)
	}
	if b, ok := r.stdinBufs.Get().(*stdinBuf); ok {
		return b[:n]
	}
	return new(stdinBuf)[:n]
}

// putStdinBuf takes back a buffer from StdinBuffer once it is written.
func (r *Registry) putStdinBuf(b []byte) {
	if cap(b) == StdinBufSize {
		r.stdinBufs.Put((*stdinBuf)(b[:StdinBufSize]))
	}
}
