package streamlog

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/seed5ad92d46/sous/daemon/wire"
)

// A cursor keeping up with the memory window is not pushed onto the disk
// by spilling: the appender waits for it as it would without a spill dir.
// A cursor already behind the window (a replay reading spilled frames)
// holds nothing back.
func TestSpillWaitsForLiveCursor(t *testing.T) {
	l := New(Options{MemLimit: 4 * (1000 + 64), SpillDir: t.TempDir()})
	defer l.Close()
	c := l.NewCursor(0)
	appendN(t, l, 4, 1000)

	// The fifth frame needs the first out of memory, which c reads next.
	ctx, cancel := context.WithTimeout(context.Background(), 50*time.Millisecond)
	defer cancel()
	if _, err := l.Append(ctx, wire.Frame{Stream: wire.Stdout, Data: payload(5, 1000)}); !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("append did not wait for the live cursor: %v", err)
	}
	if st := l.Stats(); st.Disk != 0 {
		t.Fatalf("spilled under a live cursor: %+v", st)
	}
	fs, err := c.Next(context.Background(), nil, 1000) // seq 1 only
	if err != nil || len(fs) != 1 || fs[0].Seq != 1 {
		t.Fatalf("Next %v %v", fs, err)
	}
	c.Release()
	if _, err := l.Append(context.Background(), wire.Frame{Stream: wire.Stdout, Data: payload(5, 1000)}); err != nil {
		t.Fatal(err)
	}
	if st := l.Stats(); st.FirstSeq != 1 || st.Disk == 0 {
		t.Fatalf("seq 1 not spilled once read: %+v", st)
	}

	// A replay from seq 1 starts on the disk: the appender goes on past it.
	replay := l.NewCursor(0)
	c.Close()
	ctx, cancel = context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	for i := range 20 {
		if _, err := l.Append(ctx, wire.Frame{Stream: wire.Stdout, Data: payload(int64(6+i), 1000)}); err != nil {
			t.Fatalf("append %d held back by a replay on disk: %v", 6+i, err)
		}
	}
	appendExit(t, l, 0)
	if fs := readAll(t, replay, 4<<10); len(fs) != 26 || fs[0].Seq != 1 {
		t.Fatalf("replay read %d frames from %d", len(fs), fs[0].Seq)
	}
}
