package daemon

import (
	"fmt"
	"io"
	"net"
	"os"
	"strings"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/seed5ad92d46/sous/daemon/wire"
)

// On a Unix socket, a child's exit frame and a line of output are written
// by the goroutines that append them (the child poller, the pipe's
// reader): no pump goroutine is started for the subscription. It was one
// per spawn, woken on the exit.
func TestSocketFramesWrittenByTheirAppender(t *testing.T) {
	d := startDaemon(t, Config{})
	c := d.dial()
	before := d.srv.Stats().FramePumps.Load()
	const n = 30
	for i := range n {
		id := fmt.Sprint("t", i)
		c.result("process.spawn", `{"id":"`+id+`","command":"true"}`)
		if frames := c.waitExit(id); len(frames) != 1 || exitCodeOf(frames) != 0 {
			t.Fatalf("%s: frames %+v", id, frames)
		}
	}
	c.result("process.spawn", shParams("echo", "echo hello; exit 4"))
	frames := c.waitExit("echo")
	checkSeqs(t, frames, 1)
	if got := string(output(frames, wire.Stdout)); got != "hello\n" || exitCodeOf(frames) != 4 {
		t.Fatalf("echo: %q, exit %d", got, exitCodeOf(frames))
	}
	if got := d.srv.Stats().FramePumps.Load() - before; got != 0 {
		t.Errorf("%d pump goroutines started for %d quiet spawns and one short line", got, n)
	}
}

// A client that does not read its socket gets every frame all the same,
// in order, once it reads: the appender writes only while the socket takes
// the bytes at once, then hands the subscription to a pump, which waits.
// Meanwhile other children's exits are not held up (the child poller
// never waits on a client).
func TestInlineFramesHandOverWhenTheSocketFills(t *testing.T) {
	d := startDaemon(t, Config{})
	nc, err := net.Dial("unix", d.sock)
	if err != nil {
		t.Fatal(err)
	}
	// Small lines, each its own write, a little apart: batches of a line
	// or so, which go inline until the socket is full (6 MB against a 4
	// MiB send buffer), and then one that goes in part.
	const lines = 20000
	script := fmt.Sprintf(`awk 'BEGIN { for (i = 0; i < %d; i++) { printf "%%0300d\n", i; fflush(); for (j = 0; j < 3000; j++) ; } }'`, lines)
	spawn := `{"jsonrpc":"2.0","id":1,"method":"process.spawn","params":` + shParams("flood", script) +
		`,"auth":` + string(wire.QuoteID(testToken)) + "}\n"
	if _, err := nc.Write([]byte(spawn)); err != nil {
		t.Fatal(err)
	}
	// The flood may end, or stop with the log's window full: how many of
	// its bytes the socket holds depends on how many writes carried them
	// (a Unix socket counts each write's overhead against its buffer), so
	// under load, one line a write, it held too little for the rest to
	// fit in the window, and the flood waited for the reader, as a pipe's
	// writer waits. Either way a pump has taken over by then.
	deadline := time.Now().Add(30 * time.Second)
	for d.srv.Stats().FramePumps.Load() == 0 {
		if time.Now().After(deadline) {
			t.Fatal("no pump took over from the appender on a full socket")
		}
		time.Sleep(10 * time.Millisecond)
	}

	other := d.dial()
	for i := range 5 {
		id := fmt.Sprint("beside", i)
		other.result("process.spawn", `{"id":"`+id+`","command":"true"}`)
		other.waitExit(id)
	}

	c := d.newRawClient(nc)
	c.respFor("1")
	frames := c.waitExit("flood")
	checkSeqs(t, frames, 1)
	var want strings.Builder
	for i := range lines {
		fmt.Fprintf(&want, "%0300d\n", i)
	}
	if got := string(output(frames, wire.Stdout)); got != want.String() || exitCodeOf(frames) != 0 {
		t.Fatalf("flood: %d bytes of output (want %d), exit %d", len(got), want.Len(), exitCodeOf(frames))
	}
}

// A batch the socket takes only in part is finished by finishPart, before
// anything else is written: the client reads every frame whole, in order.
func TestTrySendFramesInPart(t *testing.T) {
	d := startDaemon(t, Config{})
	fds, err := unix.Socketpair(unix.AF_UNIX, unix.SOCK_STREAM, 0)
	if err != nil {
		t.Fatal(err)
	}
	ours, theirs := fileConn(t, fds[0]), fileConn(t, fds[1])
	c := newConn(d.srv, newStreamTransport(ours, &d.srv.lines))
	defer c.close(errShutdown)
	if err := ours.(*net.UnixConn).SetWriteBuffer(4096); err != nil {
		t.Fatal(err)
	}
	tw := c.inlineWriter()
	if tw == nil {
		t.Fatal("a Unix socket cannot be written inline")
	}
	quoted := wire.QuoteID("p")
	var want []byte
	for seq := int64(1); ; seq++ {
		f := []wire.Frame{{Stream: wire.Stdout, Seq: seq, Data: []byte(strings.Repeat("x", 1000))}}
		want = wire.AppendFrame(want, quoted, &f[0])
		out, rest, err := c.trySendFrames(tw, quoted, f)
		if err != nil {
			t.Fatal(err)
		}
		if out == notTried {
			t.Fatalf("frame %d not tried", seq)
		}
		if out == sentPart {
			finished := make(chan error, 1)
			go func() { finished <- c.finishPart(rest) }()
			want = append(want, "after\n"...)
			read := make(chan []byte, 1)
			go func() {
				got := make([]byte, len(want))
				_, err := io.ReadFull(theirs, got)
				if err != nil {
					t.Error(err)
				}
				read <- got
			}()
			if err := c.write([]byte("after\n")); err != nil { // waits for the part's end
				t.Fatal(err)
			}
			if err := <-finished; err != nil {
				t.Fatal(err)
			}
			if got := <-read; string(got) != string(want) {
				t.Fatalf("read %d bytes that differ from the %d written", len(got), len(want))
			}
			return
		}
		if seq > 10000 {
			t.Fatal("a 4 KiB socket nobody reads took 10 MB")
		}
	}
}

// fileConn makes a net.Conn of a socket descriptor.
func fileConn(t *testing.T, fd int) net.Conn {
	t.Helper()
	f := os.NewFile(uintptr(fd), "socket")
	defer f.Close()
	nc, err := net.FileConn(f)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { nc.Close() })
	return nc
}
