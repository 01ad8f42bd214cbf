package proc

import (
	"bytes"
	"context"
	"errors"
	"sync"
	"testing"

	"github.com/seed5ad92d46/sous/daemon/wire"
)

// collector is the child's end of stdin: it keeps every byte written.
type collector struct {
	mu     sync.Mutex
	b      bytes.Buffer
	closed chan struct{}
}

func (c *collector) Write(p []byte) (int, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.b.Write(p)
}

func (c *collector) Close() error { close(c.closed); return nil }

// FuzzStdinOffsets drives the stdin queue with random sequences of
// process.stdin requests (appends, writes at offsets behind, at and past the
// applied mark, retries whose already-applied part differs, empty writes,
// close) and checks each reply and the bytes the child receives against a
// model of the contract (docs/PROTOCOL.md, process.stdin): a gap is refused and
// changes nothing, a wholly applied write is a duplicate, an overlap writes
// only the fresh tail, fresh data after close is refused; the child gets
// exactly the applied bytes, in order, each once. The queue's bound is
// small so writers also wait for the child to drain.
func FuzzStdinOffsets(f *testing.F) {
	f.Add([]byte{0, 5, 1, 0, 3, 1, 9, 2, 3, 2, 8, 2, 0, 4})
	f.Add([]byte{1, 0, 0, 1, 200, 9, 2, 1, 0, 0, 2})
	f.Add([]byte{3, 0, 40, 3, 10, 60, 1, 250, 1})
	f.Fuzz(func(t *testing.T, ops []byte) {
		// The stream the caller means to send: position i holds byte i*7+3.
		stream := func(off, n int64) []byte {
			b := make([]byte, n)
			for i := range b {
				b[i] = byte((off+int64(i))*7 + 3)
			}
			return b
		}
		q := newStdinQueue(48)
		child := &collector{closed: make(chan struct{})}
		ran := make(chan struct{})
		go func() { q.run(child); close(ran) }()
		defer func() {
			q.stop()
			<-ran
		}()
		ctx := context.Background()
		var applied int64
		closed := false
		next := func() int64 {
			if len(ops) == 0 {
				return 0
			}
			c := ops[0]
			ops = ops[1:]
			return int64(c)
		}
		for len(ops) > 0 {
			kind := next() % 4
			if kind == 2 {
				q.Close()
				closed = true
				continue
			}
			n := next() % 100
			var off *int64
			var data []byte
			switch kind {
			case 0: // append
				data = stream(applied, n)
			case 1, 3: // at an offset up to a little past the mark
				o := next() % (applied + 4)
				if applied > 0 && next()%2 == 0 {
					o = applied - 1 - (o % applied) // behind the mark
				}
				off = &o
				data = stream(o, n)
				if kind == 3 && o < applied {
					// A retry whose already-applied part differs: only the
					// fresh tail may reach the child.
					for i := range min(applied-o, n) {
						data[i] ^= 0xff
					}
				}
			}
			got, dup, err := q.Offer(ctx, data, off)

			// The model.
			wantApplied, wantDup := applied, false
			var wantErr string
			fresh := int64(len(data))
			if off != nil {
				switch o := *off; {
				case o > applied:
					wantErr = wire.MsgStdinGap
					fresh = 0
				case o+int64(len(data)) <= applied && (len(data) > 0 || o < applied):
					wantDup, fresh = true, 0
				default:
					fresh = o + int64(len(data)) - applied
				}
			}
			if wantErr == "" && fresh > 0 {
				if closed {
					wantErr = MsgStdinClosed
				} else {
					wantApplied = applied + fresh
				}
			}
			var we *wire.Error
			switch {
			case wantErr != "" && (!errors.As(err, &we) || we.Message != wantErr):
				t.Fatalf("offer %d bytes at %v (applied %d): err %v, want %q", len(data), deref(off), applied, err, wantErr)
			case wantErr == "" && err != nil:
				t.Fatalf("offer %d bytes at %v (applied %d): %v", len(data), deref(off), applied, err)
			case got != wantApplied || dup != wantDup:
				t.Fatalf("offer %d bytes at %v (applied %d): applied %d dup %v, want %d %v", len(data), deref(off), applied, got, dup, wantApplied, wantDup)
			case q.Applied() != wantApplied:
				t.Fatalf("Applied() = %d, want %d", q.Applied(), wantApplied)
			}
			applied = wantApplied
		}
		q.Close()
		<-child.closed // the queue drained and closed the child's stdin
		if want := stream(0, applied); !bytes.Equal(child.b.Bytes(), want) {
			t.Fatalf("the child received %d bytes, want the %d applied ones exactly:\n got %x\nwant %x", child.b.Len(), applied, child.b.Bytes(), want)
		}
	})
}

func deref(p *int64) any {
	if p == nil {
		return "append"
	}
	return *p
}
