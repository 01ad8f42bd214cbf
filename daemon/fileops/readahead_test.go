package fileops

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"testing"
	"testing/iotest"
	"time"
)

// The read-ahead passes every byte through in order, whatever sizes the
// source returns, then the source's error after its data, in both modes.
func TestReadaheadOrderAndError(t *testing.T) {
	data := make([]byte, 5<<20)
	rand.NewChaCha8([32]byte{1}).Read(data)
	boom := errors.New("boom")
	for _, src := range []struct {
		name    string
		r       func() io.Reader
		size    int
		wantErr error
	}{
		{"plain", func() io.Reader { return bytes.NewReader(data) }, len(data), nil},
		{"one byte reads", func() io.Reader { return iotest.OneByteReader(bytes.NewReader(data[:100<<10])) }, 100 << 10, nil},
		{"half reads", func() io.Reader { return iotest.HalfReader(bytes.NewReader(data)) }, len(data), nil},
		{"error after data", func() io.Reader { return io.MultiReader(bytes.NewReader(data), iotest.ErrReader(boom)) }, len(data), boom},
		{"data with EOF", func() io.Reader { return iotest.DataErrReader(bytes.NewReader(data)) }, len(data), nil},
	} {
		for _, whole := range []bool{false, true} {
			t.Run(fmt.Sprintf("%s/whole=%v", src.name, whole), func(t *testing.T) {
				ra := startReadahead(src.r(), io.NopCloser(nil), whole)
				defer ra.stop()
				var got bytes.Buffer
				_, err := io.CopyBuffer(struct{ io.Writer }{&got}, struct{ io.Reader }{ra}, make([]byte, 1000))
				if !errors.Is(err, src.wantErr) {
					t.Errorf("error = %v, want %v", err, src.wantErr)
				}
				if !bytes.Equal(got.Bytes(), data[:src.size]) {
					t.Errorf("got %d bytes, want the %d bytes of the source", got.Len(), src.size)
				}
			})
		}
	}
}

// blockingSource returns one chunk, then blocks in Read until closed.
type blockingSource struct {
	pr      *io.PipeReader
	first   []byte
	blocked chan struct{}
}

func (b *blockingSource) Read(p []byte) (int, error) {
	if b.first != nil {
		n := copy(p, b.first)
		b.first = nil
		return n, nil
	}
	close(b.blocked)
	return b.pr.Read(p)
}

// stop returns even when the filler is blocked in a read that only closing
// the source ends (a FIFO whose writer stalls).
func TestReadaheadStopUnblocksSource(t *testing.T) {
	pr, pw := io.Pipe()
	defer pw.Close()
	src := &blockingSource{pr: pr, first: []byte("hello"), blocked: make(chan struct{})}
	ra := startReadahead(src, pr, false)
	buf := make([]byte, 5)
	if _, err := io.ReadFull(ra, buf); err != nil || string(buf) != "hello" {
		t.Fatalf("read %q, %v", buf, err)
	}
	<-src.blocked
	done := make(chan struct{})
	go func() { ra.stop(); close(done) }()
	select {
	case <-done:
	case <-time.After(5 * time.Second):
		t.Fatal("stop hung on a blocked source")
	}
}

// Stopping before reading anything, or after the end, does not hang either.
func TestReadaheadStopIdle(t *testing.T) {
	ra := startReadahead(bytes.NewReader(make([]byte, 10<<20)), io.NopCloser(nil), true)
	ra.stop()
	ra = startReadahead(bytes.NewReader([]byte("x")), io.NopCloser(nil), true)
	if b, err := io.ReadAll(ra); err != nil || string(b) != "x" {
		t.Errorf("ReadAll = %q, %v", b, err)
	}
	ra.stop()
}
