package fileops

import (
	"archive/tar"
	"errors"
	"fmt"
	"io"
	"math"
	"os"
	"sync"
	"sync/atomic"
	"syscall"
)

const (
	// defaultWorkers goroutines create directories and small files.
	// Unpacking a source tree is bound by the kernel's inode allocation, not
	// by decompression, and that work runs in parallel: on two busy shared
	// vCPUs with ext4, four workers unpacked a 2000-file tree 10-35% faster
	// than one (BenchmarkExtractTar, fresh vs fresh/sequential).
	defaultWorkers = 4
	// smallFileMax is the largest body read into memory and handed to a
	// worker; larger files are streamed by the unpacking goroutine itself.
	smallFileMax = 64 << 10
	// queueLen bounds each worker's queue, so that at most about
	// workers*(queueLen+1)*smallFileMax bytes (2.3 MiB) of bodies wait.
	queueLen = 8
)

// unpackInto unpacks the tar stream src into t, then reads src to its end
// so that the gzip checksum is verified (archive/tar stops at the
// end-of-archive blocks, before the gzip trailer). workers is as in
// extractOptions.
func unpackInto(src io.Reader, t *destTree, workers int) (int, error) {
	if workers == 0 {
		workers = defaultWorkers
	}
	u := &unpacker{t: t, failed: newEarliest()}
	n := u.runWith(tar.NewReader(src), workers)
	if err := u.failed.get(); err != nil {
		return 0, err
	}
	if _, err := io.Copy(io.Discard, src); err != nil {
		return 0, readError(err)
	}
	return n, nil
}

type unpacker struct {
	t      *destTree
	buf    []byte      // copy buffer for streamed files, made on first use
	pool   *writerPool // nil: everything is written inline
	failed *earliest
}

func (u *unpacker) runWith(tr *tar.Reader, workers int) int {
	if workers > 1 {
		u.pool = newWriterPool(workers, u.failed)
		defer u.pool.close() // every queued entry lands before the result is decided
	}
	return u.run(tr)
}

// run walks the archive and returns the number of regular files, which is
// meaningful only if nothing failed. Every check that refuses an entry runs
// here, in archive order.
func (u *unpacker) run(tr *tar.Reader) int {
	count := 0
	for index := 0; !u.failed.any(); index++ {
		hdr, err := tr.Next()
		if err == io.EOF {
			return count
		}
		// With GODEBUG=tarinsecurepath=0 archive/tar flags names such as
		// "../x" but still returns the header; our own check below decides.
		if err != nil && !(hdr != nil && errors.Is(err, tar.ErrInsecurePath)) {
			u.failed.set(index, readError(err))
			break
		}
		if hdr.Typeflag == tar.TypeXGlobalHeader {
			continue // archive-wide metadata, not a file; its name is no path
		}
		rel, ok := entryPath(u.t.path, hdr.Name)
		if !ok {
			u.failed.set(index, fmt.Errorf("unsafe path in archive: %s", quoteName(hdr.Name)))
			break
		}
		switch {
		case hdr.Typeflag == tar.TypeDir:
			if rel != "" {
				u.dir(index, rel, u.t.dirModeOf(hdr.Mode))
			} else if u.t.archive { // "./" is destDir itself, which exists
				u.root(index, u.t.dirModeOf(hdr.Mode))
			}
		case hdr.Typeflag == tar.TypeReg && !isPAXSparse(hdr):
			// archive/tar has already turned the legacy '\x00' type into '0'.
			if rel == "" {
				u.failed.set(index, fmt.Errorf("unsafe path in archive: %s", quoteName(hdr.Name)))
			} else {
				u.file(index, rel, u.t.fileModeOf(hdr.Mode), tr, hdr.Size)
				count++
			}
		default:
			flag := hdr.Typeflag
			if isPAXSparse(hdr) {
				flag = tar.TypeGNUSparse
			}
			u.failed.set(index, fmt.Errorf("unsupported tar entry type %s: %s", typeChar(flag), quoteName(hdr.Name)))
		}
	}
	return 0
}

func (u *unpacker) dir(index int, rel string, mode uint32) {
	if u.pool != nil {
		u.pool.submit(job{index: index, t: u.t, rel: rel, mode: mode, dir: true})
		return
	}
	if err := u.t.mkdir(rel, mode); err != nil {
		u.failed.set(index, err)
	}
}

// root applies a "./" entry's mode to destDir, once every entry before it
// has landed (a worker may be creating one of its parents).
func (u *unpacker) root(index int, mode uint32) {
	if u.pool != nil {
		u.pool.wait()
		if !u.failed.allows(index) {
			return
		}
	}
	if err := u.t.chmodRoot(mode); err != nil {
		u.failed.set(index, err)
	}
}

func (u *unpacker) file(index int, rel string, mode uint32, r io.Reader, size int64) {
	if u.pool != nil && size <= smallFileMax {
		data := make([]byte, size)
		if _, err := io.ReadFull(r, data); err != nil {
			u.failed.set(index, readError(err))
			return
		}
		u.pool.submit(job{index: index, t: u.t, rel: rel, mode: mode, data: data})
		return
	}
	if u.pool != nil {
		// Streamed here, so whatever is queued lands first: an earlier
		// entry of the same path must not overwrite this one.
		u.pool.wait()
		if !u.failed.allows(index) {
			return
		}
	}
	if err := u.writeFile(rel, mode, r, size); err != nil {
		u.failed.set(index, err)
	}
}

// writeFile streams size bytes of r into a new file at rel.
func (u *unpacker) writeFile(rel string, mode uint32, r io.Reader, size int64) error {
	fd, err := u.t.create(rel, mode)
	if err != nil {
		return err
	}
	if u.buf == nil && size > 0 {
		u.buf = make([]byte, copyBufSize)
	}
	for size > 0 {
		chunk := u.buf
		if int64(len(chunk)) > size {
			chunk = chunk[:size]
		}
		if _, err := io.ReadFull(r, chunk); err != nil {
			syscall.Close(fd)
			return readError(err)
		}
		if err := writeAll(fd, chunk); err != nil {
			syscall.Close(fd)
			return &os.PathError{Op: "write", Path: u.t.full(rel), Err: err}
		}
		size -= int64(len(chunk))
	}
	if err := syscall.Close(fd); err != nil {
		return &os.PathError{Op: "close", Path: u.t.full(rel), Err: err}
	}
	return nil
}

// job is one directory or small file for a worker.
type job struct {
	index int // position in the archive
	t     *destTree
	rel   string
	mode  uint32
	dir   bool
	data  []byte
}

func (j job) run() error {
	if j.dir {
		return j.t.mkdir(j.rel, j.mode)
	}
	fd, err := j.t.create(j.rel, j.mode)
	if err != nil {
		return err
	}
	if err := writeAll(fd, j.data); err != nil {
		syscall.Close(fd)
		return &os.PathError{Op: "write", Path: j.t.full(j.rel), Err: err}
	}
	if err := syscall.Close(fd); err != nil {
		return &os.PathError{Op: "close", Path: j.t.full(j.rel), Err: err}
	}
	return nil
}

// writerPool runs jobs on a fixed set of goroutines, each with its own queue.
type writerPool struct {
	queues  []chan job
	pending sync.WaitGroup // jobs submitted and not yet done
	exited  sync.WaitGroup // workers
	failed  *earliest
}

func newWriterPool(workers int, failed *earliest) *writerPool {
	p := &writerPool{queues: make([]chan job, workers), failed: failed}
	for i := range p.queues {
		q := make(chan job, queueLen)
		p.queues[i] = q
		p.exited.Add(1)
		go p.work(q)
	}
	return p
}

func (p *writerPool) work(q <-chan job) {
	defer p.exited.Done()
	for j := range q {
		// Entries after a failed one are skipped; entries before it still
		// run, because a failure among them is the one to report.
		if p.failed.allows(j.index) {
			if err := j.run(); err != nil {
				p.failed.set(j.index, err)
			}
		}
		p.pending.Done()
	}
}

// submit queues j on the worker that owns its path, so that entries of one
// path (a repeated file, a file and a directory of the same name) keep their
// archive order and fail the way a one-at-a-time extraction would.
func (p *writerPool) submit(j job) {
	p.pending.Add(1)
	p.queues[pathHash(j.rel)%uint32(len(p.queues))] <- j
}

// wait returns once every submitted job is done.
func (p *writerPool) wait() { p.pending.Wait() }

// close stops the workers after they finish their queues.
func (p *writerPool) close() {
	for _, q := range p.queues {
		close(q)
	}
	p.exited.Wait()
}

// pathHash is 32-bit FNV-1a.
func pathHash(s string) uint32 {
	h := uint32(2166136261)
	for i := 0; i < len(s); i++ {
		h ^= uint32(s[i])
		h *= 16777619
	}
	return h
}

// earliest keeps the failure of the earliest entry, so that the result names
// the entry a one-at-a-time extraction would have stopped at even when
// workers finish out of order.
type earliest struct {
	index atomic.Int64 // of the failed entry; math.MaxInt64 while none has
	mu    sync.Mutex
	err   error
}

func newEarliest() *earliest {
	e := &earliest{}
	e.index.Store(math.MaxInt64)
	return e
}

func (e *earliest) set(index int, err error) {
	e.mu.Lock()
	defer e.mu.Unlock()
	if int64(index) < e.index.Load() {
		e.index.Store(int64(index))
		e.err = err
	}
}

// allows reports whether entry index comes before every failure so far.
func (e *earliest) allows(index int) bool { return int64(index) < e.index.Load() }

func (e *earliest) any() bool { return e.index.Load() != math.MaxInt64 }

func (e *earliest) get() error {
	e.mu.Lock()
	defer e.mu.Unlock()
	return e.err
}

func writeAll(fd int, b []byte) error {
	for len(b) > 0 {
		n, err := syscall.Write(fd, b)
		if err == syscall.EINTR {
			continue
		}
		if err != nil {
			return err
		}
		if n == 0 {
			return io.ErrShortWrite
		}
		b = b[n:]
	}
	return nil
}
