package streamlog

import (
	"bytes"
	"context"
	"sync"
	"testing"
	"time"

	"github.com/seed5ad92d46/sous/daemon/wire"
)

// recycler records what the log hands back, and poisons it so that a reader
// still using a recycled buffer would see the damage.
type recycler struct {
	mu   sync.Mutex
	got  map[byte]bool // first payload byte of each recycled buffer
	pool [][]byte
}

func (r *recycler) recycle(b []byte) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.got == nil {
		r.got = make(map[byte]bool)
	}
	r.got[b[0]] = true
	for i := range b {
		b[i] = 0xEE
	}
	r.pool = append(r.pool, b[:cap(b)])
}

func (r *recycler) has(first byte) bool {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.got[first]
}

// A batch Next returned is neither evicted nor recycled while its reader
// may still be writing it out: the writer waits, as for any live reader,
// and the buffers come back once Next or Release says the reader is done.
func TestRecycleWaitsForReader(t *testing.T) {
	var rc recycler
	l := New(Options{MemLimit: 2 * (100 + 64), Recycle: rc.recycle})
	defer l.Close()
	c := l.NewCursor(0)
	frame := func(b byte) wire.Frame { return wire.Frame{Stream: wire.Stdout, Data: bytes.Repeat([]byte{b}, 100)} }
	ctx := context.Background()
	if _, err := l.AppendAll(ctx, []wire.Frame{frame(1), frame(2)}); err != nil {
		t.Fatal(err)
	}
	batch, err := c.Next(ctx, nil, 1<<20)
	if err != nil || len(batch) != 2 {
		t.Fatalf("Next: %d frames, %v", len(batch), err)
	}
	// Room for frames 3 and 4 means evicting 1 and 2, still being written.
	done := make(chan error)
	go func() { _, err := l.AppendAll(ctx, []wire.Frame{frame(3), frame(4)}); done <- err }()
	select {
	case err := <-done:
		t.Fatalf("append evicted a batch in flight (err %v)", err)
	case <-time.After(30 * time.Millisecond):
	}
	if rc.has(1) || rc.has(2) || batch[0].Data[0] != 1 || batch[1].Data[99] != 2 {
		t.Fatal("a batch still held by its reader was recycled")
	}
	c.Release()
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	if !rc.has(1) || !rc.has(2) {
		t.Fatal("released frames were not recycled on eviction")
	}

	// A closed cursor no longer holds the writer back, but its batch is
	// not reused until its reader says so.
	batch, err = c.Next(ctx, batch[:0], 100) // frame 3
	if err != nil || len(batch) != 1 || batch[0].Data[0] != 3 {
		t.Fatalf("Next: %v, %v", batch, err)
	}
	c.Close()
	if _, err := l.AppendAll(ctx, []wire.Frame{frame(5), frame(6)}); err != nil {
		t.Fatal(err)
	}
	if rc.has(3) || !rc.has(4) || batch[0].Data[0] != 3 {
		t.Fatalf("after Close: recycled 3=%v 4=%v, want false true", rc.has(3), rc.has(4))
	}
	c.Release()
	l.Close() // recycles what memory still holds
	if !rc.has(5) || !rc.has(6) {
		t.Fatal("Close did not recycle the frames in memory")
	}
}

// A writer reusing recycled buffers, as the daemon's pipe reader does, and
// readers of different speeds: every reader sees every payload intact. Run
// under -race, any reuse of a buffer a reader still reads is also a race.
func TestRecycleConcurrentReaders(t *testing.T) {
	var rc recycler
	l := New(Options{MemLimit: 8 * (512 + 64), Recycle: rc.recycle})
	const frames, size = 5000, 512
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()

	var wg sync.WaitGroup
	for r := range 3 {
		c := l.NewCursor(0)
		wg.Add(1)
		go func() {
			defer wg.Done()
			defer c.Close()
			want := int64(1)
			var buf []wire.Frame
			for {
				var err error
				buf, err = c.Next(ctx, buf[:0], 4*size)
				for _, f := range buf {
					if f.Seq != want {
						t.Errorf("reader %d: seq %d, want %d", r, f.Seq, want)
						return
					}
					if f.Stream == wire.Stdout && !bytes.Equal(f.Data, payload(f.Seq, size)) {
						t.Errorf("reader %d: frame %d damaged", r, f.Seq)
						return
					}
					want++
				}
				if r == 2 {
					time.Sleep(50 * time.Microsecond) // a slow writer-out
				}
				if err != nil {
					if want != frames+2 {
						t.Errorf("reader %d ended at %d: %v", r, want, err)
					}
					return
				}
			}
		}()
	}
	for seq := int64(1); seq <= frames; seq++ {
		rc.mu.Lock()
		var b []byte
		if n := len(rc.pool); n > 0 {
			b, rc.pool = rc.pool[n-1][:size], rc.pool[:n-1]
		} else {
			b = make([]byte, size)
		}
		rc.mu.Unlock()
		copy(b, payload(seq, size))
		if _, err := l.Append(ctx, wire.Frame{Stream: wire.Stdout, Data: b}); err != nil {
			t.Fatal(err)
		}
	}
	appendExit(t, l, 0)
	wg.Wait()
	l.Close()
	rc.mu.Lock()
	reused := len(rc.got)
	rc.mu.Unlock()
	if reused == 0 {
		t.Fatal("nothing was recycled")
	}
}

// AppendAll numbers frames in place and a waiting reader takes them as one
// batch.
func TestAppendAllOneBatch(t *testing.T) {
	l := New(Options{})
	defer l.Close()
	got := nextInBackground(l.NewCursor(0))
	in := []wire.Frame{{Stream: wire.Stdout, Data: []byte("a")}, {Stream: wire.Stderr, Data: []byte("b")}, {Stream: wire.Stdout, Data: []byte("c")}}
	if n, err := l.AppendAll(context.Background(), in); n != 3 || err != nil {
		t.Fatalf("AppendAll: %d, %v", n, err)
	}
	for i, f := range in {
		if f.Seq != int64(i+1) {
			t.Fatalf("frame %d got seq %d", i, f.Seq)
		}
	}
	// AppendAll holds the lock from the first frame to the last, so the
	// reader, woken or not yet waiting, finds all three.
	if fs := <-got; len(fs) != 3 {
		t.Fatalf("reader took %d frames in its first batch, want 3", len(fs))
	}
}
