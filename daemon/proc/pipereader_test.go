package proc

import (
	"bytes"
	"crypto/rand"
	"io"
	"os"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/seed5ad92d46/sous/daemon/wire"
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
		chunks, _, err = pr.read(chunks[:0])
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
	rf, wf := testPipe(t)
	want := make([]byte, 8<<20+123)
	rand.Read(want)
	// Fill the pipe before the first read, as a child that starts fast does.
	go func() { wf.Write(want); wf.Close() }()
	for pending(t, rf) < 64<<10 {
		time.Sleep(time.Millisecond)
	}
	pr, err := newPipeReader(r, rf)
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

// Growth is bounded across the registry: the pipe user budget is shared.
func TestPipeReaderGrowthBounded(t *testing.T) {
	r := NewRegistry(Options{})
	r.bigPipes.Store(maxBigPipes)
	rf, wf := testPipe(t)
	before := pipeSize(t, rf)
	go func() { wf.Write(make([]byte, 1<<20)); wf.Close() }()
	pr, err := newPipeReader(r, rf)
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
	rf, wf := testPipe(t)
	pr, err := newPipeReader(r, rf)
	if err != nil {
		t.Fatal(err)
	}
	defer pr.close()
	wf.Write([]byte("hello\n"))
	chunks, n, err := pr.read(nil)
	if err != nil || n != 6 || len(chunks) != 1 || string(chunks[0]) != "hello\n" {
		t.Fatalf("read %q %d %v", chunks, n, err)
	}
	if cap(chunks[0]) >= wire.MaxFrameData/2 {
		t.Fatalf("a 6-byte read pins %d bytes", cap(chunks[0]))
	}
	wf.Write(make([]byte, wire.MaxFrameData))
	chunks, _, err = pr.read(nil)
	if err != nil || len(chunks) == 0 || cap(chunks[0]) != wire.MaxFrameData {
		t.Fatalf("a full read: %d chunks, cap %d, %v", len(chunks), cap(chunks[0]), err)
	}
	wf.Close()
}

// testPipe returns a pipe whose ends are closed when the test ends (the
// writer may have closed its end already).
func testPipe(t *testing.T) (r, w *os.File) {
	t.Helper()
	r, w, err := os.Pipe()
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { r.Close(); w.Close() })
	return r, w
}
