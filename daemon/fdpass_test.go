package daemon

import (
	"bytes"
	"fmt"
	"io"
	"net"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/seed5ad92d46/sous/daemon/wire"
	"github.com/seed5ad92d46/sous/internal/testutil"
)

// requestPassing sends one request whose line carries files (SCM_RIGHTS),
// as a client passing a spawn's mirror does, and returns the response.
func (c *rawClient) requestPassing(method, params string, files ...*os.File) []byte {
	c.t.Helper()
	c.mu.Lock()
	c.nextID++
	id := c.nextID
	c.mu.Unlock()
	line := fmt.Sprintf(`{"jsonrpc":"2.0","id":%d,"method":%q,"params":%s,"auth":%s}`+"\n", id, method, params, wire.QuoteID(testToken))
	fds := make([]int, len(files))
	for i, f := range files {
		fds[i] = int(f.Fd())
	}
	if _, _, err := c.nc.(*net.UnixConn).WriteMsgUnix([]byte(line), unix.UnixRights(fds...), nil); err != nil {
		c.t.Fatalf("sendmsg: %v", err)
	}
	return c.respFor(strconv.Itoa(id))
}

// The spawner's pipes receive the output; its connection gets each output
// frame's seq marked "mirrored", without the data; another connection
// following the same process gets the frames whole.
func TestSpawnMirrorOverUnixSocket(t *testing.T) {
	d := startDaemon(t, Config{})
	c := d.dial()
	outR, outW := testutil.Pipe(t)
	errR, errW := testutil.Pipe(t)
	const n = 300000 // several frames per stream
	script := `head -c ` + strconv.Itoa(n) + ` /dev/zero | tr '\0' o; head -c ` + strconv.Itoa(n) + ` /dev/zero | tr '\0' e >&2`
	params := fmt.Sprintf(`{"id":"m","command":"sh","args":["-c",%q],"mirror":["stdout","stderr"]}`, script)
	if resp := c.requestPassing("process.spawn", params, outW, errW); !bytes.Contains(resp, []byte(`"success":true`)) {
		t.Fatalf("spawn: %s", resp)
	}
	outW.Close()
	errW.Close()
	// The pipes push back as pipes do: read them while the child writes.
	got := make([]chan string, 2)
	for i, r := range []*os.File{outR, errR} {
		got[i] = make(chan string, 1)
		go func() { b, _ := io.ReadAll(r); got[i] <- string(b) }()
	}
	frames := c.waitExit("m")
	if code := exitCodeOf(frames); code != 0 {
		t.Fatalf("exit code %d", code)
	}
	for _, raw := range c.rawFrames("m") {
		if bytes.Contains(raw, []byte(`"exit"`)) {
			continue
		}
		if !bytes.Contains(raw, []byte(`,"mirrored":true}`)) || bytes.Contains(raw, []byte(`"data"`)) {
			t.Fatalf("the spawner's frame is not a data-less mirrored one: %s", raw)
		}
	}
	checkSeqs(t, frames, 1)
	// The daemon's copies of the pipes close once the output is read, so
	// the readers see their ends now that the test's copies are closed.
	for i, want := range []string{strings.Repeat("o", n), strings.Repeat("e", n)} {
		select {
		case b := <-got[i]:
			if b != want {
				t.Errorf("pipe %d got %d bytes, want %d", i, len(b), len(want))
			}
		case <-time.After(10 * time.Second):
			t.Fatalf("pipe %d: no end after the exit", i)
		}
	}

	other := d.dial()
	other.result("process.reattach", `{"id":"m","fromSeq":0}`)
	replay := other.waitExit("m")
	if out := output(replay, wire.Stdout); string(out) != strings.Repeat("o", n) {
		t.Errorf("another connection's replay: %d bytes of stdout, want %d", len(out), n)
	}
	if errOut := output(replay, wire.Stderr); string(errOut) != strings.Repeat("e", n) {
		t.Errorf("another connection's replay: %d bytes of stderr, want %d", len(errOut), n)
	}
	for _, raw := range other.rawFrames("m") {
		if bytes.Contains(raw, []byte("mirrored")) {
			t.Fatalf("a frame marked mirrored reached a connection that passed no mirror: %s", raw)
		}
	}
}

// When the spawner's connection closes, the daemon lets go of its pipes at
// once: their reader sees the end although the child runs on, and the
// child's output goes on into the log.
func TestSpawnMirrorDetachedWhenTheConnectionCloses(t *testing.T) {
	d := startDaemon(t, Config{})
	c := d.dial()
	outR, outW := testutil.Pipe(t)
	params := `{"id":"long","command":"sh","args":["-c","echo first; sleep 0.5; echo second; exec sleep 30"],"mirror":["stdout"]}`
	if resp := c.requestPassing("process.spawn", params, outW); !bytes.Contains(resp, []byte(`"success":true`)) {
		t.Fatalf("spawn: %s", resp)
	}
	outW.Close()
	line := make([]byte, 6)
	if _, err := io.ReadFull(outR, line); err != nil || string(line) != "first\n" {
		t.Fatalf("mirror: %q %v", line, err)
	}
	c.nc.Close()
	done := make(chan []byte)
	go func() { rest, _ := io.ReadAll(outR); done <- rest }()
	select {
	case rest := <-done:
		if len(rest) != 0 {
			t.Errorf("after the close the mirror still got %q", rest)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("the mirror's reader saw no end after the spawner's connection closed")
	}
	other := d.dial()
	other.result("process.reattach", `{"id":"long","fromSeq":0}`)
	other.waitFor("second line in the log", 10*time.Second, func() bool {
		var out []byte
		var f wire.Frame
		for _, raw := range other.frames["long"] {
			wire.ParseFrame(raw, &f)
			out = append(out, f.Data...)
		}
		return string(out) == "first\nsecond\n"
	})
	other.result("process.kill", `{"id":"long","signal":"SIGKILL"}`)
	other.waitExit("long")
}

// A mirror must come with its descriptors, each a pipe; descriptors passed
// with any other request (or more than a spawn could use) are closed.
func TestSpawnMirrorRefusals(t *testing.T) {
	d := startDaemon(t, Config{})
	c := d.dial()
	_, w := testutil.Pipe(t)
	file, err := os.Create(filepath.Join(t.TempDir(), "f"))
	if err != nil {
		t.Fatal(err)
	}
	defer file.Close()
	spawn := func(id, mirror string) string {
		return fmt.Sprintf(`{"id":%q,"command":"true","mirror":%s}`, id, mirror)
	}
	// Once first, so that what the daemon opens for good on a first spawn
	// request is not counted below.
	c.requestPassing("process.spawn", spawn("r", `["stdout"]`))
	for _, tc := range []struct {
		name, mirror string
		files        []*os.File
		want         string
	}{
		{"no descriptors", `["stdout"]`, nil, "mirror: 1 streams named but 0 descriptors passed with the request (they travel as SCM_RIGHTS over a Unix socket)"},
		{"fewer than named", `["stdout","stderr"]`, []*os.File{w}, "mirror: 2 streams named but 1 descriptors passed with the request (they travel as SCM_RIGHTS over a Unix socket)"},
		{"not a pipe", `["stdout"]`, []*os.File{file}, "mirror: the descriptor for stdout is not a pipe"},
		{"unknown stream", `["exit"]`, []*os.File{w}, `mirror: unknown stream "exit" (want stdout or stderr)`},
		{"twice", `["stdout","stdout"]`, []*os.File{w, w}, "mirror: stdout named twice"},
		{"three", `["stdout","stderr","stdout"]`, []*os.File{w, w, w}, "mirror: at most stdout and stderr"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			before := testutil.OpenFDs(t)
			resp := c.requestPassing("process.spawn", spawn("r", tc.mirror), tc.files...)
			if !bytes.Contains(resp, []byte(`"code":-32602`)) || !bytes.Contains(resp, wire.QuoteID(tc.want)) {
				t.Errorf("got %s, want -32602 %q", resp, tc.want)
			}
			waitOpenFDs(t, before)
		})
	}
	t.Run("passed with a ping", func(t *testing.T) {
		before := testutil.OpenFDs(t)
		many := []*os.File{w, w, w, w, w, w, w, w, w, w}
		if resp := c.requestPassing("server.ping", "{}", many...); !bytes.Contains(resp, []byte(`"pong":true`)) {
			t.Fatalf("ping: %s", resp)
		}
		waitOpenFDs(t, before)
	})
	c.result("server.ping", "{}") // the connection is still good
}

// waitOpenFDs waits for this process (which holds the daemon) to have want
// descriptors open again: the daemon closes what it received and did not use.
func waitOpenFDs(t *testing.T, want int) {
	t.Helper()
	deadline := time.Now().Add(5 * time.Second)
	for {
		n := testutil.OpenFDs(t)
		if n <= want {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("%d descriptors open, want %d: the daemon kept passed ones", n, want)
		}
		time.Sleep(10 * time.Millisecond)
	}
}
