package streamlog

import (
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"os"
	"sort"
	"sync/atomic"
	"unsafe"

	"golang.org/x/sys/unix"

	"github.com/seed5ad92d46/sous/daemon/wire"
)

// A segment is an append-only spill file of consecutive frames.
//
// Record layout: stream (1 byte), exit code (4 bytes, big endian), data
// length (4 bytes), data. Seqs are implicit: a segment's frames are
// consecutive from first. The extension members ride in space the frame
// does not otherwise use:
//   - an output frame's Stage in the exit code's place, and its Mirrored as
//     the stream byte's second-highest bit;
//   - an exit frame's StageCodes as its data (4 bytes each), TimedOut as the
//     stream byte's high bit, and its Signal, when set, as 4 more bytes of
//     data marked by the second-highest bit.
//
// A record whose stream byte is padStream is no frame: its data only fills
// the file up to a block boundary.
//
// The file is written with O_DIRECT where the filesystem allows it. Spilling
// is the one place the daemon writes every byte of a child's output to a
// file, and through the page cache that cost more than everything else on
// the stream path together: each byte copied into a freshly allocated cache
// page (3 s of system time per GiB on this project's VMs, against under 0.5
// s direct), and gigabytes of the user's page cache evicted for data that is
// usually never read back. Direct writes need block-aligned memory, offsets
// and lengths, so records gather in an aligned buffer that is written out a
// whole number of blocks at a time, and a block on the file is never
// rewritten: a reader reading it through the page cache (a second file
// descriptor, without O_DIRECT) can then never see a stale copy. When
// records must become readable before a block is full, the block is padded.
//
// Writes run on goroutines of their own, one at a time per segment, while
// the appender goes on into a second buffer (so a spilling log holds two
// write buffers): a direct write waits for the disk, and a socket daemon
// spilling 1 GiB spent half its time in that wait when the appender (the
// reader of the child's pipe) made it, holding the child back. Side by side
// (8 alternated runs of `sous exec` streaming 1 GiB through a socket
// daemon, with Cursor.SkipMirroredData in both), the stream took 1.1-2.1 s
// against 1.5-2.3 s, faster in each run.
type segment struct {
	f       *os.File // the writer's; O_DIRECT when direct
	r       *os.File // the readers': buffered
	direct  bool
	first   int64
	last    int64 // first-1 while empty
	size    int64 // bytes appended, including pending and padding
	flushed int64 // bytes on the file (a multiple of blockSize when direct)
	pending []byte
	// tail holds, while the write buffers are let go (release), the
	// pending bytes short of a whole block; the next put takes them back.
	tail  []byte
	index []indexEntry // sparse seq -> offset, one entry per indexEvery bytes

	// runs are the segment's runs of consecutive Mirrored frames of one
	// stream, up to maxRuns of them: a reader that skips their data reads
	// them from here, without reading the file (mirroredRun).
	runs []mirroredRun

	slots   *WriteSlots // where big comes from; nil: no bound
	big     bool        // the segment holds a slot: its buffers are streamWriteSize
	writing *segWrite   // the write under way, if any
	queued  int64       // the offset after it: flushed plus its size
	spare   []byte      // the write buffer the last finished write gave back
	failed  error       // the first write that failed; the segment is given up
}

// segWrite is a write under way (writePending).
type segWrite struct {
	done chan struct{} // closed once written or failed
	buf  []byte
	off  int64
	err  error
}

type indexEntry struct {
	seq int64
	off int64
}

const (
	timedOutBit  = 0x80 // of an exit frame
	signalBit    = 0x40 // of an exit frame: its data ends with the signal
	mirroredBit  = 0x40 // of an output frame
	padStream    = 0x7f
	recordHeader = 9
	indexEvery   = 256 << 10
	// blockSize aligns direct writes: the largest logical block size of
	// common disks, and the page size.
	blockSize = 4096
	// writeSize is how much a segment gathers before writing: direct
	// writes are synchronous, so they should be large. A segment that has
	// written streamAfter gathers streamWriteSize instead, and only a
	// sustained stream holds the larger buffers: each write blocks a
	// thread, which the Go runtime then replaces, and the disk takes up to
	// 4 MiB per request here. Side by side (10 alternated runs of a socket
	// daemon spilling a 1 GiB stream), the daemon spent 820 ms of CPU
	// (medians) against 985 in 1 MiB writes, and the stream took 1.17 s
	// against 1.25. Writes of 8 MiB instead of 4 (2026-11-27, three sets of
	// 16 alternated pairs against 4 MiB): 0.94x, 0.93x and 0.94x the time,
	// faster in 12-13 pairs of 16, the daemon's CPU per GiB 695-800 against
	// 720-870 ms (medians); 16 MiB gained nothing more (1.02x 8 MiB's),
	// though `dd oflag=direct` writes 1 GiB as fast in 4 MiB as in 8 MiB
	// blocks: the gain is the daemon's, per write.
	writeSize       = 1 << 20
	streamWriteSize = 8 << 20
	streamAfter     = 8 << 20
	// maxRuns bounds a segment's runs (32 bytes each): output that switches
	// streams at every frame makes a run per frame, and past this many,
	// the rest of the segment is read from the file.
	maxRuns = 2048
)

// newSegment creates a segment for frames from first on, writing over a
// file from spares when there is one and in a new file in dir otherwise;
// its larger write buffers come from slots (nil: unbounded).
func newSegment(dir string, first int64, slots *WriteSlots, spares *Spares) (*segment, error) {
	// A spare is written over from offset 0, in whole blocks as always; a
	// read never goes past what this segment wrote (its size), so the
	// records of the file's last segment beyond it are never read.
	f, r, ok := spares.take()
	if !ok {
		var err error
		if f, r, err = newSegmentFile(dir, first); err != nil {
			return nil, err
		}
	}
	s := &segment{f: f, r: r, first: first, last: first - 1, slots: slots}
	// tmpfs before Linux 6.6, for one, refuses O_DIRECT; a spare's writer
	// may have turned it off after a refused write.
	s.direct = s.setDirect(true) == nil
	return s, nil
}

// newSegmentFile creates a spill file in dir and returns its writer's and
// readers' descriptors.
func newSegmentFile(dir string, first int64) (w, r *os.File, err error) {
	w, err = os.CreateTemp(dir, fmt.Sprintf("seg-%d-*", first))
	if err != nil {
		return nil, nil, fmt.Errorf("spill: %w", err)
	}
	r, err = os.Open(w.Name())
	// The name is not needed once open: unlinking now means a crashed daemon
	// leaves nothing behind on disk.
	if rerr := os.Remove(w.Name()); err == nil {
		err = rerr
	}
	if err != nil {
		w.Close()
		if r != nil {
			r.Close()
		}
		return nil, nil, fmt.Errorf("spill: %w", err)
	}
	return w, r, nil
}

// setDirect turns O_DIRECT on or off for the writer's descriptor.
func (s *segment) setDirect(on bool) error {
	rc, err := s.f.SyscallConn()
	if err != nil {
		return err
	}
	var ferr error
	err = rc.Control(func(fd uintptr) {
		var flags int
		if flags, ferr = unix.FcntlInt(fd, unix.F_GETFL, 0); ferr != nil {
			return
		}
		if on {
			flags |= unix.O_DIRECT
		} else {
			flags &^= unix.O_DIRECT
		}
		_, ferr = unix.FcntlInt(fd, unix.F_SETFL, flags)
	})
	if err == nil {
		err = ferr
	}
	return err
}

// writeBuffer returns an empty write buffer of capacity n whose memory
// starts at a page boundary, as O_DIRECT requires of the memory written
// from. It is mapped outside the Go heap, where the garbage collector would
// count it twice over: the heap may grow to twice what is live before a
// collection, and a streaming log holds 16 MiB of these (the daemon's peak
// RSS while a child wrote 2 GiB went from 42 to 53.5 MiB when they grew
// from 1 to 4 MiB, and back to 47.8 MiB mapped). Should the mapping fail,
// it comes from the heap. The caller gives it back with freeBuffer.
func writeBuffer(n int) []byte {
	if n >= hugePage {
		if b := hugeBuffer(n); b != nil {
			return b
		}
	}
	if b, err := unix.Mmap(-1, 0, n, unix.PROT_READ|unix.PROT_WRITE, unix.MAP_PRIVATE|unix.MAP_ANONYMOUS); err == nil {
		return b[:0]
	}
	b := make([]byte, n+blockSize)
	skip := int(-uintptr(unsafe.Pointer(unsafe.SliceData(b))) & (blockSize - 1))
	return b[skip : skip : skip+n]
}

// hugePage is the size of a transparent huge page on amd64 and arm64 (4 KiB
// base pages).
const hugePage = 2 << 20

// hugeBuffer maps n bytes (a multiple of hugePage) and asks for huge pages
// there, or returns nil. Every spilled byte is copied into a write buffer
// and the kernel pins the buffer's pages for each direct write: in huge
// pages that is 512 times fewer pages to fault in, pin and look up. (Linux
// 6.7 on places anonymous mappings of a multiple of hugePage at a huge page
// boundary; before it, the aligned part of the buffer gets them.)
func hugeBuffer(n int) []byte {
	if n%hugePage != 0 {
		return nil
	}
	b, err := unix.Mmap(-1, 0, n, unix.PROT_READ|unix.PROT_WRITE, unix.MAP_PRIVATE|unix.MAP_ANONYMOUS)
	if err != nil {
		return nil
	}
	_ = unix.Madvise(b, unix.MADV_HUGEPAGE) // a hint: without it, base pages
	return b[:0]
}

// freeBuffer gives back a writeBuffer (nil is none), which nothing may use
// afterwards: no write may be under way from it.
func freeBuffer(b []byte) {
	if cap(b) > 0 {
		_ = unix.Munmap(b[:cap(b)]) // EINVAL for one from the heap: the collector's
	}
}

func (s *segment) append(fr *wire.Frame) error {
	if len(s.index) == 0 || s.size-s.index[len(s.index)-1].off >= indexEvery {
		s.index = append(s.index, indexEntry{seq: fr.Seq, off: s.size})
	}
	var h [recordHeader]byte
	h[0] = byte(fr.Stream)
	data := fr.Data
	if fr.Stream == wire.Exit {
		binary.BigEndian.PutUint32(h[1:5], uint32(int32(fr.ExitCode)))
		data = nil
		for _, c := range fr.StageCodes {
			data = binary.BigEndian.AppendUint32(data, uint32(int32(c)))
		}
		if fr.TimedOut {
			h[0] |= timedOutBit
		}
		if fr.Signal > 0 {
			h[0] |= signalBit
			data = binary.BigEndian.AppendUint32(data, uint32(fr.Signal))
		}
	} else {
		binary.BigEndian.PutUint32(h[1:5], uint32(int32(fr.Stage)))
		if fr.Mirrored {
			h[0] |= mirroredBit
		}
	}
	binary.BigEndian.PutUint32(h[5:9], uint32(len(data)))
	if err := s.put(h[:]); err != nil {
		return err
	}
	if err := s.put(data); err != nil {
		return err
	}
	s.last = fr.Seq
	s.noteMirrored(fr)
	return nil
}

// mirroredRun is a run of consecutive Mirrored output frames of one stream
// and stage.
type mirroredRun struct {
	first, last int64
	stream      wire.Stream
	stage       int
}

// noteMirrored records fr, appended, in the runs when it is Mirrored.
func (s *segment) noteMirrored(fr *wire.Frame) {
	if !fr.Mirrored || fr.Stream == wire.Exit {
		return
	}
	if n := len(s.runs); n > 0 {
		if r := &s.runs[n-1]; r.last == fr.Seq-1 && r.stream == fr.Stream && r.stage == fr.Stage {
			r.last = fr.Seq
			return
		}
	}
	if len(s.runs) < maxRuns {
		s.runs = append(s.runs, mirroredRun{first: fr.Seq, last: fr.Seq, stream: fr.Stream, stage: fr.Stage})
	}
}

// mirroredRun returns the run that holds seq, if one does.
func (s *segment) mirroredRun(seq int64) (mirroredRun, bool) {
	i := sort.Search(len(s.runs), func(i int) bool { return s.runs[i].last >= seq })
	if i < len(s.runs) && s.runs[i].first <= seq {
		return s.runs[i], true
	}
	return mirroredRun{}, false
}

// put adds b to the segment, writing out the pending buffer as it fills.
func (s *segment) put(b []byte) error {
	if s.pending == nil { // sealed or released, and written to again
		s.pending = append(writeBuffer(writeSize), s.tail...)
		s.tail = nil
	}
	for len(b) > 0 {
		if len(s.pending) == cap(s.pending) {
			if err := s.writePending(); err != nil {
				return err
			}
		}
		n := copy(s.pending[len(s.pending):cap(s.pending)], b)
		s.pending = s.pending[:len(s.pending)+n]
		s.size += int64(n)
		b = b[n:]
	}
	return nil
}

// writePending starts writing out the pending bytes, when direct only the
// whole blocks among them (the rest stay pending, moved to the next
// buffer), once the write before has finished.
func (s *segment) writePending() error {
	if err := s.wait(); err != nil {
		return err
	}
	n := len(s.pending)
	if s.direct {
		n -= n % blockSize
	}
	if n == 0 {
		return nil
	}
	w := &segWrite{done: make(chan struct{}), buf: s.pending[:n], off: s.queued}
	s.writing, s.queued = w, s.queued+int64(n)
	go func(f *os.File) {
		defer close(w.done)
		_, w.err = f.WriteAt(w.buf, w.off)
	}(s.f)
	if !s.big && s.queued >= streamAfter && s.slots.take() {
		s.big = true
	}
	size := writeSize
	if s.big {
		size = streamWriteSize
	}
	next := s.spare
	if cap(next) < size {
		freeBuffer(next)
		next = writeBuffer(size)
	}
	s.spare = nil
	s.pending = next[:copy(next[:cap(next)], s.pending[n:])]
	return nil
}

// wait waits for the write under way, if any, and reports the segment's
// failure. A direct write the filesystem refused (it took the flag but not
// the write) is written again through the page cache, as everything after
// it will be.
func (s *segment) wait() error {
	w := s.writing
	if w == nil {
		return s.failed
	}
	<-w.done
	s.writing = nil
	err := w.err
	if err != nil && s.direct && errors.Is(err, unix.EINVAL) && s.setDirect(false) == nil {
		s.direct = false
		_, err = s.f.WriteAt(w.buf, w.off)
	}
	if err != nil {
		freeBuffer(w.buf)
		if s.failed == nil {
			s.failed = fmt.Errorf("spill: %w", err)
		}
		return s.failed
	}
	s.flushed += int64(len(w.buf))
	s.spare = w.buf[:0]
	return nil
}

// flush makes every frame appended so far readable from the file. When
// direct, a partial last block is first padded to the block's end (to the
// next one's, when a pad record's header does not fit), since it will not be
// written again.
func (s *segment) flush() error {
	if s.direct {
		if part := int(s.size % blockSize); part != 0 {
			pad := blockSize - part
			if pad < recordHeader {
				pad += blockSize
			}
			var h [recordHeader]byte
			h[0] = padStream
			binary.BigEndian.PutUint32(h[5:9], uint32(pad-recordHeader))
			if err := s.put(h[:]); err != nil {
				return err
			}
			if err := s.put(make([]byte, pad-recordHeader)); err != nil {
				return err
			}
		}
	}
	if err := s.writePending(); err != nil {
		return err
	}
	return s.wait()
}

// release lets the write buffers (and a large-buffer slot) go while no
// frames come: what whole blocks the pending bytes hold is written, and the
// rest kept in tail. Unlike seal it pads nothing, so a quiet process that
// now and then writes a line past its memory window does not spend a block
// on each.
func (s *segment) release() error {
	if s.pending == nil && s.spare == nil {
		return s.failed
	}
	err := s.writePending()
	if err == nil {
		err = s.wait()
	}
	if err == nil {
		s.tail = append(s.tail, s.pending...) // empty unless released before, when pending is nil
	}
	s.freeBuffers() // no write is under way: wait, or the failed one, saw to it
	return err
}

// inherit takes the write buffers of prev, which is flushed and written to
// no more: a new segment every SegmentSize bytes allocated them afresh.
func (s *segment) inherit(prev *segment) {
	s.big, prev.big = prev.big, false
	if len(prev.pending) == 0 {
		s.pending, prev.pending = prev.pending, nil
	}
	s.spare, prev.spare = prev.spare, nil
	prev.freeBuffers()
}

// freeBuffers gives back the write buffers; no write may be under way.
func (s *segment) freeBuffers() {
	freeBuffer(s.pending)
	freeBuffer(s.spare)
	s.pending, s.spare = nil, nil
	if s.big {
		s.slots.give()
		s.big = false
	}
}

// WriteSlots bounds how many logs spill through streamWriteSize buffers at
// once (Options.WriteSlots): past it, a stream writes writeSize at a time,
// so that many streams together do not hold 8 MiB each. Safe for
// concurrent use; the nil WriteSlots bounds nothing.
type WriteSlots struct {
	max  int32
	used atomic.Int32
}

// NewWriteSlots returns WriteSlots for n logs at once.
func NewWriteSlots(n int) *WriteSlots { return &WriteSlots{max: int32(n)} }

func (w *WriteSlots) take() bool {
	if w == nil {
		return true
	}
	if w.used.Add(1) > w.max {
		w.used.Add(-1)
		return false
	}
	return true
}

func (w *WriteSlots) give() {
	if w != nil {
		w.used.Add(-1)
	}
}

// seal flushes the segment and, once that succeeded, lets its buffer go:
// no more frames are expected.
func (s *segment) seal() error {
	if err := s.flush(); err != nil {
		return err
	}
	s.freeBuffers()
	return nil
}

// locate returns the nearest indexed seq at or before seq and its offset.
func (s *segment) locate(seq int64) (int64, int64) {
	i := sort.Search(len(s.index), func(i int) bool { return s.index[i].seq > seq }) - 1
	if i < 0 {
		return s.first, 0
	}
	return s.index[i].seq, s.index[i].off
}

// read scans records from (seq, off), skips those before want, and appends
// frames up to about maxBytes of data, stopping at end. With skipMirrored,
// output frames marked Mirrored come without their data. The data goes into
// the room left in *arena, each frame's capped to its own length, and into
// fresh buffers once that is full (or arena is nil).
func (s *segment) read(buf []wire.Frame, seq, off, end, want int64, maxBytes int, skipMirrored bool, arena *[]byte) ([]wire.Frame, error) {
	r := io.NewSectionReader(s.r, off, end-off)
	var h [recordHeader]byte
	size := 0
	for off < end && (size == 0 || size < maxBytes) {
		if _, err := io.ReadFull(r, h[:]); err != nil {
			return buf, fmt.Errorf("spill read: %w", err)
		}
		n := int64(binary.BigEndian.Uint32(h[5:9]))
		stream := wire.Stream(h[0] &^ (timedOutBit | mirroredBit))
		code := int(int32(binary.BigEndian.Uint32(h[1:5]))) // a stage, or an exit code
		mirrored := h[0]&mirroredBit != 0 && stream != wire.Exit
		switch {
		case h[0] == padStream, seq < want, skipMirrored && mirrored:
			if _, err := r.Seek(n, io.SeekCurrent); err != nil {
				return buf, fmt.Errorf("spill read: %w", err)
			}
			if h[0] == padStream {
				off += recordHeader + n
				continue // padding has no seq
			}
			if seq >= want { // a Mirrored frame, without its data
				buf = append(buf, wire.Frame{Seq: seq, Stream: stream, Stage: code, Mirrored: true})
				size += frameOverhead
			}
		default:
			var data []byte
			if arena != nil && int64(cap(*arena)-len(*arena)) >= n {
				a, k := *arena, len(*arena)
				data = a[k : k+int(n) : k+int(n)]
				*arena = a[:k+int(n)]
			} else {
				data = make([]byte, n)
			}
			if _, err := io.ReadFull(r, data); err != nil {
				return buf, fmt.Errorf("spill read: %w", err)
			}
			fr := wire.Frame{Seq: seq, Stream: stream}
			if fr.Stream == wire.Exit {
				fr.ExitCode, fr.TimedOut = code, h[0]&timedOutBit != 0
				if h[0]&signalBit != 0 && len(data) >= 4 {
					fr.Signal = int(binary.BigEndian.Uint32(data[len(data)-4:]))
					data = data[:len(data)-4]
				}
				for i := 0; i+4 <= len(data); i += 4 {
					fr.StageCodes = append(fr.StageCodes, int(int32(binary.BigEndian.Uint32(data[i:]))))
				}
			} else {
				fr.Stage, fr.Data, fr.Mirrored = code, data, mirrored
			}
			buf = append(buf, fr)
			size += int(n) + frameOverhead
		}
		off += recordHeader + n
		seq++
	}
	return buf, nil
}

// remove closes the segment's file, which frees its blocks.
func (s *segment) remove() { s.retire(nil) }

// retire gives the segment's file to spares, for another segment to write
// over, or closes it (nil spares, full ones, or a write that failed). No
// reader may still read the segment: a dropped one has no cursor left in
// it.
func (s *segment) retire(spares *Spares) {
	err := s.wait() // nothing may write to the file, or from the buffers, after
	s.freeBuffers()
	if err != nil {
		spares = nil // a failed file is not written to again
	}
	spares.put(s.f, s.r)
}
