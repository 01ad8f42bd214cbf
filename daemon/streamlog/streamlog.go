// Package streamlog keeps the frames of one process for replay and delivers
// them to readers, with bounded memory.
//
// A Log numbers frames from seq 1. It holds the newest frames in memory up to
// Options.MemLimit bytes. Older frames are either spilled to segment files
// under Options.SpillDir (replay stays exact from seq 1, up to DiskLimit bytes
// on disk) or, without a spill dir, dropped. Whatever is dropped is reported
// honestly: FirstSeq is the oldest seq still retained.
//
// Readers are Cursors. A live cursor is never overtaken: when retained data
// would have to be dropped before a cursor has read it, Append blocks instead,
// which in turn stops the daemon reading the child's pipe, so the child is
// slowed down exactly as a pipe would slow it. Nothing a subscriber is
// following is ever lost; only late replays can be truncated. Nor is a cursor
// that reads from memory pushed onto the disk by spilling: Append waits for it
// as it would without a spill dir, and only a cursor already behind the
// memory window (a replay) reads spilled frames back.
package streamlog

import (
	"context"
	"errors"
	"io"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/seed5ad92d46/sous/daemon/wire"
)

// Options bound a Log.
type Options struct {
	// MemLimit is the number of bytes of frames kept in memory (default 4 MiB).
	MemLimit int
	// SpillDir, when set, receives frames evicted from memory, so replay from
	// seq 1 stays exact. The directory must exist.
	SpillDir string
	// DiskLimit caps the bytes spilled to disk (default 1 GiB); the oldest
	// segments are dropped beyond it. The segment being written is never
	// dropped, so the disk can hold up to a segment more.
	DiskLimit int64
	// SegmentSize is the size at which a new spill segment starts (default
	// 64 MiB, and at most DiskLimit, but not brought below 1 MiB by it).
	SegmentSize int64
	// Recycle, when set, receives the Data of each frame the log lets go of
	// from memory (spilled, dropped, or discarded with the log) once no
	// reader can still be using it, so that the writer can reuse the
	// buffer. A buffer still being delivered is left to the garbage
	// collector instead.
	Recycle func([]byte)
	// WriteSlots, when set, bounds the logs sharing it that spill through
	// the larger write buffers of a sustained stream at once.
	WriteSlots *WriteSlots
	// Spares, when set, takes the files of dropped segments and gives them
	// to new ones to write over (see Spares); without it they are closed.
	// A log closed (Close) closes its files: a reader may be in one.
	Spares *Spares
	// IdleRelease is how long a spilling log goes without spilling before
	// it lets its write buffers go (default 1 s): up to 16 MiB of them for
	// a sustained stream, which a process that once streamed and then
	// went quiet would otherwise hold until it exits.
	IdleRelease time.Duration
	// OnDisk, when set, is told every change of the bytes spilled to disk
	// (positive as segments grow, negative as they are dropped), so that an
	// owner of many logs can bound their total. It is called with the log
	// locked and must not call back into the log.
	OnDisk func(delta int64)
}

// minCappedSegment is the smallest segment size a small DiskLimit brings
// SegmentSize down to.
const minCappedSegment = 1 << 20

func (o Options) withDefaults() Options {
	if o.MemLimit <= 0 {
		o.MemLimit = 4 << 20
	}
	if o.DiskLimit <= 0 {
		o.DiskLimit = 1 << 30
	}
	if o.SegmentSize <= 0 {
		o.SegmentSize = 64 << 20
	}
	if o.IdleRelease <= 0 {
		o.IdleRelease = time.Second
	}
	if o.SegmentSize > o.DiskLimit {
		// A segment file per frame or two (a DiskLimit of a few bytes)
		// made spilling ten times slower: files are created and dropped
		// whole, so below minCappedSegment the disk holds one segment
		// more than the limit instead.
		o.SegmentSize = max(o.DiskLimit, min(o.SegmentSize, minCappedSegment))
	}
	return o
}

// ErrClosed is returned to readers and writers of a closed Log.
var ErrClosed = errors.New("stream log closed")

// Log is the replay log of one process. It is safe for concurrent use.
type Log struct {
	opt Options

	mu       sync.Mutex
	notify   chan struct{} // made when someone waits; closed (and cleared) on the next change
	mem      []wire.Frame  // mem[0].Seq == memFirst when non-empty
	memBytes int
	segs     []*segment // spilled frames, oldest first; all below mem
	disk     int64
	first    int64 // oldest retained seq (last+1 when nothing is retained)
	last     int64
	ended    bool // the exit frame is in
	closed   bool
	cursors  map[*Cursor]struct{}
	// holders are the cursors whose last batch from memory may still be in
	// use by their reader; closed cursors stay until their reader is done.
	holders map[*Cursor]struct{}
	// watched are the cursors with a Watch function, to call after every
	// change. Copied on write, so a snapshot can be walked unlocked.
	watched  []*Cursor
	spillErr error // the first spill failure; spilling stops after it
	// roomWanted (RoomWanted) is closed when an appender starts waiting
	// for room; blocked counts the appenders waiting.
	roomWanted chan struct{}
	blocked    int
	// idle fires every Options.IdleRelease while the last segment may
	// hold write buffers (armIdle); when nothing was spilled or flushed
	// in between (busy), the buffers go (releaseIdle).
	idle      *time.Timer
	idleArmed bool
	busy      bool
}

// New returns an empty Log.
func New(opt Options) *Log {
	return &Log{
		opt:     opt.withDefaults(),
		first:   1,
		cursors: make(map[*Cursor]struct{}),
		holders: make(map[*Cursor]struct{}),
	}
}

// broadcast wakes everyone waiting for a change. Called with mu held. The
// channel exists only while someone waits, so the hot path (a reader keeping
// up with a writer) allocates nothing per frame.
func (l *Log) broadcast() {
	if l.notify != nil {
		close(l.notify)
		l.notify = nil
	}
}

// waitChan is the channel the next change closes. Called with mu held.
func (l *Log) waitChan() chan struct{} {
	if l.notify == nil {
		l.notify = make(chan struct{})
	}
	return l.notify
}

// Append adds a frame, assigning its seq, and returns that seq. It blocks
// while a live cursor still needs data that would have to be dropped to make
// room, or is still writing out the oldest frames (its last batch); ctx ends
// the wait. The frame's Data must not be modified afterwards.
func (l *Log) Append(ctx context.Context, f wire.Frame) (int64, error) {
	one := [1]wire.Frame{f}
	if _, err := l.AppendAll(ctx, one[:]); err != nil {
		return 0, err
	}
	return one[0].Seq, nil
}

// AppendAll appends frames in order, as Append does each, assigning their
// Seq in place, and wakes readers once for the lot rather than once per
// frame, so that a reader catching up takes them as one batch. It returns
// how many were appended: fewer than len(frames) only with an error (the
// rest are not the log's).
func (l *Log) AppendAll(ctx context.Context, frames []wire.Frame) (int, error) {
	l.mu.Lock()
	if len(frames) == 0 {
		// Nothing changes, so nobody is woken: a child's pipes reaching
		// their end appended nothing, and woke its subscribers' pumps
		// once per pipe on every exit, for them to find nothing new.
		closed := l.closed
		l.mu.Unlock()
		if closed {
			return 0, ErrClosed
		}
		return 0, nil
	}
	for i := range frames {
		f := &frames[i]
		for {
			if l.closed {
				l.broadcast()
				l.mu.Unlock()
				return i, ErrClosed
			}
			if l.makeRoom(f.Size()) {
				break
			}
			l.broadcast() // what is in already may be what the reader waits for
			if l.roomWanted != nil {
				close(l.roomWanted)
				l.roomWanted = nil
			}
			l.blocked++
			wait := l.waitChan()
			watched := l.watched
			l.mu.Unlock()
			notify(watched) // a watcher delivers on this goroutine: it may be the one to make room
			select {
			case <-wait:
			case <-ctx.Done():
				l.mu.Lock()
				l.blocked--
				l.mu.Unlock()
				return i, ctx.Err()
			}
			l.mu.Lock()
			l.blocked--
		}
		l.last++
		f.Seq = l.last
		if len(l.mem) == 0 && len(l.segs) == 0 {
			l.first = f.Seq
		}
		l.mem = append(l.mem, *f)
		l.memBytes += f.Size()
		if f.Stream == wire.Exit {
			l.ended = true
			// Nothing more will be spilled: the last segment's buffer can go.
			if n := len(l.segs); n > 0 {
				l.flushSegment(l.segs[n-1], true)
			}
		}
	}
	l.broadcast()
	watched := l.watched
	l.mu.Unlock()
	notify(watched)
	return len(frames), nil
}

// notify calls the Watch functions of a snapshot of l.watched, without the
// log's lock.
func notify(watched []*Cursor) {
	for _, c := range watched {
		c.runWatch(c.watch)
	}
}

// makeRoom evicts old frames until n more bytes fit in memory, then trims
// the disk. It reports false when a live cursor blocks an eviction. Called
// with mu held.
func (l *Log) makeRoom(n int) bool {
	for len(l.mem) > 0 && l.memBytes+n > l.opt.MemLimit {
		if !l.evictOldest(true) {
			return false
		}
	}
	return l.trimDisk()
}

// evictOldest moves the oldest in-memory frame to disk, or drops it when
// there is no spill dir (or spilling failed). With keepLive, it does neither
// while a live cursor is about to read that frame from memory. Called with mu
// held.
func (l *Log) evictOldest(keepLive bool) bool {
	oldest := &l.mem[0]
	if keepLive && l.nextOf(oldest.Seq) {
		// Spilling it would send a reader that keeps up with the memory
		// window to the disk, for good: a direct write, then reading
		// the same bytes back through a page cache the write bypassed,
		// 9-byte header and data a pread each, and every read flushing
		// (padding) the segment being written. A socket daemon streaming
		// 1 GiB to `sous exec ... > /dev/null` spent 70% of its CPU in
		// those preads and took 4x as long as without a spill dir. The
		// child waits instead, as a pipe would make it.
		return false
	}
	if l.inFlight(oldest.Seq) {
		// A live reader is still writing it out: wait for that rather than
		// evict it, so its buffer can be reused. (Evicting it anyway, as
		// the room a slow reader just made, would leave nearly every
		// buffer to the garbage collector.)
		return false
	}
	if l.opt.SpillDir != "" && l.spillErr == nil {
		err := l.spill(oldest)
		if err == nil {
			l.popMem()
			return true
		}
		l.spillErr = err // degrade to truncation rather than failing the child
	}
	if l.minCursor() <= oldest.Seq {
		return false
	}
	// Spilled frames are older than any in memory: dropping this frame
	// drops them too, so what is retained stays one run of seqs.
	l.dropSegments(len(l.segs))
	l.first = oldest.Seq + 1
	l.popMem()
	return true
}

func (l *Log) popMem() {
	l.memBytes -= l.mem[0].Size()
	l.recycle(&l.mem[0])
	l.mem[0] = wire.Frame{}
	l.mem = l.mem[1:]
	if len(l.mem) == 0 {
		l.mem = nil // let the backing array go
	}
}

// trimDisk drops the oldest segments while the disk is over its limit,
// never one a live cursor still needs, and never the one being written.
// Called with mu held.
func (l *Log) trimDisk() bool {
	for len(l.segs) > 1 && l.disk > l.opt.DiskLimit {
		if l.minCursor() <= l.segs[0].last {
			return false
		}
		l.dropSegments(1)
		l.first = l.segs[0].first
	}
	return true
}

// dropSegments removes the n oldest segments, their files going to the
// spares (no cursor reads them: each caller checked minCursor). Called with
// mu held.
func (l *Log) dropSegments(n int) {
	for _, s := range l.segs[:n] {
		l.addDisk(-s.size)
		s.retire(l.opt.Spares)
	}
	clear(l.segs[:n])
	l.segs = l.segs[n:]
}

// recycle hands f's data back to the writer unless a reader may be using it.
// Called with mu held.
func (l *Log) recycle(f *wire.Frame) {
	if l.opt.Recycle == nil || f.Data == nil {
		return
	}
	for c := range l.holders {
		if c.held <= f.Seq && f.Seq < c.next {
			return
		}
	}
	l.opt.Recycle(f.Data)
}

// addDisk accounts for spilled bytes. Called with mu held.
func (l *Log) addDisk(delta int64) {
	if delta == 0 {
		return
	}
	l.disk += delta
	if l.opt.OnDisk != nil {
		l.opt.OnDisk(delta)
	}
}

// DropSpill deletes spilled frames no live cursor still needs, oldest
// segment first, until at least atLeast bytes are freed or none is left to
// drop, and returns the bytes freed. Replay then starts later, reported
// honestly by FirstSeq. It is how a daemon reclaims the disk of processes
// that exited long ago when newer output needs the room: a segment at a
// time, so that what a spilling stream needs goes, and its file is there
// for the stream's next segment (Spares).
func (l *Log) DropSpill(atLeast int64) int64 {
	l.mu.Lock()
	defer l.mu.Unlock()
	need := l.minCursor()
	n := 0
	for freed := int64(0); n < len(l.segs) && l.segs[n].last < need && freed < atLeast; n++ {
		freed += l.segs[n].size
	}
	if n == 0 {
		return 0
	}
	before := l.disk
	l.dropSegments(n)
	switch {
	case len(l.segs) > 0:
		l.first = l.segs[0].first
	case len(l.mem) > 0:
		l.first = l.mem[0].Seq
	default:
		l.first = l.last + 1
	}
	return before - l.disk
}

// Shed lets go of the frames the log holds in memory, oldest first, but the
// newest (a finished process's exit frame, so that a reattach still learns
// how it ended): to the spill files where the log spills, so replay stays
// exact and is read back from disk, else dropped, which FirstSeq reports. A
// frame a live cursor has yet to read is dropped for nobody, and one its
// reader is still writing out stays. It returns the bytes of memory freed. It
// is how a daemon bounds the memory of the processes that exited long ago.
func (l *Log) Shed() int {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.closed {
		return 0
	}
	before := l.memBytes
	for len(l.mem) > 1 && l.evictOldest(false) {
	}
	l.trimDisk()
	if n := len(l.segs); n > 0 && l.ended {
		l.flushSegment(l.segs[n-1], true) // its write buffer goes too
	}
	l.broadcast()
	return before - l.memBytes
}

// minCursor is the lowest seq any live cursor still needs. Called with mu held.
func (l *Log) minCursor() int64 {
	min := int64(1<<63 - 1)
	for c := range l.cursors {
		if c.next < min {
			min = c.next
		}
	}
	return min
}

// nextOf reports whether a live cursor reads seq next. Called with mu held.
func (l *Log) nextOf(seq int64) bool {
	for c := range l.cursors {
		if c.next == seq {
			return true
		}
	}
	return false
}

// inFlight reports whether a live cursor's last batch, which its reader may
// still be writing out, holds seq. Called with mu held.
func (l *Log) inFlight(seq int64) bool {
	for c := range l.holders {
		if _, live := l.cursors[c]; live && c.held <= seq && seq < c.next {
			return true
		}
	}
	return false
}

// spill writes f to the current segment. Called with mu held.
func (l *Log) spill(f *wire.Frame) error {
	var seg *segment
	if n := len(l.segs); n > 0 && l.segs[n-1].size < l.opt.SegmentSize {
		seg = l.segs[n-1]
	} else {
		s, err := newSegment(l.opt.SpillDir, f.Seq, l.opt.WriteSlots, l.opt.Spares)
		if err != nil {
			return err
		}
		if n > 0 {
			prev := l.segs[n-1]
			if err := l.flushSegment(prev, false); err != nil {
				s.remove()
				return err
			}
			s.inherit(prev) // which seals it
		}
		l.segs = append(l.segs, s)
		seg = s
	}
	before := seg.size
	if err := seg.append(f); err != nil {
		return err
	}
	l.addDisk(seg.size - before)
	l.armIdle()
	return nil
}

// armIdle notes that the last segment was written to, and so may hold
// write buffers. It costs a flag on the hot path: the timer, once armed,
// stays armed until a period passes without a call. Called with mu held.
func (l *Log) armIdle() {
	l.busy = true
	if l.idleArmed {
		return
	}
	l.idleArmed = true
	if l.idle == nil {
		l.idle = time.AfterFunc(l.opt.IdleRelease, l.releaseIdle)
	} else {
		l.idle.Reset(l.opt.IdleRelease)
	}
}

// releaseIdle lets the last segment's write buffers go, unless it was
// written to since the timer last fired.
func (l *Log) releaseIdle() {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.closed {
		l.idleArmed = false
		return
	}
	if l.busy {
		l.busy = false
		l.idle.Reset(l.opt.IdleRelease)
		return
	}
	l.idleArmed = false
	if n := len(l.segs); n > 0 {
		if err := l.segs[n-1].release(); err != nil && l.spillErr == nil {
			l.spillErr = err
		}
	}
}

// flushSegment makes everything appended to seg readable from its file,
// accounting for the padding that can take; seal also lets its buffer go.
// Called with mu held.
func (l *Log) flushSegment(seg *segment, seal bool) error {
	before := seg.size
	var err error
	if seal {
		err = seg.seal()
	} else {
		err = seg.flush()
		l.armIdle() // a reader's flush takes buffers again
	}
	l.addDisk(seg.size - before)
	if err != nil && l.spillErr == nil {
		l.spillErr = err
	}
	return err
}

// Closed reports whether the log was discarded (Close).
func (l *Log) Closed() bool {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.closed
}

// Stats describes what a Log retains.
type Stats struct {
	FirstSeq int64 // oldest retained seq; 0 when the log is empty
	LastSeq  int64 // newest seq; 0 when the log is empty
	Ended    bool  // the exit frame has been appended
	MemBytes int
	Disk     int64
}

// Stats reports what the log retains now.
func (l *Log) Stats() Stats {
	l.mu.Lock()
	defer l.mu.Unlock()
	s := Stats{LastSeq: l.last, Ended: l.ended, MemBytes: l.memBytes, Disk: l.disk}
	if l.last > 0 {
		s.FirstSeq = l.first
	}
	return s
}

// Close discards the log: readers and writers get ErrClosed and spilled
// segments are deleted.
func (l *Log) Close() {
	l.mu.Lock()
	if l.closed {
		l.mu.Unlock()
		return
	}
	l.closed = true
	if l.idle != nil {
		l.idle.Stop()
	}
	for _, s := range l.segs {
		s.remove()
	}
	for i := range l.mem {
		l.recycle(&l.mem[i])
	}
	l.segs, l.mem = nil, nil
	l.memBytes = 0
	l.addDisk(-l.disk)
	l.broadcast()
	watched := l.watched
	l.mu.Unlock()
	notify(watched) // their Poll now says ErrClosed
}

// Cursor reads a Log in seq order from a starting point.
type Cursor struct {
	log  *Log
	next int64 // the next seq to deliver
	// held is the first seq of the last batch Next returned from memory
	// (the batch is held..next-1), which its reader may still be using, or
	// 0. Only Next and Release clear it: Close comes from other goroutines
	// while the reader may still be writing the batch out.
	held int64
	// watch, when set (Watch), is called after every change that may give
	// Poll something new, by one goroutine at a time (runWatch).
	watch        func()
	watchMu      sync.Mutex  // held by the goroutine running watch
	watchPending atomic.Bool // a change that goroutine has not looked at yet
	// skipMirrored (SkipMirroredData) leaves the data of Mirrored frames
	// read back from disk unread.
	skipMirrored bool
	// arena holds the data of the frames the last Next read back from disk.
	arena []byte
}

// runWatch runs fn (the cursor's Watch function) unless another goroutine
// is running it already; that one then runs it again before it leaves, so
// no change goes unseen and the changing goroutine never waits for
// another's delivery.
func (c *Cursor) runWatch(fn func()) {
	c.watchPending.Store(true)
	for c.watchPending.Load() && c.watchMu.TryLock() {
		c.watchPending.Store(false)
		fn()
		c.watchMu.Unlock()
	}
}

// NewCursor returns a live cursor that delivers the frames after fromSeq
// (exclusive), starting at the oldest retained frame when older ones are gone.
func (l *Log) NewCursor(fromSeq int64) *Cursor {
	l.mu.Lock()
	defer l.mu.Unlock()
	c := &Cursor{log: l, next: max(fromSeq+1, l.first)}
	if !l.closed {
		l.cursors[c] = struct{}{}
	}
	return c
}

// SkipMirroredData says the reader has no use for the data of frames marked
// Mirrored (the spawner, which got it through its own pipe): read back from
// disk, they come without it, and from the segment's runs (mirroredRun)
// without reading the file at all. A spawner whose cursor fell behind the
// memory window (the CPUs busy with its child and the child's reader) read
// each frame back from disk into a fresh buffer only to send it without
// its data, slower than the child wrote: once behind, it stayed behind.
// In 10 runs of a 1 GiB stream through a socket daemon, the 4 where it
// fell behind took 1.5-2.3 s against 1.2-1.3 s.
func (c *Cursor) SkipMirroredData() {
	c.log.mu.Lock()
	c.skipMirrored = true
	c.log.mu.Unlock()
}

// RoomWanted returns a channel that is closed once an appender waits for
// room that this log's readers hold up (at once if one does already): a
// reader that pauses on purpose, to take more per batch, stops pausing
// then, since the child is held back meanwhile.
func (c *Cursor) RoomWanted() <-chan struct{} {
	l := c.log
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.roomWanted == nil {
		l.roomWanted = make(chan struct{})
	}
	ch := l.roomWanted
	if l.blocked > 0 {
		close(ch)
		l.roomWanted = nil
	}
	return ch
}

// Release tells the log that the reader is done with the frames Next last
// returned, so their buffers can be reused. Next releases them implicitly; a
// reader that stops calling Next calls Release from its own goroutine.
func (c *Cursor) Release() {
	c.log.mu.Lock()
	c.release()
	c.log.mu.Unlock()
}

// release is Release with mu held.
func (c *Cursor) release() {
	if c.held != 0 {
		c.held = 0
		delete(c.log.holders, c)
		c.log.broadcast() // an appender may be waiting to evict the batch
	}
}

// Close stops the cursor; the log no longer waits for it, nor for the batch
// its reader may still be writing out, whose buffers stay the reader's (not
// reused) until it calls Next or Release.
func (c *Cursor) Close() {
	l := c.log
	l.mu.Lock()
	_, live := l.cursors[c]
	if live {
		delete(l.cursors, c)
		l.broadcast()
	}
	watch := c.watch
	if watch != nil {
		if i := slices.Index(l.watched, c); i >= 0 {
			l.watched = slices.Delete(slices.Clone(l.watched), i, i+1)
		}
	}
	l.mu.Unlock()
	if live && watch != nil {
		c.runWatch(watch) // Poll now says ErrClosed: the watcher finishes with it
	}
}

// Watch makes the log call fn after every change that may give Poll
// something new: frames appended (also before an appender waits for room),
// the log closed, the cursor closed. fn runs on the goroutine that made the
// change, without the log's lock, so a reader can deliver right there
// instead of waking a goroutine of its own; an appender is held up while fn
// runs, which is how such a reader pushes back. fn never runs on two
// goroutines at once: a change while it runs makes the goroutine running it
// call it again before leaving, so fn should Poll until ErrNothingNew. It
// may run after Close. Call Watch once, before the first change fn should
// see: changes before Watch are not reported. It returns missed when Poll
// already has something to say (frames, the end, the close): the caller
// then Kicks. Without it, every change to come calls fn, and a Kick
// would only find nothing new (a goroutine started for nothing on each
// spawn, when the follower kicked on one of its own every time).
func (c *Cursor) Watch(fn func()) (missed bool) {
	l := c.log
	l.mu.Lock()
	defer l.mu.Unlock()
	c.watch = fn
	_, live := l.cursors[c]
	if live {
		l.watched = append(slices.Clone(l.watched), c)
	}
	return !live || l.closed || l.ended || c.next <= l.last
}

// Kick runs the Watch function as a change does, under the same
// one-at-a-time rule: for what came before Watch.
func (c *Cursor) Kick() {
	c.log.mu.Lock()
	fn := c.watch
	c.log.mu.Unlock()
	if fn != nil {
		c.runWatch(fn)
	}
}

// frameOverhead is what a frame costs a batch beyond its data (its line's
// JSON around the base64), so a batch of tiny frames stays small too.
const frameOverhead = 64

// Next appends to buf the next frames, about maxBytes at most (always at
// least one frame), and advances the cursor past them. It waits for new
// frames while the log is open and the exit frame not yet read; after the exit
// frame it returns io.EOF. The frames' Data stays valid only until the next
// call of Next or Release: frames from memory share the log's buffers, which
// may be reused after that, and frames read back from disk share the
// cursor's (a fresh buffer per frame made a replay from disk 1.5x slower:
// 1212 against 1906 MB/s in BenchmarkReplay, medians of 3 alternated runs).
func (c *Cursor) Next(ctx context.Context, buf []wire.Frame, maxBytes int) ([]wire.Frame, error) {
	return c.read(ctx, buf, maxBytes, true)
}

// ErrNothingNew is what Poll returns when no frame is ready.
var ErrNothingNew = errors.New("stream log: no new frames")

// Poll is Next without the wait: with nothing ready it returns ErrNothingNew.
// Like Next, it first lets go of the batch it returned before.
func (c *Cursor) Poll(buf []wire.Frame, maxBytes int) ([]wire.Frame, error) {
	return c.read(context.Background(), buf, maxBytes, false)
}

func (c *Cursor) read(ctx context.Context, buf []wire.Frame, maxBytes int, wait bool) ([]wire.Frame, error) {
	l := c.log
	l.mu.Lock()
	c.release()
	for {
		if l.closed {
			l.mu.Unlock()
			return buf, ErrClosed
		}
		if _, live := l.cursors[c]; !live {
			l.mu.Unlock()
			return buf, ErrClosed
		}
		if c.next < l.first {
			c.next = l.first // only possible for a cursor created after a truncation
		}
		if c.next <= l.last {
			break
		}
		if l.ended {
			l.mu.Unlock()
			return buf, io.EOF
		}
		if !wait {
			l.mu.Unlock()
			return buf, ErrNothingNew
		}
		changed := l.waitChan()
		l.mu.Unlock()
		select {
		case <-changed:
		case <-ctx.Done():
			return buf, ctx.Err()
		}
		l.mu.Lock()
	}

	// From memory.
	if len(l.mem) > 0 && c.next >= l.mem[0].Seq {
		i := int(c.next - l.mem[0].Seq)
		size := 0
		for ; i < len(l.mem) && (size == 0 || size < maxBytes); i++ {
			buf = append(buf, l.mem[i])
			size += frameOverhead
			if !c.skipMirrored || !l.mem[i].Mirrored {
				size += len(l.mem[i].Data)
			}
		}
		c.held = c.next
		l.holders[c] = struct{}{}
		c.next = buf[len(buf)-1].Seq + 1
		l.broadcast() // an appender may be waiting for this cursor
		l.mu.Unlock()
		return buf, nil
	}

	// From disk. The segment cannot be dropped while this cursor needs it,
	// so it is read without holding the lock.
	var seg *segment
	for _, s := range l.segs {
		if c.next >= s.first && c.next <= s.last {
			seg = s
			break
		}
	}
	if seg == nil {
		l.mu.Unlock()
		return buf, errors.New("stream log: retained frame missing") // a bug, not a state
	}
	if c.skipMirrored {
		if run, ok := seg.mirroredRun(c.next); ok {
			// Known without reading the file: all it would give is seqs.
			last := min(run.last, c.next+int64(max(maxBytes/frameOverhead, 1))-1)
			for seq := c.next; seq <= last; seq++ {
				buf = append(buf, wire.Frame{Seq: seq, Stream: run.stream, Stage: run.stage, Mirrored: true})
			}
			c.next = last + 1
			l.broadcast()
			l.mu.Unlock()
			return buf, nil
		}
	}
	if err := l.flushSegment(seg, false); err != nil {
		l.mu.Unlock()
		return buf, err
	}
	from, pos := seg.locate(c.next)
	end := seg.size
	l.mu.Unlock()

	n0 := len(buf)
	if cap(c.arena) < maxBytes+wire.MaxFrameData {
		c.arena = make([]byte, 0, maxBytes+wire.MaxFrameData)
	}
	c.arena = c.arena[:0]
	buf, err := seg.read(buf, from, pos, end, c.next, maxBytes, c.skipMirrored, &c.arena)
	if err != nil {
		l.mu.Lock()
		defer l.mu.Unlock()
		if l.closed {
			return buf[:n0], ErrClosed // the segment was removed under the read
		}
		return buf[:n0], err
	}
	l.mu.Lock()
	if len(buf) > n0 {
		c.next = buf[len(buf)-1].Seq + 1
	}
	l.broadcast()
	l.mu.Unlock()
	return buf, nil
}

// Pos is the seq the cursor delivers next.
func (c *Cursor) Pos() int64 {
	c.log.mu.Lock()
	defer c.log.mu.Unlock()
	return c.next
}
