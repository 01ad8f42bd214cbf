package proc

import (
	"bytes"
	"crypto/rand"
	"errors"
	"io"
	"os"
	"sync"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/seed5ad92d46/sous/daemon/mirror"
	"github.com/seed5ad92d46/sous/daemon/wire"
	"github.com/seed5ad92d46/sous/internal/testutil"
)

// fdInt runs op on f's descriptor without f.Fd, which would switch the pipe
// to blocking mode and so take it away from the poller the reader relies on.
func fdInt(t *testing.T, f *os.File, op func(fd int) (int, error)) int {
	t.Helper()
	rc, err := f.SyscallConn()
	if err != nil {
		t.Fatal(err)
	}
	var n int
	if cerr := rc.Control(func(fd uintptr) { n, err = op(int(fd)) }); cerr != nil {
		t.Fatal(cerr)
	}
	if err != nil {
		t.Fatal(err)
	}
	return n
}

func pipeSize(t *testing.T, f *os.File) int {
	return fdInt(t, f, func(fd int) (int, error) { return unix.FcntlInt(uintptr(fd), unix.F_GETPIPE_SZ, 0) })
}

func pending(t *testing.T, f *os.File) int {
	return fdInt(t, f, func(fd int) (int, error) { return unix.IoctlGetInt(fd, unix.TIOCINQ) })
}

// readAllChunks drains pr, checking the frame-size bound.
func readAllChunks(t *testing.T, pr *pipeReader) []byte {
	t.Helper()
	var got []byte
	var chunks [][]byte
	for {
		var err error
		chunks, _, _, err = pr.read(chunks[:0])
		for _, c := range chunks {
			if len(c) == 0 || len(c) > wire.MaxFrameData {
				t.Fatalf("chunk of %d bytes", len(c))
			}
			got = append(got, c...)
		}
		if err == io.EOF {
			return got
		}
		if err != nil {
			t.Fatal(err)
		}
	}
}

// A child that outruns the reader gets a bigger pipe and bigger reads; the
// bytes arrive exact, and closing returns the registry's slot.
func TestPipeReaderGrowsForFastWriter(t *testing.T) {
	r := NewRegistry(Options{})
	rf, wf := testutil.Pipe(t)
	want := make([]byte, 8<<20+123)
	rand.Read(want)
	// Fill the pipe before the first read, as a child that starts fast does.
	go func() { wf.Write(want); wf.Close() }()
	for pending(t, rf) < 64<<10 {
		time.Sleep(time.Millisecond)
	}
	pr, err := newPipeReader(r, rf, nil, nil)
	if err != nil {
		t.Fatal(err)
	}
	got := readAllChunks(t, pr)
	if !bytes.Equal(got, want) {
		t.Fatalf("read %d bytes, not the %d written", len(got), len(want))
	}
	if !pr.big || pipeSize(t, rf) != bigPipeSize || len(pr.bufs) != bigReadBufs {
		t.Fatalf("grown %v, pipe %d, %d buffers", pr.big, pipeSize(t, rf), len(pr.bufs))
	}
	if r.bigPipes.Load() != 1 {
		t.Fatalf("bigPipes %d while grown", r.bigPipes.Load())
	}
	pr.close()
	if r.bigPipes.Load() != 0 {
		t.Fatalf("bigPipes %d after close", r.bigPipes.Load())
	}
}

// A reader waiting on an empty pipe holds no read buffers (a quiet
// process's reader held 64-256 KiB of them), and takes them again when
// output comes: mirrored or not, the bytes arrive exact.
func TestPipeReaderParksBuffers(t *testing.T) {
	for _, mirrored := range []bool{false, true} {
		r := NewRegistry(Options{})
		rf, wf := testutil.Pipe(t)
		var mirror, mirrorOut *os.File
		if mirrored {
			mirrorOut, mirror = testutil.Pipe(t)
		}
		pr, err := newPipeReader(r, rf, mirror, nil)
		if err != nil {
			t.Fatal(err)
		}
		var chunks [][]byte
		held := func() int {
			n := 0
			for _, b := range pr.bufs {
				if b != nil {
					n++
				}
			}
			return n
		}
		for round, size := range []int{3, 100 << 10} {
			want := make([]byte, size)
			rand.Read(want)
			go wf.Write(want) // more than the pipe holds
			teed := make(chan []byte, 1)
			if mirrored {
				go func() {
					b := make([]byte, size)
					io.ReadFull(mirrorOut, b)
					teed <- b
				}()
			}
			var got []byte
			for len(got) < size {
				chunks, _, _, err = pr.read(chunks[:0])
				if err != nil {
					t.Fatalf("mirrored %v, round %d: %v", mirrored, round, err)
				}
				for _, c := range chunks {
					got = append(got, c...)
				}
			}
			if !bytes.Equal(got, want) {
				t.Fatalf("mirrored %v, round %d: read %d bytes, not the %d written", mirrored, round, len(got), size)
			}
			if mirrored && !bytes.Equal(<-teed, want) {
				t.Fatalf("round %d: the mirror got other bytes", round)
			}
			rf.SetReadDeadline(time.Now().Add(20 * time.Millisecond))
			if _, n, _, err := pr.read(chunks[:0]); n != 0 || !errors.Is(err, os.ErrDeadlineExceeded) {
				t.Fatalf("mirrored %v: read %d bytes from an empty pipe (%v)", mirrored, n, err)
			}
			rf.SetReadDeadline(time.Time{})
			if n := held(); n != 0 {
				t.Fatalf("mirrored %v, round %d: %d read buffers held while the pipe is empty", mirrored, round, n)
			}
		}
		pr.close()
	}
}

// Growth is bounded across the registry: the pipe user budget is shared.
func TestPipeReaderGrowthBounded(t *testing.T) {
	r := NewRegistry(Options{})
	r.bigPipes.Store(maxBigPipes)
	rf, wf := testutil.Pipe(t)
	before := pipeSize(t, rf)
	go func() { wf.Write(make([]byte, 1<<20)); wf.Close() }()
	pr, err := newPipeReader(r, rf, nil, nil)
	if err != nil {
		t.Fatal(err)
	}
	if got := readAllChunks(t, pr); len(got) != 1<<20 {
		t.Fatalf("read %d bytes", len(got))
	}
	pr.close()
	if pr.big || pipeSize(t, rf) != before || r.bigPipes.Load() != maxBigPipes {
		t.Fatalf("grew past the bound: big %v, pipe %d (was %d), count %d", pr.big, pipeSize(t, rf), before, r.bigPipes.Load())
	}
}

// Small reads are copied out rather than pinning a whole buffer; large ones
// hand the buffer over, and the log gives it back for reuse.
func TestPipeReaderSmallReadsCopied(t *testing.T) {
	r := NewRegistry(Options{})
	rf, wf := testutil.Pipe(t)
	pr, err := newPipeReader(r, rf, nil, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer pr.close()
	wf.Write([]byte("hello\n"))
	chunks, n, _, err := pr.read(nil)
	if err != nil || n != 6 || len(chunks) != 1 || string(chunks[0]) != "hello\n" {
		t.Fatalf("read %q %d %v", chunks, n, err)
	}
	if cap(chunks[0]) >= wire.MaxFrameData/2 {
		t.Fatalf("a 6-byte read pins %d bytes", cap(chunks[0]))
	}
	wf.Write(make([]byte, wire.MaxFrameData))
	chunks, _, _, err = pr.read(nil)
	if err != nil || len(chunks) == 0 || cap(chunks[0]) != wire.MaxFrameData {
		t.Fatalf("a full read: %d chunks, cap %d, %v", len(chunks), cap(chunks[0]), err)
	}
	wf.Close()
}

// readMirrored drains pr, returning what it read marked mirrored and what
// unmarked, and failing if a mirrored read follows an unmarked one (the
// mirror is given up once, never taken back).
func readMirrored(t *testing.T, pr *pipeReader) (mirrored, plain []byte) {
	t.Helper()
	var chunks [][]byte
	for {
		var (
			n, m int
			err  error
		)
		chunks, n, m, err = pr.read(chunks[:0])
		if n > 0 && m > 0 && len(plain) > 0 {
			t.Fatalf("a mirrored read after %d unmirrored bytes", len(plain))
		}
		all := bytes.Join(chunks, nil)
		mirrored, plain = append(mirrored, all[:m]...), append(plain, all[m:]...)
		if err == io.EOF {
			return mirrored, plain
		}
		if err != nil {
			t.Fatal(err)
		}
	}
}

// writeRagged writes want in pieces of irregular sizes, some tiny, so that
// the pipe holds partly filled pages, then closes w.
func writeRagged(w *os.File, want []byte) {
	sizes := []int{1, 7, 4096, 100, 65536, 3, 200000, 4095, 31}
	for i, off := 0, 0; off < len(want); i++ {
		n := min(sizes[i%len(sizes)], len(want)-off)
		if _, err := w.Write(want[off : off+n]); err != nil {
			break
		}
		off += n
	}
	w.Close()
}

// With a mirror, every byte reaches both the frames (marked mirrored) and
// the mirror pipe, once and in order, even when the mirror's reader is the
// slow one and the pipe holds ragged pages; closing frees the scratch pipe.
func TestPipeReaderMirrors(t *testing.T) {
	r := NewRegistry(Options{})
	rf, wf := testutil.Pipe(t)
	mr, mw := testutil.Pipe(t)
	want := make([]byte, 6<<20+5)
	rand.Read(want)
	go writeRagged(wf, want)
	seen := make(chan []byte)
	go func() {
		var got []byte
		buf := make([]byte, 50000)
		for {
			if len(got) < 1<<20 {
				time.Sleep(time.Millisecond) // slower than the writer: the mirror fills up
			}
			n, err := mr.Read(buf)
			got = append(got, buf[:n]...)
			if err != nil {
				seen <- got
				return
			}
		}
	}()
	pr, err := newPipeReader(r, rf, mw, nil)
	if err != nil {
		t.Fatal(err)
	}
	mirrored, plain := readMirrored(t, pr)
	fds := testutil.OpenFDs(t) // the writer has closed its end: EOF came
	pr.close()
	if n := testutil.OpenFDs(t); n != fds-2 {
		t.Fatalf("%d descriptors open after close, %d before: the scratch pipe is still open", n, fds)
	}
	mw.Close()
	if !bytes.Equal(mirrored, want) || len(plain) != 0 {
		t.Fatalf("frames: %d bytes mirrored and %d not, of %d written; equal %v", len(mirrored), len(plain), len(want), bytes.Equal(mirrored, want))
	}
	if got := <-seen; !bytes.Equal(got, want) {
		t.Fatalf("the mirror's reader got %d bytes, not the %d written", len(got), len(want))
	}
}

// When the mirror's reader goes away, the output keeps coming, unmarked,
// for the spawner to write itself: nothing is lost or marked twice.
func TestPipeReaderMirrorReaderGone(t *testing.T) {
	r := NewRegistry(Options{})
	rf, wf := testutil.Pipe(t)
	mr, mw := testutil.Pipe(t)
	want := make([]byte, 4<<20)
	rand.Read(want)
	go writeRagged(wf, want)
	seen := make(chan []byte)
	go func() {
		got := make([]byte, 300000)
		n, _ := io.ReadFull(mr, got)
		mr.Close() // the next tee gets EPIPE
		seen <- got[:n]
	}()
	pr, err := newPipeReader(r, rf, mw, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer pr.close()
	mirrored, plain := readMirrored(t, pr)
	if all := append(append([]byte(nil), mirrored...), plain...); !bytes.Equal(all, want) {
		t.Fatalf("frames hold %d+%d bytes, not the %d written in order", len(mirrored), len(plain), len(want))
	}
	got := <-seen
	if len(plain) == 0 || len(mirrored) < len(got) || !bytes.Equal(got, want[:len(got)]) {
		t.Fatalf("mirrored %d, unmarked %d, the mirror's reader read %d", len(mirrored), len(plain), len(got))
	}
	if pr.mirror != nil {
		t.Fatal("still mirroring to a pipe nobody reads")
	}
}

// A process discarded while its mirror is full stops waiting for the room.
func TestPipeReaderMirrorWaitEnds(t *testing.T) {
	r := NewRegistry(Options{})
	rf, wf := testutil.Pipe(t)
	_, mw := testutil.Pipe(t) // nobody reads it, but it stays open
	go wf.Write(make([]byte, 4<<20))
	done := make(chan struct{})
	pr, err := newPipeReader(r, rf, mw, done)
	if err != nil {
		t.Fatal(err)
	}
	defer pr.close()
	ended := make(chan error, 1)
	go func() {
		var err error
		for err == nil {
			_, _, _, err = pr.read(nil)
		}
		ended <- err
	}()
	time.Sleep(50 * time.Millisecond)
	select {
	case err := <-ended:
		t.Fatalf("reading ended with %v while the mirror was full", err)
	default:
	}
	close(done)
	wf.Close()
	select {
	case <-ended:
	case <-time.After(10 * time.Second):
		t.Fatal("still waiting for the mirror after the process was discarded")
	}
}

// End of file while the mirror is full: tee says EAGAIN there too, which
// must not be taken for an empty pipe (whose readiness would never come).
func TestPipeReaderMirrorFullAtEOF(t *testing.T) {
	r := NewRegistry(Options{})
	rf, wf := testutil.Pipe(t)
	mr, mw := testutil.Pipe(t)
	size := pipeSize(t, mw)
	want := make([]byte, size) // exactly fills the mirror
	rand.Read(want)
	if _, err := wf.Write(want); err != nil {
		t.Fatal(err)
	}
	wf.Close()
	pr, err := newPipeReader(r, rf, mw, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer pr.close()
	done := make(chan []byte)
	go func() { m, _ := readMirrored(t, pr); done <- m }()
	select {
	case m := <-done:
		if !bytes.Equal(m, want) {
			t.Fatalf("mirrored %d bytes, not the %d written", len(m), len(want))
		}
	case <-time.After(10 * time.Second):
		t.Fatal("no end of file while the mirror was full")
	}
	mw.Close()
	if got, _ := io.ReadAll(mr); !bytes.Equal(got, want) {
		t.Fatalf("the mirror holds %d bytes, not the %d written", len(got), len(want))
	}
}

// Two readers mirroring to one slow pipe (stdout and stderr both bound for
// it, as with sous exec CMD 2>&1 | less): tee can then copy nothing without
// the pipe being at its end, because the other writer filled the mirror
// between tee's look and its copy. That must not be taken for end of file:
// every read stays mirrored and each stream arrives whole and in order.
func TestPipeReaderSharedMirror(t *testing.T) {
	r := NewRegistry(Options{})
	mr, mw := testutil.Pipe(t)
	go func() { // a slow reader: the mirror is mostly full
		buf := make([]byte, 4096)
		for {
			time.Sleep(50 * time.Microsecond)
			if _, err := mr.Read(buf); err != nil {
				return
			}
		}
	}()
	var wg sync.WaitGroup
	for i := range 2 {
		rf, wf := testutil.Pipe(t)
		want := make([]byte, 4<<20)
		rand.Read(want)
		go writeRagged(wf, want)
		pr, err := newPipeReader(r, rf, mw, nil)
		if err != nil {
			t.Fatal(err)
		}
		wg.Add(1)
		go func() {
			defer wg.Done()
			defer pr.close()
			mirrored, plain := readMirrored(t, pr)
			if len(plain) != 0 || !bytes.Equal(mirrored, want) {
				t.Errorf("reader %d: %d bytes mirrored, %d not, of %d", i, len(mirrored), len(plain), len(want))
			}
		}()
	}
	wg.Wait()
}

// Shutdown does not wait for a consumer that stopped reading the mirror: the
// child is stopped, a reader waiting for the mirror's room gives up on it,
// and the process ends with its exit frame.
func TestShutdownWithAFullMirror(t *testing.T) {
	r := NewRegistry(Options{})
	_, mw := testutil.Pipe(t) // nobody reads it, but it stays open
	p, err := r.Spawn(Spec{ID: "full", Command: "head", Args: []string{"-c", "4000000", "/dev/zero"}, Mirror: mirror.Spec{Stdout: mw}})
	if err != nil {
		t.Fatal(err)
	}
	select { // head fills the mirror and its own pipe, then waits for room
	case <-p.Done():
		t.Fatal("the process ended although its mirror is full: the test proves nothing")
	case <-time.After(200 * time.Millisecond):
	}
	shut := make(chan struct{})
	go func() { r.Shutdown(false, 200*time.Millisecond); close(shut) }()
	select {
	case <-shut:
	case <-time.After(10 * time.Second):
		t.Fatal("Shutdown still waits for the full mirror")
	}
	select {
	case <-p.Done():
	default:
		t.Fatal("no exit after Shutdown")
	}
}
