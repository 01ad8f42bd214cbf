package client_test

import (
	"context"
	"os"
	"os/exec"
	"strconv"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/seed5ad92d46/sous/daemon/client"
	"github.com/seed5ad92d46/sous/daemon/mirror"
	"github.com/seed5ad92d46/sous/daemon/wire"
	"github.com/seed5ad92d46/sous/internal/testutil"
)

// drain starts cat reading r to /dev/null, as the reader of sous exec's
// stdout; the channel says when it is done. A reader in this process
// would compete with the daemon for the Go scheduler, which no reader of
// sous exec does.
func drain(b *testing.B, r *os.File) <-chan error {
	cat := exec.Command("cat")
	cat.Stdin = r
	if err := cat.Start(); err != nil {
		b.Fatal(err)
	}
	r.Close()
	done := make(chan error, 1)
	go func() { done <- cat.Wait() }()
	return done
}

// outPipe is sous exec's stdout: a pipe grown to 1 MiB, as exec grows it.
func outPipe(b *testing.B) (r, w *os.File) {
	r, w, err := os.Pipe()
	if err != nil {
		b.Fatal(err)
	}
	if rc, err := w.SyscallConn(); err == nil {
		_ = rc.Control(func(fd uintptr) { _, _ = unix.FcntlInt(fd, unix.F_SETPIPE_SZ, 1<<20) })
	}
	return r, w
}

// BenchmarkStreamEmbedded moves head -c N /dev/zero from a child through
// the embedded daemon to a pipe that cat reads, as `sous exec` does: with
// the daemon writing the pipe itself (mirror-x-pipe), and with the frames'
// data written by the handler (frames-x-pipe: what a file or a terminal
// gets). Each is a ratio to the child writing the pipe directly, timed in
// the same run. ns/op covers all three.
func BenchmarkStreamEmbedded(b *testing.B) {
	n := testutil.BenchBytes(b, 256<<20)
	size := strconv.FormatInt(n, 10)
	raw := func() time.Duration {
		r, w := outPipe(b)
		done := drain(b, r)
		cmd := exec.Command("head", "-c", size, "/dev/zero")
		cmd.Stdout = w
		start := time.Now()
		if err := cmd.Start(); err != nil {
			b.Fatal(err)
		}
		w.Close()
		if err := cmd.Wait(); err != nil {
			b.Fatal(err)
		}
		if err := <-done; err != nil {
			b.Fatal(err)
		}
		return time.Since(start)
	}
	viaDaemon := func(c *client.Client, teed bool) time.Duration {
		r, w := outPipe(b)
		done := drain(b, r)
		spec := client.SpawnSpec{ID: "s", Command: "head", Args: []string{"-c", size, "/dev/zero"}}
		var total, marked int64 // on the reading goroutine, read after Wait
		h := func(f *wire.Frame) {
			if f.Stream != wire.Stdout {
				return
			}
			total += int64(len(f.Data))
			if f.Mirrored {
				marked += int64(len(f.Data))
			} else {
				w.Write(f.Data)
			}
		}
		if teed {
			spec.Mirror = mirror.Spec{Stdout: w}
		}
		ctx := context.Background()
		start := time.Now()
		p, err := c.Spawn(ctx, spec, h)
		if err != nil {
			b.Fatal(err)
		}
		if code, err := p.Wait(ctx); err != nil || code != 0 {
			b.Fatalf("wait: %d %v", code, err)
		}
		// Time only a path that did its work: every byte framed, and all
		// of it mirrored or none of it.
		if want := map[bool]int64{true: n, false: 0}[teed]; total != n || marked != want {
			b.Fatalf("mirror %v: %d bytes in frames, %d marked mirrored; want %d and %d", teed, total, marked, n, want)
		}
		w.Close()
		if err := <-done; err != nil {
			b.Fatal(err)
		}
		return time.Since(start)
	}
	_, c := embeddedDaemon(b)
	b.SetBytes(3 * n) // each iteration streams n bytes three ways
	var pipe, mirrored, framed time.Duration
	for range b.N { // interleaved, so that noise hits all three alike
		pipe += raw()
		mirrored += viaDaemon(c, true)
		framed += viaDaemon(c, false)
	}
	b.ReportMetric(pipe.Seconds()/mirrored.Seconds(), "mirror-x-pipe")
	b.ReportMetric(pipe.Seconds()/framed.Seconds(), "frames-x-pipe")
}
