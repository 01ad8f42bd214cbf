package daemon

import (
	"bufio"
	"fmt"
	"io"
	"net"
	"os"
	"strconv"
	"strings"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/seed5ad92d46/sous/daemon/wire"
	"github.com/seed5ad92d46/sous/internal/testutil"
)

// handOver sends line on a fresh connection with files passed alongside,
// as `sous daemon bridge` sends connection.stdio, and returns the socket
// and the daemon's answer there.
func handOver(t *testing.T, d *testDaemon, line string, files ...*os.File) (*net.UnixConn, string) {
	t.Helper()
	nc, err := net.Dial("unix", d.sock)
	if err != nil {
		t.Fatal(err)
	}
	uc := nc.(*net.UnixConn)
	t.Cleanup(func() { uc.Close() })
	fds := make([]int, len(files))
	for i, f := range files {
		fds[i] = int(f.Fd())
	}
	if _, _, err := uc.WriteMsgUnix([]byte(line), unix.UnixRights(fds...), nil); err != nil {
		t.Fatalf("sendmsg: %v", err)
	}
	uc.SetReadDeadline(time.Now().Add(10 * time.Second))
	answer, err := bufio.NewReader(uc).ReadString('\n')
	if err != nil {
		t.Fatalf("no answer on the socket: %v", err)
	}
	uc.SetReadDeadline(time.Time{})
	return uc, answer
}

const stdioLine = `{"jsonrpc":"2.0","id":"b","method":"connection.stdio","params":{}}` + "\n"

// stdioPipes is a client's side of a connection moved to two pipes: what the
// daemon writes is read from r, requests are written to w.
type stdioPipes struct {
	r, w *os.File
}

func (p stdioPipes) Read(b []byte) (int, error)       { return p.r.Read(b) }
func (p stdioPipes) Write(b []byte) (int, error)      { return p.w.Write(b) }
func (p stdioPipes) Close() error                     { p.w.Close(); return p.r.Close() }
func (p stdioPipes) LocalAddr() net.Addr              { return &net.UnixAddr{Net: "unix"} }
func (p stdioPipes) RemoteAddr() net.Addr             { return &net.UnixAddr{Net: "unix"} }
func (p stdioPipes) SetDeadline(time.Time) error      { return nil }
func (p stdioPipes) SetReadDeadline(time.Time) error  { return nil }
func (p stdioPipes) SetWriteDeadline(time.Time) error { return nil }

// moveToPipes hands a fresh connection two pipes with connection.stdio and
// returns the socket and the client's side of the pipes.
func moveToPipes(t *testing.T, d *testDaemon) (*net.UnixConn, stdioPipes) {
	t.Helper()
	reqR, reqW := testutil.Pipe(t)
	outR, outW := testutil.Pipe(t)
	uc, answer := handOver(t, d, stdioLine, reqR, outW)
	if answer != `{"jsonrpc":"2.0","id":"b","result":{}}`+"\n" {
		t.Fatalf("answer on the socket: %q", answer)
	}
	reqR.Close() // the daemon holds its own copies now, as a bridge lets go of its own
	outW.Close()
	return uc, stdioPipes{r: outR, w: reqW}
}

// A connection whose first request is connection.stdio, with two pipes
// passed, is served on the pipes from the answer on: requests (each checked
// for the token as on the socket), responses and binary frames; the socket
// says nothing more, and its end (the bridge gone) ends the connection.
func TestConnectionStdio(t *testing.T) {
	d := startDaemon(t, Config{})
	if caps := d.dial().result("server.capabilities", "{}"); !strings.Contains(caps, `"`+wire.FeatureConnectionStdio+`"`) {
		t.Fatalf("capabilities do not name %s: %s", wire.FeatureConnectionStdio, caps)
	}
	uc, pc := moveToPipes(t, d)
	c := d.newRawClient(pc)
	c.wantResult("server.ping", "{}", `{"pong":true}`)
	c.send(`{"jsonrpc":"2.0","id":"noauth","method":"server.ping"}` + "\n")
	if got := string(c.respFor(`"noauth"`)); !strings.Contains(got, `"code":-32001`) {
		t.Fatalf("a request without the token through the pipes: %s", got)
	}
	c.wantResult("connection.binaryFrames", "{}", "{}")
	const n = 3<<20 + 5 // many frames, past the pipe's size
	res := c.result("process.spawn", shParams("big", "head -c 3145733 /dev/zero | tr '\\0' x; echo done >&2"))
	if res != `{"success":true}` {
		t.Fatalf("spawn: %s", res)
	}
	frames := c.waitExit("big")
	out := output(frames, wire.Stdout)
	if len(out) != n || strings.Trim(string(out), "x") != "" || string(output(frames, wire.Stderr)) != "done\n" {
		t.Fatalf("stdout %d bytes (want %d x), stderr %q", len(out), n, output(frames, wire.Stderr))
	}
	checkSeqs(t, frames, 1)
	// The bridge exits: the connection ends, and the pipes say so.
	uc.Close()
	c.waitClosed(10 * time.Second)
}

// A client that is done sending (ssh's stdin ended) still gets every
// answer; then the daemon ends the connection, on the pipes and the socket
// alike, so that the bridge exits and sshd ends the session.
func TestConnectionStdioHalfClose(t *testing.T) {
	d := startDaemon(t, Config{})
	uc, pc := moveToPipes(t, d)
	c := d.newRawClient(pc)
	id := c.sendRequest("process.spawn", shParams("late", "sleep 0.3; echo late"))
	pc.w.Close()
	if got := string(c.respFor(strconv.Itoa(id))); !strings.Contains(got, `"result":{"success":true}`) {
		t.Fatalf("spawn after the client's end of input: %s", got)
	}
	c.waitClosed(10 * time.Second)
	uc.SetReadDeadline(time.Now().Add(10 * time.Second))
	if n, err := uc.Read(make([]byte, 1)); n != 0 || err != io.EOF {
		t.Fatalf("the socket after the connection ended: %d bytes, %v (want EOF)", n, err)
	}
}

// connection.stdio is refused, and the connection stays on the socket, when
// the descriptors do not fit or anything followed the request; it is only
// the first line's (later, it is refused, after the token check);
// and a daemon with it disabled answers as one from before it: the request
// has no token.
func TestConnectionStdioRefused(t *testing.T) {
	d := startDaemon(t, Config{})
	reqR, _ := testutil.Pipe(t)
	_, outW := testutil.Pipe(t)
	file, err := os.Create(t.TempDir() + "/f")
	if err != nil {
		t.Fatal(err)
	}
	defer file.Close()
	for _, tc := range []struct {
		name  string
		line  string
		files []*os.File
		want  string
	}{
		{"one descriptor", stdioLine, []*os.File{reqR}, "1 descriptors passed with the request; want 2"},
		{"a regular file", stdioLine, []*os.File{reqR, file}, "descriptor 1 is not a pipe or socket open for writing"},
		{"the wrong way round", stdioLine, []*os.File{outW, reqR}, "descriptor 0 is not a pipe or socket open for reading"},
		{"bytes after it", stdioLine + `{"jsonrpc":"2.0","id":"extra","method":"server.ping"}` + "\n", []*os.File{reqR, outW}, "nothing may follow the request"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			uc, answer := handOver(t, d, tc.line, tc.files...)
			if !strings.Contains(answer, `"code":-32602`) || !strings.Contains(answer, tc.want) {
				t.Fatalf("answer %q, want -32602 saying %q", answer, tc.want)
			}
			c := d.newRawClient(uc) // still the socket's
			c.wantResult("server.ping", "{}", `{"pong":true}`)
		})
	}
	t.Run("not first", func(t *testing.T) {
		c := d.dial()
		c.wantResult("server.ping", "{}", `{"pong":true}`)
		c.wantError("connection.stdio", "{}", wire.CodeInvalidParams, "connection.stdio: only as the first request of a Unix-socket connection, with two descriptors passed")
	})
	t.Run("disabled", func(t *testing.T) {
		old := startDaemon(t, Config{DisableFeatures: []string{wire.FeatureConnectionStdio}})
		if caps := old.dial().result("server.capabilities", "{}"); strings.Contains(caps, wire.FeatureConnectionStdio) {
			t.Fatalf("a disabled connection.stdio is advertised: %s", caps)
		}
		r, _ := testutil.Pipe(t)
		_, w := testutil.Pipe(t)
		uc, answer := handOver(t, old, stdioLine, r, w)
		want := fmt.Sprintf(`{"jsonrpc":"2.0","id":"b","error":{"code":%d,"message":%s}}`+"\n", wire.CodeUnauthorized, wire.QuoteID(wire.MsgUnauthorized))
		if answer != want {
			t.Fatalf("answer %q, want the refusal of a request without the token", answer)
		}
		c := old.newRawClient(uc)
		c.wantResult("server.ping", "{}", `{"pong":true}`)
		c.wantError("connection.stdio", "{}", wire.CodeMethodNotFound, "Unknown method: connection.stdio")
	})
}
