package streamlog

import (
	"bytes"
	"context"
	"errors"
	"io"
	"sync"
	"testing"
	"time"
	"unsafe"

	"github.com/seed5ad92d46/sous/daemon/wire"
)

// A segment written directly (O_DIRECT) or through the page cache reads
// back exactly, wherever reads fall between writes: a read in the middle of
// a block pads it, and the frames after the padding still follow in order.
func TestSegmentDirectAndBuffered(t *testing.T) {
	for _, direct := range []bool{true, false} {
		name := map[bool]string{true: "direct", false: "buffered"}[direct]
		t.Run(name, func(t *testing.T) {
			s := tempSegment(t)
			if direct && !s.direct {
				t.Skip("the temp dir's filesystem refuses O_DIRECT")
			}
			if !direct {
				if err := s.setDirect(false); err != nil {
					t.Fatal(err)
				}
				s.direct = false
			}
			// Sizes that straddle blocks and the write buffer, with a flush
			// (as a reader's Next does) every few frames.
			sizes := []int{1, 4087, 4095, 0, 32 << 10, 100, 4096 - recordHeader, 3, 70000}
			var seq int64
			for round := range 40 {
				for _, n := range sizes {
					seq++
					fr := wire.Frame{Seq: seq, Stream: wire.Stdout, Data: payload(seq, n+round)}
					if err := s.append(&fr); err != nil {
						t.Fatal(err)
					}
					if seq%5 == 0 {
						if err := s.flush(); err != nil {
							t.Fatal(err)
						}
						if direct && s.flushed%blockSize != 0 {
							t.Fatalf("flushed %d is not block aligned", s.flushed)
						}
						checkSegment(t, s, seq)
					}
				}
			}
			// A stream long enough for the larger writes.
			for range streamAfter / (64 << 10) {
				seq++
				fr := wire.Frame{Seq: seq, Stream: wire.Stdout, Data: payload(seq, 64<<10)}
				if err := s.append(&fr); err != nil {
					t.Fatal(err)
				}
			}
			if cap(s.pending) != streamWriteSize {
				t.Fatalf("a streaming segment writes %d bytes at a time, want %d", cap(s.pending), streamWriteSize)
			}
			seq++
			exit := wire.Frame{Seq: seq, Stream: wire.Exit, ExitCode: 7, StageCodes: []int{0, 7}}
			if err := s.append(&exit); err != nil {
				t.Fatal(err)
			}
			if err := s.seal(); err != nil {
				t.Fatal(err)
			}
			if s.pending != nil {
				t.Fatal("a sealed segment kept its buffer")
			}
			fs := checkSegment(t, s, seq)
			if last := fs[len(fs)-1]; last.Stream != wire.Exit || last.ExitCode != 7 || len(last.StageCodes) != 2 {
				t.Fatalf("exit frame read back as %+v", last)
			}
			// Reading from the middle, through the sparse index.
			from, pos := s.locate(seq / 2)
			mid, err := s.read(nil, from, pos, s.size, seq/2, 1<<30, false, nil)
			if err != nil || len(mid) != int(seq-seq/2+1) || mid[0].Seq != seq/2 {
				t.Fatalf("read from %d: %d frames from %v, err %v", seq/2, len(mid), mid[0].Seq, err)
			}
		})
	}
}

// tempSegment is a segment in a temp dir for frames from seq 1, removed
// when the test ends.
func tempSegment(t *testing.T) *segment {
	t.Helper()
	s, err := newSegment(t.TempDir(), 1, nil, nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(s.remove)
	return s
}

// checkSegment reads s whole and checks it holds frames 1..last.
func checkSegment(t *testing.T, s *segment, last int64) []wire.Frame {
	t.Helper()
	fs, err := s.read(nil, s.first, 0, s.size, s.first, 1<<30, false, nil)
	if err != nil {
		t.Fatal(err)
	}
	if int64(len(fs)) != last {
		t.Fatalf("read %d frames, want %d", len(fs), last)
	}
	for i, f := range fs {
		if f.Seq != int64(i+1) {
			t.Fatalf("frame %d has seq %d", i, f.Seq)
		}
		if f.Stream == wire.Stdout && !bytes.Equal(f.Data, payload(f.Seq, len(f.Data))) {
			t.Fatalf("frame %d data differs", f.Seq)
		}
	}
	return fs
}

// A reader that keeps catching up with a spilling writer (every Next from
// disk flushes, and so pads, the segment being written) still reads every
// frame exactly once and in order.
func TestSpillReaderChasesWriter(t *testing.T) {
	l := New(Options{MemLimit: 16 << 10, SpillDir: t.TempDir(), SegmentSize: 256 << 10})
	defer l.Close()
	const frames = 3000
	// The reader starts behind (a replay), so it reads from disk while the
	// writer is still spilling.
	appendN(t, l, 200, 777)
	c := l.NewCursor(0)
	var wg sync.WaitGroup
	var got []wire.Frame
	var rerr error
	wg.Add(1)
	go func() {
		defer wg.Done()
		ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
		defer cancel()
		for {
			var err error
			n0 := len(got)
			got, err = c.Next(ctx, got, 3000)
			// Frames from memory are only valid until the next call.
			for i := n0; i < len(got); i++ {
				got[i].Data = bytes.Clone(got[i].Data)
			}
			if errors.Is(err, io.EOF) {
				return
			}
			if err != nil {
				rerr = err
				return
			}
		}
	}()
	appendN(t, l, frames-200, 777)
	appendExit(t, l, 0)
	wg.Wait()
	if rerr != nil {
		t.Fatal(rerr)
	}
	if len(got) != frames+1 {
		t.Fatalf("read %d frames, want %d", len(got), frames+1)
	}
	for i, f := range got {
		if f.Seq != int64(i+1) || (f.Stream == wire.Stdout && !bytes.Equal(f.Data, payload(f.Seq, 777))) {
			t.Fatalf("frame %d: seq %d, data ok %v", i, f.Seq, bytes.Equal(f.Data, payload(f.Seq, 777)))
		}
	}
	if st := l.Stats(); st.FirstSeq != 1 || st.Disk == 0 {
		t.Fatalf("stats %+v", st)
	}
	// Replay from the start is exact too.
	readAll(t, l.NewCursor(0), 64<<10)
}

// A spill file that stops taking writes (here its descriptor is closed
// under it, as a full or failing disk would refuse) degrades the log to
// truncation: appends go on, replay starts later, honestly reported, and
// holds exact frames only; no buffer is handed back to the writer twice.
func TestSpillWriteFailureDegrades(t *testing.T) {
	const frame = 32 << 10
	var mu sync.Mutex
	free := map[*byte]bool{} // buffers the writer may reuse
	var twice int
	l := New(Options{MemLimit: 256 << 10, SpillDir: t.TempDir(), Recycle: func(b []byte) {
		mu.Lock()
		defer mu.Unlock()
		if free[&b[0]] {
			twice++
		}
		free[&b[0]] = true
	}})
	defer l.Close()
	take := func() []byte {
		mu.Lock()
		defer mu.Unlock()
		for p := range free {
			delete(free, p)
			return unsafe.Slice(p, frame)
		}
		return make([]byte, frame)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	for seq := int64(1); seq <= 400; seq++ {
		if seq == 150 {
			l.mu.Lock()
			l.segs[len(l.segs)-1].f.Close()
			l.mu.Unlock()
		}
		data := take()
		copy(data, payload(seq, frame))
		if _, err := l.Append(ctx, wire.Frame{Stream: wire.Stdout, Data: data}); err != nil {
			t.Fatalf("append %d: %v", seq, err)
		}
	}
	appendExit(t, l, 0)
	if twice != 0 {
		t.Fatalf("%d buffers handed back twice", twice)
	}
	st := l.Stats()
	if st.FirstSeq <= 150 || st.LastSeq != 401 {
		t.Fatalf("stats after the failure: %+v", st)
	}
	fs := readAll(t, l.NewCursor(0), 1<<20)
	if fs[0].Seq != st.FirstSeq {
		t.Fatalf("replay starts at %d, FirstSeq says %d", fs[0].Seq, st.FirstSeq)
	}
}

// Logs sharing WriteSlots take the larger write buffers of a stream up to
// their number; the rest write writeSize at a time, and a slot comes back
// once its log's stream ends.
func TestWriteSlotsBoundLargeBuffers(t *testing.T) {
	slots := NewWriteSlots(1)
	logs := make([]*Log, 2)
	for i := range logs {
		logs[i] = New(Options{MemLimit: 256 << 10, SpillDir: t.TempDir(), WriteSlots: slots})
		defer logs[i].Close()
	}
	stream := func(l *Log) {
		appendN(t, l, int(streamAfter/(64<<10))+40, 64<<10)
	}
	pendingCap := func(l *Log) int {
		l.mu.Lock()
		defer l.mu.Unlock()
		return cap(l.segs[len(l.segs)-1].pending)
	}
	stream(logs[0])
	stream(logs[1])
	if got, other := pendingCap(logs[0]), pendingCap(logs[1]); got != streamWriteSize || other != writeSize {
		t.Fatalf("write buffers of %d and %d bytes, want %d and %d", got, other, streamWriteSize, writeSize)
	}
	appendExit(t, logs[0], 0) // seals its segment: the slot comes back
	stream(logs[1])
	if got := pendingCap(logs[1]); got != streamWriteSize {
		t.Fatalf("the second stream writes %d bytes at a time after the first ended, want %d", got, streamWriteSize)
	}
	appendExit(t, logs[1], 0)
	if n := slots.used.Load(); n != 0 {
		t.Fatalf("%d slots still taken after both streams ended", n)
	}
	readAll(t, logs[1].NewCursor(0), 1<<20)
}

// A log that stops spilling lets its write buffers and its large-buffer
// slot go after Options.IdleRelease, without padding the spill file (a
// quiet process that writes a line now and then must not spend a block on
// each), and takes them again when frames come: replay stays exact.
func TestIdleReleasesWriteBuffers(t *testing.T) {
	slots := NewWriteSlots(1)
	// A memory window of one frame: each append spills the frame before.
	// The idle spell is long enough that appends in a row never reach it,
	// even under the race detector on a loaded machine (20 ms did, in CI).
	l := New(Options{MemLimit: 1, SpillDir: t.TempDir(), WriteSlots: slots, IdleRelease: 250 * time.Millisecond})
	defer l.Close()
	held := func() (pending, spare, tail int) {
		l.mu.Lock()
		defer l.mu.Unlock()
		s := l.segs[len(l.segs)-1]
		return cap(s.pending), cap(s.spare), len(s.tail)
	}
	released := func() {
		t.Helper()
		deadline := time.Now().Add(5 * time.Second)
		for slots.used.Load() != 0 || func() bool { p, s, _ := held(); return p+s > 0 }() {
			if time.Now().After(deadline) {
				p, s, _ := held()
				t.Fatalf("write buffers of %d and %d bytes and %d slots held a while after the last spill", p, s, slots.used.Load())
			}
			time.Sleep(5 * time.Millisecond)
		}
	}
	appendN(t, l, int(streamAfter/(64<<10))+40, 64<<10)
	appendN(t, l, 1, 1000)
	appendN(t, l, 1, 1000) // spills the first: the spill's end is off a block boundary
	if p, _, _ := held(); p != streamWriteSize || slots.used.Load() != 1 {
		t.Fatalf("a stream writes %d bytes at a time with %d slots taken, want %d and 1", p, slots.used.Load(), streamWriteSize)
	}
	disk := l.Stats().Disk
	released()
	if _, _, tail := held(); tail == 0 || tail >= blockSize {
		t.Fatalf("kept %d bytes short of a block, want the spill's last partial block", tail)
	}
	if got := l.Stats().Disk; got != disk {
		t.Fatalf("letting the buffers go took the disk from %d to %d bytes: padded", disk, got)
	}
	// A quiet process writing a line at a time, each spilled (by the next)
	// after an idle spell: they go on the file one after another, unpadded.
	spilled := 1000
	for range 3 {
		before := l.Stats().Disk
		appendN(t, l, 1, 100)
		released()
		if grew := l.Stats().Disk - before; grew != int64(recordHeader+spilled) {
			t.Fatalf("spilling a %d-byte frame after an idle spell took %d bytes of disk", spilled, grew)
		}
		spilled = 100
	}
	appendN(t, l, int(streamAfter/(64<<10))+40, 64<<10) // streams again
	appendExit(t, l, 0)
	if n := slots.used.Load(); n != 0 {
		t.Fatalf("%d slots still taken after the stream ended", n)
	}
	fs := readAll(t, l.NewCursor(0), 1<<20)
	if fs[0].Seq != 1 {
		t.Fatalf("replay starts at %d, want 1", fs[0].Seq)
	}
}

// Frames read back into an arena each have a slice of their own: appending
// to one does not reach the next, and those past the arena's room get
// buffers of their own.
func TestSegmentReadArena(t *testing.T) {
	s := tempSegment(t)
	for seq := int64(1); seq <= 3; seq++ {
		if err := s.append(&wire.Frame{Seq: seq, Stream: wire.Stdout, Data: payload(seq, 100)}); err != nil {
			t.Fatal(err)
		}
	}
	if err := s.flush(); err != nil {
		t.Fatal(err)
	}
	arena := make([]byte, 0, 250) // room for two
	fs, err := s.read(nil, 1, 0, s.size, 1, 1<<20, false, &arena)
	if err != nil || len(fs) != 3 {
		t.Fatalf("read %d frames, %v", len(fs), err)
	}
	_ = append(fs[0].Data, 'x')
	for _, f := range fs {
		if !bytes.Equal(f.Data, payload(f.Seq, 100)) {
			t.Fatalf("frame %d data differs", f.Seq)
		}
	}
	if len(arena) != 200 {
		t.Fatalf("the arena holds %d bytes, want the two frames that fit", len(arena))
	}
}
