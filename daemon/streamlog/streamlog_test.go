package streamlog

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"math"
	"os"
	"path/filepath"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/seed5ad92d46/sous/daemon/wire"
)

// payload is the deterministic data of frame seq.
func payload(seq int64, n int) []byte {
	b := make([]byte, n)
	for i := range b {
		b[i] = byte(seq*7 + int64(i))
	}
	return b
}

func appendN(t *testing.T, l *Log, n, size int) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	for i := 0; i < n; i++ {
		seq := l.Stats().LastSeq + 1
		got, err := l.Append(ctx, wire.Frame{Stream: wire.Stdout, Data: payload(seq, size)})
		if err != nil {
			t.Fatalf("append %d: %v", seq, err)
		}
		if got != seq {
			t.Fatalf("append got seq %d, want %d", got, seq)
		}
	}
}

func appendExit(t *testing.T, l *Log, code int) {
	t.Helper()
	if _, err := l.Append(context.Background(), wire.Frame{Stream: wire.Exit, ExitCode: code}); err != nil {
		t.Fatal(err)
	}
}

// readAll reads a cursor to the exit frame, checking seqs and payloads.
func readAll(t *testing.T, c *Cursor, maxBytes int) []wire.Frame {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	var all []wire.Frame
	for {
		n0 := len(all)
		var err error
		all, err = c.Next(ctx, all, maxBytes)
		if len(all) == n0 && err == nil {
			t.Fatal("Next returned nothing")
		}
		for i := n0; i < len(all); i++ { // valid until the next call only
			all[i].Data = bytes.Clone(all[i].Data)
		}
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			t.Fatalf("Next: %v", err)
		}
	}
	for i, f := range all {
		if i > 0 && f.Seq != all[i-1].Seq+1 {
			t.Fatalf("seq %d after %d", f.Seq, all[i-1].Seq)
		}
		if f.Stream == wire.Stdout && !bytes.Equal(f.Data, payload(f.Seq, len(f.Data))) {
			t.Fatalf("frame %d data differs", f.Seq)
		}
	}
	if len(all) == 0 || all[len(all)-1].Stream != wire.Exit {
		t.Fatal("no exit frame")
	}
	return all
}

func TestSeqsAndStats(t *testing.T) {
	l := New(Options{})
	defer l.Close()
	if st := l.Stats(); st != (Stats{}) {
		t.Fatalf("empty stats %+v", st)
	}
	appendN(t, l, 3, 10)
	appendExit(t, l, 7)
	st := l.Stats()
	if st.FirstSeq != 1 || st.LastSeq != 4 || !st.Ended || st.MemBytes != 3*(10+64)+64 || st.Disk != 0 {
		t.Fatalf("stats %+v", st)
	}
	c := l.NewCursor(0)
	fs := readAll(t, c, 1<<20)
	if len(fs) != 4 || fs[3].ExitCode != 7 || fs[0].Seq != 1 {
		t.Fatalf("frames %+v", fs)
	}
	// fromSeq is exclusive; beyond the end there is nothing but EOF.
	fs = readAll(t, l.NewCursor(2), 1<<20)
	if len(fs) != 2 || fs[0].Seq != 3 {
		t.Fatalf("from 2: %+v", fs)
	}
	_, err := l.NewCursor(4).Next(context.Background(), nil, 1)
	if !errors.Is(err, io.EOF) {
		t.Fatalf("after the end: %v", err)
	}
}

func TestMemoryLimitTruncates(t *testing.T) {
	l := New(Options{MemLimit: 10 * (100 + 64)})
	defer l.Close()
	appendN(t, l, 25, 100)
	st := l.Stats()
	if st.FirstSeq != 16 || st.LastSeq != 25 || st.MemBytes > 10*(164) {
		t.Fatalf("stats %+v", st)
	}
	appendExit(t, l, 0)
	// A cursor from before the truncation starts at the oldest retained frame.
	fs := readAll(t, l.NewCursor(0), 1<<20)
	if fs[0].Seq != 17 || len(fs) != 10 {
		t.Fatalf("replay from %d, %d frames", fs[0].Seq, len(fs))
	}
}

// The accounting uses the capacity a frame keeps alive, not just its length.
func TestMemoryAccountsCapacity(t *testing.T) {
	l := New(Options{MemLimit: 1 << 20})
	defer l.Close()
	for i := 0; i < 100; i++ {
		data := make([]byte, 10, 32<<10)
		if _, err := l.Append(context.Background(), wire.Frame{Stream: wire.Stdout, Data: data}); err != nil {
			t.Fatal(err)
		}
	}
	if st := l.Stats(); st.MemBytes > 1<<20 || st.FirstSeq == 1 {
		t.Fatalf("stats %+v", st)
	}
}

func TestLiveCursorBlocksAppend(t *testing.T) {
	l := New(Options{MemLimit: 4 * (1000 + 64)})
	defer l.Close()
	c := l.NewCursor(0)
	appendN(t, l, 4, 1000)

	// The fifth frame needs the first dropped, which c has not read.
	ctx, cancel := context.WithTimeout(context.Background(), 50*time.Millisecond)
	defer cancel()
	if _, err := l.Append(ctx, wire.Frame{Stream: wire.Stdout, Data: payload(5, 1000)}); !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("append did not block: %v", err)
	}

	done := make(chan error)
	go func() {
		_, err := l.Append(context.Background(), wire.Frame{Stream: wire.Stdout, Data: payload(5, 1000)})
		done <- err
	}()
	select {
	case err := <-done:
		t.Fatalf("append returned %v while blocked", err)
	case <-time.After(20 * time.Millisecond):
	}
	fs, err := c.Next(context.Background(), nil, 1000) // reads seq 1 only
	if err != nil || len(fs) != 1 || fs[0].Seq != 1 {
		t.Fatalf("Next %v %v", fs, err)
	}
	c.Release() // done writing seq 1 out: now it may go
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	if st := l.Stats(); st.FirstSeq != 2 || st.LastSeq != 5 {
		t.Fatalf("stats %+v", st)
	}

	// Closing the cursor releases the log too.
	go func() {
		_, err := l.Append(context.Background(), wire.Frame{Stream: wire.Stdout, Data: payload(6, 3000)})
		done <- err
	}()
	time.Sleep(20 * time.Millisecond)
	c.Close()
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	if _, err := c.Next(context.Background(), nil, 1); !errors.Is(err, ErrClosed) {
		t.Fatalf("Next on a closed cursor: %v", err)
	}
}

// A slow reader concurrent with a fast writer sees every frame in order.
func TestConcurrentReaders(t *testing.T) {
	l := New(Options{MemLimit: 16 << 10})
	defer l.Close()
	const n = 2000
	var wg sync.WaitGroup
	for r := 0; r < 3; r++ {
		c := l.NewCursor(0)
		wg.Add(1)
		go func() {
			defer wg.Done()
			fs := readAll(t, c, 4<<10)
			if len(fs) != n+1 || fs[0].Seq != 1 {
				t.Errorf("reader got %d frames from %d", len(fs), fs[0].Seq)
			}
		}()
	}
	appendN(t, l, n, 300)
	appendExit(t, l, 0)
	wg.Wait()
}

func TestNextWaitsAndCancels(t *testing.T) {
	l := New(Options{})
	defer l.Close()
	c := l.NewCursor(0)
	got := nextInBackground(c)
	appendN(t, l, 1, 5)
	if fs := <-got; len(fs) != 1 || fs[0].Seq != 1 {
		t.Fatalf("got %+v", fs)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Millisecond)
	defer cancel()
	if _, err := c.Next(ctx, nil, 1); !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("Next: %v", err)
	}
}

func TestBatchBounds(t *testing.T) {
	l := New(Options{MemLimit: 64 << 20})
	defer l.Close()
	appendN(t, l, 10000, 1)
	c := l.NewCursor(0)
	fs, err := c.Next(context.Background(), nil, 64<<10)
	if err != nil {
		t.Fatal(err)
	}
	// Tiny frames count their overhead: about 64 KiB of them, not 64Ki frames.
	if len(fs) < 500 || len(fs) > 1100 {
		t.Fatalf("batch of %d tiny frames", len(fs))
	}
	// A frame bigger than the batch still comes, alone.
	appendN(t, l, 1, 100<<10)
	c2 := l.NewCursor(10000)
	fs, err = c2.Next(context.Background(), nil, 1)
	if err != nil || len(fs) != 1 || len(fs[0].Data) != 100<<10 {
		t.Fatalf("%d frames, %v", len(fs), err)
	}
}

func TestSpillExactReplay(t *testing.T) {
	dir := t.TempDir()
	l := New(Options{MemLimit: 64 << 10, SpillDir: dir, SegmentSize: 1 << 20})
	defer l.Close()
	// 4000 frames of 1000 bytes: ~4 MiB over several segments, with sparse
	// index entries inside each.
	appendN(t, l, 4000, 1000)
	appendExit(t, l, 3)
	st := l.Stats()
	if st.FirstSeq != 1 || st.MemBytes > 64<<10 || st.Disk < 3<<20 {
		t.Fatalf("stats %+v", st)
	}
	l.mu.Lock()
	nsegs := len(l.segs)
	l.mu.Unlock()
	if nsegs < 3 {
		t.Fatalf("%d segments", nsegs)
	}
	for _, from := range []int64{0, 1, 299, 1500, 3000, 3998} {
		fs := readAll(t, l.NewCursor(from), 50<<10)
		if fs[0].Seq != from+1 || len(fs) != int(4001-from) || fs[len(fs)-1].ExitCode != 3 {
			t.Fatalf("from %d: first %d, %d frames", from, fs[0].Seq, len(fs))
		}
	}
	// Segments are unlinked at once: nothing is left on disk by name.
	if ents, _ := os.ReadDir(dir); len(ents) != 0 {
		t.Fatalf("spill dir holds %d files", len(ents))
	}
}

func TestSpillDiskLimitDropsSegments(t *testing.T) {
	l := New(Options{MemLimit: 16 << 10, SpillDir: t.TempDir(), SegmentSize: 64 << 10, DiskLimit: 256 << 10})
	defer l.Close()
	appendN(t, l, 2000, 1000) // ~2 MiB through a 256 KiB disk
	appendExit(t, l, 0)
	st := l.Stats()
	if st.FirstSeq <= 1 || st.Disk > 256<<10+64<<10 || st.MemBytes > 16<<10 {
		t.Fatalf("stats %+v", st)
	}
	// What remains is one contiguous run up to the exit.
	fs := readAll(t, l.NewCursor(0), 1<<20)
	if fs[0].Seq != st.FirstSeq || fs[len(fs)-1].Seq != 2001 {
		t.Fatalf("replay %d..%d, stats %+v", fs[0].Seq, fs[len(fs)-1].Seq, st)
	}
}

// A live cursor still reading the oldest segment holds it: the writer waits.
func TestSpillDiskLimitBlocksOnCursor(t *testing.T) {
	l := New(Options{MemLimit: 16 << 10, SpillDir: t.TempDir(), SegmentSize: 64 << 10, DiskLimit: 128 << 10})
	defer l.Close()
	c := l.NewCursor(0)
	done := make(chan struct{})
	go func() {
		defer close(done)
		appendN(t, l, 1000, 1000)
		appendExit(t, l, 0)
	}()
	time.Sleep(50 * time.Millisecond)
	if st := l.Stats(); st.LastSeq >= 1000 || st.FirstSeq != 1 {
		t.Fatalf("writer not held back: %+v", st)
	}
	fs := readAll(t, c, 8<<10)
	<-done
	if fs[0].Seq != 1 || len(fs) != 1001 {
		t.Fatalf("reader got %d frames from %d", len(fs), fs[0].Seq)
	}
}

// Without a usable spill dir the log degrades to truncation, never to a gap.
func TestSpillFailureDegrades(t *testing.T) {
	t.Run("from the start", func(t *testing.T) {
		l := New(Options{MemLimit: 8 << 10, SpillDir: filepath.Join(t.TempDir(), "missing")})
		defer l.Close()
		appendN(t, l, 100, 1000)
		appendExit(t, l, 0)
		st := l.Stats()
		fs := readAll(t, l.NewCursor(0), 1<<20)
		if st.FirstSeq <= 1 || fs[0].Seq != st.FirstSeq || st.Disk != 0 {
			t.Fatalf("stats %+v, replay from %d", st, fs[0].Seq)
		}
	})
	t.Run("after segments", func(t *testing.T) {
		dir := filepath.Join(t.TempDir(), "spill")
		os.Mkdir(dir, 0o700)
		l := New(Options{MemLimit: 8 << 10, SpillDir: dir, SegmentSize: 16 << 10})
		defer l.Close()
		appendN(t, l, 50, 1000)
		if l.Stats().Disk == 0 {
			t.Fatal("nothing spilled")
		}
		os.Remove(dir) // the next segment cannot be created
		appendN(t, l, 100, 1000)
		appendExit(t, l, 0)
		st := l.Stats()
		fs := readAll(t, l.NewCursor(0), 1<<20)
		if fs[0].Seq != st.FirstSeq || st.FirstSeq <= 50 || st.Disk != 0 {
			t.Fatalf("stats %+v, replay from %d", st, fs[0].Seq)
		}
	})
}

func TestClose(t *testing.T) {
	l := New(Options{MemLimit: 4 << 10, SpillDir: t.TempDir(), SegmentSize: 8 << 10})
	appendN(t, l, 50, 1000)
	waiting := l.NewCursor(50)
	errs := make(chan error, 2)
	go func() {
		_, err := waiting.Next(context.Background(), nil, 1)
		errs <- err
	}()
	// A writer blocked on a live cursor in no-spill mode is released too.
	l2 := New(Options{MemLimit: 1100})
	c2 := l2.NewCursor(0)
	appendN(t, l2, 1, 1000)
	go func() {
		_, err := l2.Append(context.Background(), wire.Frame{Stream: wire.Stdout, Data: make([]byte, 1000)})
		errs <- err
	}()
	time.Sleep(20 * time.Millisecond)
	l.Close()
	l2.Close()
	l.Close() // idempotent
	for i := 0; i < 2; i++ {
		if err := <-errs; !errors.Is(err, ErrClosed) {
			t.Fatalf("blocked call returned %v", err)
		}
	}
	if _, err := l.Append(context.Background(), wire.Frame{Stream: wire.Stdout}); !errors.Is(err, ErrClosed) {
		t.Fatalf("append after close: %v", err)
	}
	if _, err := l.NewCursor(0).Next(context.Background(), nil, 1); !errors.Is(err, ErrClosed) {
		t.Fatalf("Next after close: %v", err)
	}
	if st := l.Stats(); st.Disk != 0 || st.MemBytes != 0 {
		t.Fatalf("stats after close %+v", st)
	}
	c2.Close()
}

// Reading a segment that Close removes ends with ErrClosed, not an I/O error.
func TestCloseDuringDiskRead(t *testing.T) {
	for i := 0; i < 20; i++ {
		l := New(Options{MemLimit: 4 << 10, SpillDir: t.TempDir(), SegmentSize: 1 << 20})
		appendN(t, l, 500, 1000)
		c := l.NewCursor(0)
		errc := make(chan error)
		go func() {
			for {
				_, err := c.Next(context.Background(), nil, 2000)
				if err != nil {
					errc <- err
					return
				}
			}
		}()
		time.Sleep(time.Duration(i) * 50 * time.Microsecond)
		l.Close()
		if err := <-errc; !errors.Is(err, ErrClosed) {
			t.Fatalf("reader ended with %v", err)
		}
	}
}

func Example() {
	l := New(Options{})
	defer l.Close()
	ctx := context.Background()
	l.Append(ctx, wire.Frame{Stream: wire.Stdout, Data: []byte("hi\n")})
	l.Append(ctx, wire.Frame{Stream: wire.Exit})
	fs, _ := l.NewCursor(0).Next(ctx, nil, 1<<20)
	for _, f := range fs {
		fmt.Printf("%d %v %q\n", f.Seq, f.Stream, f.Data)
	}
	// Output:
	// 1 stdout "hi\n"
	// 2 exit ""
}

// DropSpill frees the spilled frames no live cursor needs, reports the
// truncation through FirstSeq, and keeps OnDisk's running total exact.
func TestDropSpill(t *testing.T) {
	var total int64
	l := New(Options{MemLimit: 16 << 10, SpillDir: t.TempDir(), SegmentSize: 64 << 10,
		OnDisk: func(d int64) { total += d }}) // called under the log's lock
	appendN(t, l, 300, 1000)
	appendExit(t, l, 0)
	st := l.Stats()
	if st.Disk == 0 || total != st.Disk {
		t.Fatalf("disk %d, OnDisk total %d", st.Disk, total)
	}

	// A live cursor in the second segment keeps it and what follows.
	c := l.NewCursor(100)
	l.mu.Lock()
	firstKept := l.segs[0].first
	for _, s := range l.segs {
		if s.first <= 101 && 101 <= s.last {
			firstKept = s.first
		}
	}
	l.mu.Unlock()
	freed := l.DropSpill(math.MaxInt64)
	if st2 := l.Stats(); freed <= 0 || st2.Disk != st.Disk-freed || st2.FirstSeq != firstKept || total != st2.Disk {
		t.Fatalf("freed %d: stats %+v (first kept %d), OnDisk total %d", freed, st2, firstKept, total)
	}
	if fs := readAll(t, c, 64<<10); fs[0].Seq != 101 {
		t.Fatalf("the live cursor lost frames: starts at %d", fs[0].Seq)
	}
	c.Close()

	// Nobody reading: everything spilled goes; replay starts in memory.
	l.DropSpill(math.MaxInt64)
	st3 := l.Stats()
	l.mu.Lock()
	memFirst := l.mem[0].Seq
	l.mu.Unlock()
	if st3.Disk != 0 || st3.FirstSeq != memFirst || total != 0 {
		t.Fatalf("stats %+v, memory from %d, OnDisk total %d", st3, memFirst, total)
	}
	if fs := readAll(t, l.NewCursor(0), 64<<10); fs[0].Seq != memFirst {
		t.Fatalf("replay from 0 starts at %d, want %d", fs[0].Seq, memFirst)
	}
	l.Close()
	if total != 0 {
		t.Fatalf("OnDisk total %d after Close", total)
	}
}

// nextInBackground calls c.Next on another goroutine, gives it a moment to
// start waiting, and returns what it will get.
func nextInBackground(c *Cursor) <-chan []wire.Frame {
	got := make(chan []wire.Frame, 1)
	go func() {
		fs, _ := c.Next(context.Background(), nil, 1<<20)
		got <- fs
	}()
	time.Sleep(10 * time.Millisecond)
	return got
}

// A watched cursor is read by whichever goroutine changed the log, one at a
// time (Watch's own rule, checked here): with several appenders and a memory
// limit that makes them wait for the reader, every frame still arrives
// once, in order, and nothing stalls (a wake-up lost between a deliverer's
// last Poll and its leaving would leave the appenders waiting for room
// forever).
func TestWatchOneDelivererNoChangeUnseen(t *testing.T) {
	l := New(Options{MemLimit: 8 * (100 + 64)})
	defer l.Close()
	c := l.NewCursor(0)
	var (
		running  atomic.Int32 // goroutines in deliver: never more than one
		got      []int64
		ended    = make(chan error, 1)
		finished bool
	)
	deliver := func() {
		if running.Add(1) != 1 {
			t.Error("the Watch function ran on two goroutines at once")
		}
		defer running.Add(-1)
		for {
			fs, err := c.Poll(nil, 1000)
			for _, f := range fs {
				got = append(got, f.Seq)
			}
			if errors.Is(err, ErrNothingNew) {
				return
			}
			if err != nil {
				if !finished {
					finished = true
					ended <- err
				}
				return
			}
		}
	}
	c.Watch(deliver)
	c.Kick()

	const writers, each = 4, 500
	var wg sync.WaitGroup
	for w := 0; w < writers; w++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := 0; i < each; i++ {
				if _, err := l.Append(context.Background(), wire.Frame{Stream: wire.Stdout, Data: make([]byte, 100)}); err != nil {
					t.Error(err)
					return
				}
			}
		}()
	}
	waitOrFail(t, &wg, "appenders stalled: a wake-up was lost")
	appendExit(t, l, 0)
	select {
	case err := <-ended:
		if !errors.Is(err, io.EOF) {
			t.Fatalf("delivery ended with %v, want io.EOF", err)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("the exit frame was never delivered")
	}
	if len(got) != writers*each+1 {
		t.Fatalf("delivered %d frames, want %d", len(got), writers*each+1)
	}
	for i, seq := range got {
		if seq != int64(i+1) {
			t.Fatalf("frame %d has seq %d", i, seq)
		}
	}
}

// Closing a watched cursor calls the watcher, whose Poll then says so.
func TestWatchSeesClose(t *testing.T) {
	l := New(Options{})
	defer l.Close()
	c := l.NewCursor(0)
	calls := make(chan error, 4)
	c.Watch(func() { _, err := c.Poll(nil, 1); calls <- err })
	if _, err := c.Poll(nil, 1); !errors.Is(err, ErrNothingNew) {
		t.Fatalf("Poll of an empty log: %v", err)
	}
	appendN(t, l, 1, 5)
	if err := <-calls; err != nil {
		t.Fatalf("after an append, Poll said %v", err)
	}
	c.Close()
	if err := <-calls; !errors.Is(err, ErrClosed) {
		t.Fatalf("after Close, Poll said %v", err)
	}
	appendN(t, l, 1, 5) // a closed cursor is no longer watched
	select {
	case err := <-calls:
		t.Fatalf("watcher called after Close: %v", err)
	case <-time.After(20 * time.Millisecond):
	}
}

func waitOrFail(t *testing.T, wg *sync.WaitGroup, why string) {
	t.Helper()
	done := make(chan struct{})
	go func() { wg.Wait(); close(done) }()
	select {
	case <-done:
	case <-time.After(10 * time.Second):
		t.Fatal(why)
	}
}

// Watch and Close may race (a follow setting up its delivery while an
// unfollow ends it): in either order the cursor ends up unwatched, and the
// race detector finds no unlocked access.
func TestWatchRacingClose(t *testing.T) {
	for range 500 {
		l := New(Options{})
		c := l.NewCursor(0)
		var wg sync.WaitGroup
		wg.Add(2)
		go func() { defer wg.Done(); c.Close() }()
		go func() { defer wg.Done(); c.Watch(func() {}) }()
		wg.Wait()
		// Either order leaves nothing watched: a closed cursor is not.
		l.mu.Lock()
		n := len(l.watched)
		l.mu.Unlock()
		if n != 0 {
			t.Fatalf("%d cursors watched after Close", n)
		}
		l.Close()
	}
}

// A tiny DiskLimit does not make a segment file per frame: that made
// spilling ten times slower. Segments stay 1 MiB, and the disk holds at most
// one more than the limit, dropped whole, reported by FirstSeq.
func TestTinyDiskLimitKeepsSegmentsWhole(t *testing.T) {
	l := New(Options{MemLimit: 64 << 10, SpillDir: t.TempDir(), DiskLimit: 1})
	defer l.Close()
	if got := l.opt.SegmentSize; got != minCappedSegment {
		t.Fatalf("segment size %d, want %d", got, minCappedSegment)
	}
	appendN(t, l, 256, 32<<10) // 8 MiB
	st := l.Stats()
	if st.Disk > 2*minCappedSegment+64<<10 {
		t.Fatalf("disk holds %d bytes", st.Disk)
	}
	if st.FirstSeq < 256-64 {
		t.Fatalf("first seq %d: the dropped output is not reported", st.FirstSeq)
	}
	c := l.NewCursor(0)
	appendExit(t, l, 0)
	fs := readAll(t, c, 1<<20)
	if fs[0].Seq != st.FirstSeq || fs[len(fs)-1].Stream != wire.Exit {
		t.Fatalf("replay runs from %d to %v, want from %d to the exit", fs[0].Seq, fs[len(fs)-1].Stream, st.FirstSeq)
	}
	// An explicit small size stays as asked.
	if got := New(Options{SpillDir: t.TempDir(), SegmentSize: 64 << 10, DiskLimit: 1}).opt.SegmentSize; got != 64<<10 {
		t.Fatalf("explicit segment size became %d", got)
	}
}

// AppendAll of more frames than the memory holds, with the only reader a
// Watch function: the appender must call it before it waits for room, or
// it waits for a reader that only it would run.
func TestAppendAllCallsWatchBeforeWaiting(t *testing.T) {
	l := New(Options{MemLimit: 8 * (100 + 64)})
	defer l.Close()
	c := l.NewCursor(0)
	var got int
	c.Watch(func() {
		for {
			fs, err := c.Poll(nil, 1000)
			got += len(fs)
			if err != nil {
				return
			}
		}
	})
	frames := make([]wire.Frame, 20)
	for i := range frames {
		frames[i] = wire.Frame{Stream: wire.Stdout, Data: make([]byte, 100)}
	}
	done := make(chan error, 1)
	go func() {
		_, err := l.AppendAll(context.Background(), frames)
		done <- err
	}()
	select {
	case err := <-done:
		if err != nil {
			t.Fatal(err)
		}
	case <-time.After(10 * time.Second):
		l.Close()
		t.Fatal("AppendAll waited for room that only its own Watch call would make")
	}
	if got != len(frames) {
		t.Fatalf("delivered %d frames of %d", got, len(frames))
	}
}

// A change while the Watch function runs on another goroutine (past its
// last Poll) is not lost: that goroutine runs it again before it leaves,
// and the changing one does not wait.
func TestWatchRunsAgainForAChangeWhileRunning(t *testing.T) {
	l := New(Options{})
	defer l.Close()
	c := l.NewCursor(0)
	var got int
	first := true
	inFn, release := make(chan struct{}), make(chan struct{})
	c.Watch(func() {
		for {
			fs, err := c.Poll(nil, 1000)
			got += len(fs)
			if err != nil {
				break
			}
		}
		if first { // hold the first run past its last Poll
			first = false
			close(inFn)
			<-release
		}
	})
	kicked := make(chan struct{})
	go func() { c.Kick(); close(kicked) }()
	<-inFn
	appendN(t, l, 1, 10) // its own call finds the first run going and leaves
	close(release)
	<-kicked
	if got != 1 {
		t.Fatalf("delivered %d frames, want the one appended while the function ran", got)
	}
}

// Shed moves a finished log's memory to its spill files (replay stays exact,
// read back from disk) or, without them, drops all but the exit frame, and
// never a frame a live cursor has yet to read.
func TestShed(t *testing.T) {
	t.Run("spills", func(t *testing.T) {
		l := New(Options{SpillDir: t.TempDir()})
		defer l.Close()
		appendN(t, l, 50, 1000)
		appendExit(t, l, 3)
		before := l.Stats()
		if freed := l.Shed(); freed <= 0 || freed != before.MemBytes-l.Stats().MemBytes {
			t.Fatalf("freed %d of %+v, now %+v", freed, before, l.Stats())
		}
		st := l.Stats()
		if st.MemBytes > 64 || st.FirstSeq != 1 || st.Disk < 50*1000 {
			t.Fatalf("after shedding: %+v", st)
		}
		fs := readAll(t, l.NewCursor(0), 1<<20)
		if len(fs) != 51 || fs[50].ExitCode != 3 {
			t.Fatalf("replay after shedding: %d frames", len(fs))
		}
	})
	t.Run("drops", func(t *testing.T) {
		l := New(Options{})
		defer l.Close()
		appendN(t, l, 50, 1000)
		appendExit(t, l, 3)
		l.Shed()
		st := l.Stats()
		if st.FirstSeq != 51 || st.LastSeq != 51 || st.MemBytes != 64 {
			t.Fatalf("after shedding: %+v", st)
		}
		fs := readAll(t, l.NewCursor(0), 1<<20)
		if len(fs) != 1 || fs[0].ExitCode != 3 || fs[0].Seq != 51 {
			t.Fatalf("replay after shedding: %+v", fs)
		}
	})
	t.Run("live cursor", func(t *testing.T) {
		l := New(Options{})
		defer l.Close()
		appendN(t, l, 50, 1000)
		c := l.NewCursor(20) // has read up to 20
		appendExit(t, l, 0)
		l.Shed()
		if st := l.Stats(); st.FirstSeq != 21 {
			t.Fatalf("after shedding with a cursor at 21: %+v", st)
		}
		if fs := readAll(t, c, 1<<20); len(fs) != 31 || fs[0].Seq != 21 {
			t.Fatalf("the cursor read %d frames from %d", len(fs), fs[0].Seq)
		}
	})
}

// RoomWanted tells a reader that pauses on purpose when an appender waits
// for room the reader's unread frames hold (a log that cannot spill): the
// channel closes as the appender starts waiting, and one asked for while it
// waits is closed already.
func TestRoomWanted(t *testing.T) {
	l := New(Options{MemLimit: 8 << 10})
	defer l.Close()
	c := l.NewCursor(0)
	wanted := c.RoomWanted()
	appendN(t, l, 7, 1000) // fits
	select {
	case <-wanted:
		t.Fatal("closed while the appender had room")
	default:
	}
	appended := make(chan error, 1)
	go func() {
		_, err := l.Append(context.Background(), wire.Frame{Stream: wire.Stdout, Data: payload(9, 4000)})
		appended <- err
	}()
	select {
	case <-wanted:
	case <-time.After(10 * time.Second):
		t.Fatal("not closed while the appender waits for room")
	}
	select {
	case <-c.RoomWanted():
	default:
		t.Fatal("asked for while the appender waits, not closed")
	}
	if _, err := c.Next(context.Background(), nil, 1<<20); err != nil { // the room
		t.Fatal(err)
	}
	c.Release()
	if err := <-appended; err != nil {
		t.Fatal(err)
	}
	select {
	case <-c.RoomWanted():
		t.Fatal("closed with nobody waiting")
	default:
	}
}

// Watch says whether something came before it, which its watcher was not
// called for: the follower then kicks, and otherwise starts no goroutine.
func TestWatchSaysWhatItMissed(t *testing.T) {
	l := New(Options{})
	defer l.Close()
	if c := l.NewCursor(0); c.Watch(func() {}) {
		t.Error("Watch of an empty log reported something missed")
	}
	appendN(t, l, 1, 5)
	if c := l.NewCursor(0); !c.Watch(func() {}) {
		t.Error("Watch of a cursor with a frame to read reported nothing missed")
	}
	if c := l.NewCursor(1); c.Watch(func() {}) {
		t.Error("Watch of a cursor past the last frame reported something missed")
	}
	appendExit(t, l, 0)
	if c := l.NewCursor(2); !c.Watch(func() {}) {
		t.Error("Watch of a cursor at the end of an ended log reported nothing missed")
	}
	closed := New(Options{})
	closed.Close()
	if c := closed.NewCursor(0); !c.Watch(func() {}) {
		t.Error("Watch of a closed log reported nothing missed")
	}
}

// Appending nothing changes nothing, so it wakes nobody: a child's pipes
// reaching their end append nothing, and woke each subscriber's pump, or
// ran its watcher, for it to find nothing new.
func TestEmptyAppendWakesNobody(t *testing.T) {
	l := New(Options{})
	defer l.Close()
	c := l.NewCursor(0)
	var calls atomic.Int32
	c.Watch(func() { calls.Add(1) })
	waiting := make(chan error, 1)
	waiter := l.NewCursor(0)
	go func() {
		_, err := waiter.Next(context.Background(), nil, 1)
		waiting <- err
	}()
	time.Sleep(20 * time.Millisecond) // let the waiter wait
	if n, err := l.AppendAll(context.Background(), nil); n != 0 || err != nil {
		t.Fatalf("AppendAll of nothing: %d %v", n, err)
	}
	if n := calls.Load(); n != 0 {
		t.Errorf("an empty append called the watcher %d times", n)
	}
	select {
	case err := <-waiting:
		t.Fatalf("an empty append woke a waiting Next: %v", err)
	case <-time.After(20 * time.Millisecond):
	}
	appendN(t, l, 1, 5)
	if n := calls.Load(); n != 1 {
		t.Errorf("an append called the watcher %d times, want 1", n)
	}
	if err := <-waiting; err != nil {
		t.Fatalf("Next after an append: %v", err)
	}
	closed := New(Options{})
	closed.Close()
	if _, err := closed.AppendAll(context.Background(), nil); !errors.Is(err, ErrClosed) {
		t.Errorf("an empty append to a closed log: %v, want ErrClosed", err)
	}
}
