package streamlog

import (
	"context"
	"os"
	"testing"

	"github.com/seed5ad92d46/sous/daemon/wire"
)

// BenchmarkSpill appends 32 KiB frames to a log whose memory holds 4 MiB, so
// that every byte is spilled, as on a socket daemon whose child writes more
// than its replay window. Its baseline, run beside it, writes the same bytes
// to a file through the page cache in the same 32 KiB writes.
//
// The appender is the daemon's reader of a child's pipe: what it spends here
// per byte holds the child back.
func BenchmarkSpill(b *testing.B) {
	const frame = 32 << 10
	data := make([]byte, frame)
	b.Run("log", func(b *testing.B) {
		l := New(Options{MemLimit: 4 << 20, SpillDir: b.TempDir(), DiskLimit: 1 << 40})
		defer l.Close()
		ctx := context.Background()
		b.SetBytes(frame)
		for b.Loop() {
			if _, err := l.Append(ctx, wire.Frame{Stream: wire.Stdout, Data: data}); err != nil {
				b.Fatal(err)
			}
		}
		if _, err := l.Append(ctx, wire.Frame{Stream: wire.Exit}); err != nil {
			b.Fatal(err)
		}
		if st := l.Stats(); st.Disk < int64(b.N-128)*frame {
			b.Fatalf("spilled %d bytes of %d", st.Disk, int64(b.N)*frame)
		}
	})
	b.Run("file", func(b *testing.B) {
		f, err := os.CreateTemp(b.TempDir(), "baseline")
		if err != nil {
			b.Fatal(err)
		}
		defer f.Close()
		b.SetBytes(frame)
		for b.Loop() {
			if _, err := f.Write(data); err != nil {
				b.Fatal(err)
			}
		}
	})
}
