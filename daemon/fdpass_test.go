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

	"github.com/seed5ad92d46/sous/daemon/proc"
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
	t.Run("json", func(t *testing.T) { checkSpawnMirror(t, false) })
	// Binary frames change nothing for mirrored frames, which carry no
	// data: they stay JSON lines (binframes.go).
	t.Run("binary", func(t *testing.T) { checkSpawnMirror(t, true) })
}

func checkSpawnMirror(t *testing.T, binary bool) {
	d := startDaemon(t, Config{})
	c := d.dial()
	if binary {
		c.wantResult("connection.binaryFrames", "{}", "{}")
	}
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
	if binary {
		other.wantResult("connection.binaryFrames", "{}", "{}")
	}
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
// child's output goes on into the log. A reattach with "mirrored":true gets
// the marks the spawner's connection would have.
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
	// The spawner, back on a new connection, claims the marks: what went
	// to its pipe comes marked and without data, the rest whole.
	back := d.dial()
	back.result("process.reattach", `{"id":"long","fromSeq":0,"mirrored":true}`)
	back.waitFor("both lines", 10*time.Second, func() bool { return len(back.frames["long"]) >= 2 })
	for i, raw := range back.rawFrames("long")[:2] {
		if marked := bytes.Contains(raw, []byte(`"mirrored":true`)) && !bytes.Contains(raw, []byte(`"data"`)); marked != (i == 0) {
			t.Errorf("frame %d to the returning spawner (marked: %v, want %v): %s", i+1, marked, i == 0, raw)
		}
	}
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
	sock, sockPeer := socketPair(t)
	defer sockPeer.Close()
	readOnly, err := os.Open(file.Name())
	if err != nil {
		t.Fatal(err)
	}
	defer readOnly.Close()
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
		{"a socket", `["stdout"]`, []*os.File{sock}, "mirror: the descriptor for stdout is not a pipe, a regular file open for writing or the null device"},
		{"a read-only file", `["stderr"]`, []*os.File{readOnly}, "mirror: the descriptor for stderr is not a pipe, a regular file open for writing or the null device"},
		{"unknown stream", `["exit"]`, []*os.File{w}, `mirror: unknown stream "exit" (want stdout, stderr or stdin)`},
		{"twice", `["stdout","stdout"]`, []*os.File{w, w}, "mirror: stdout named twice"},
		{"four", `["stdout","stderr","stdin","stdout"]`, []*os.File{w, w, w, w}, "mirror: at most stdout, stderr and stdin"},
		{"stdin write-only", `["stdin"]`, []*os.File{w}, "mirror: the descriptor for stdin is not a pipe or regular file open for reading"},
		{"stdin a socket", `["stdin"]`, []*os.File{sock}, "mirror: the descriptor for stdin is not a pipe or regular file open for reading"},
		{"direct read-only", `["stderr"],"direct":true`, []*os.File{readOnly}, "mirror: the descriptor for stderr is not a pipe or regular file open for writing"},
		{"direct a socket", `["stdout"],"direct":true`, []*os.File{sock}, "mirror: the descriptor for stdout is not a pipe or regular file open for writing"},
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
	t.Run("stdin to a terminal", func(t *testing.T) {
		r, _ := testutil.Pipe(t)
		before := testutil.OpenFDs(t)
		resp := c.requestPassing("process.spawn", `{"id":"r","command":"cat","tty":true,"mirror":["stdin"]}`, r)
		want := "mirror: a terminal's child reads and writes its terminal: its stdio cannot be passed to it"
		if !bytes.Contains(resp, []byte(`"code":-32602`)) || !bytes.Contains(resp, wire.QuoteID(want)) {
			t.Errorf("got %s, want -32602 %q", resp, want)
		}
		waitOpenFDs(t, before)
	})
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

func socketPair(t *testing.T) (*os.File, *os.File) {
	t.Helper()
	fds, err := unix.Socketpair(unix.AF_UNIX, unix.SOCK_STREAM|unix.SOCK_CLOEXEC, 0)
	if err != nil {
		t.Fatal(err)
	}
	return os.NewFile(uintptr(fds[0]), "sock0"), os.NewFile(uintptr(fds[1]), "sock1")
}

// With process.spawn.mirror.stdin the passed descriptor is the child's
// stdin itself, a pipeline's first stage's too: the child reads what the
// spawner's pipe or file holds, to its end; process.stdin refuses data and
// closing it changes nothing; the daemon keeps no copy once the child has
// started.
func TestSpawnMirrorStdin(t *testing.T) {
	d := startDaemon(t, Config{})
	c := d.dial()
	c.requestPassing("process.spawn", `{"id":"warm","command":"true","mirror":["stdout"]}`) // refused; see TestSpawnMirrorRefusals

	t.Run("pipe", func(t *testing.T) {
		r, w := testutil.Pipe(t)
		before := testutil.OpenFDs(t)
		params := `{"id":"in","command":"sh","args":["-c","ls -l /proc/self/fd/0 >&2; cat"],"mirror":["stdin"]}`
		if resp := c.requestPassing("process.spawn", params, r); !bytes.Contains(resp, []byte(`"success":true`)) {
			t.Fatalf("spawn: %s", resp)
		}
		r.Close()
		before-- // the test's copy of r
		resp := c.request("process.stdin", `{"id":"in","data":"aGkK","offset":0}`)
		if !bytes.Contains(resp, []byte(`"code":-32602`)) || !bytes.Contains(resp, wire.QuoteID(proc.MsgStdinPassed)) {
			t.Errorf("process.stdin with data: %s", resp)
		}
		if got := c.result("process.stdin", `{"id":"in","data":"","close":true}`); !strings.Contains(got, `"success":true`) {
			t.Errorf("process.stdin close: %s", got)
		}
		io.WriteString(w, "through the pipe\n")
		w.Close()
		before--
		frames := c.waitExit("in")
		if got := string(output(frames, wire.Stdout)); got != "through the pipe\n" {
			t.Errorf("stdout %q", got)
		}
		if code := exitCodeOf(frames); code != 0 {
			t.Errorf("exit code %d; stderr %s", code, output(frames, wire.Stderr))
		}
		if !bytes.Contains(output(frames, wire.Stderr), []byte("pipe:[")) {
			t.Errorf("the child's stdin is not the pipe: %s", output(frames, wire.Stderr))
		}
		waitOpenFDs(t, before)
	})
	t.Run("file into a pipeline", func(t *testing.T) {
		path := filepath.Join(t.TempDir(), "in")
		if err := os.WriteFile(path, []byte("from a file\n"), 0o600); err != nil {
			t.Fatal(err)
		}
		f, err := os.Open(path)
		if err != nil {
			t.Fatal(err)
		}
		params := `{"id":"pl","pipeline":[["cat"],["tr","a-z","A-Z"]],"mirror":["stdin"]}`
		if resp := c.requestPassing("process.spawn", params, f); !bytes.Contains(resp, []byte(`"success":true`)) {
			t.Fatalf("spawn: %s", resp)
		}
		f.Close()
		frames := c.waitExit("pl")
		if got := string(output(frames, wire.Stdout)); got != "FROM A FILE\n" {
			t.Errorf("stdout %q", got)
		}
	})
}

// With process.spawn.mirror.stdin disabled, "stdin" is a stream the mirror
// does not know, and nothing starts.
func TestSpawnMirrorStdinDisabled(t *testing.T) {
	d := startDaemon(t, Config{DisableFeatures: []string{wire.FeatureSpawnMirrorStdin}})
	c := d.dial()
	r, _ := testutil.Pipe(t)
	resp := c.requestPassing("process.spawn", `{"id":"in","command":"cat","mirror":["stdin"]}`, r)
	want := `mirror: unknown stream "stdin" (want stdout or stderr)`
	if !bytes.Contains(resp, []byte(`"code":-32602`)) || !bytes.Contains(resp, wire.QuoteID(want)) {
		t.Errorf("got %s, want -32602 %q", resp, want)
	}
	if got := c.result("process.list", `{}`); strings.Contains(got, `"in"`) {
		t.Errorf("the refused spawn started: %s", got)
	}
}

// Without process.spawn.mirror.files, a regular file is refused as output
// to mirror, as before the extension: only a pipe can be teed to.
func TestSpawnMirrorFilesDisabled(t *testing.T) {
	d := startDaemon(t, Config{DisableFeatures: []string{wire.FeatureSpawnMirrorFiles}})
	c := d.dial()
	file, err := os.Create(filepath.Join(t.TempDir(), "f"))
	if err != nil {
		t.Fatal(err)
	}
	defer file.Close()
	resp := c.requestPassing("process.spawn", `{"id":"f","command":"true","mirror":["stdout"]}`, file)
	want := "mirror: the descriptor for stdout is not a pipe"
	if !bytes.Contains(resp, []byte(`"code":-32602`)) || !bytes.Contains(resp, wire.QuoteID(want)) {
		t.Errorf("got %s, want -32602 %q", resp, want)
	}
}

// With "direct" (process.spawn.mirror.direct) the passed stdout and stderr
// are the child's own, a pipeline's too: the bytes reach them without the
// daemon reading them, so no connection gets frames of them, only the
// exit; the daemon keeps no copy once the child has started.
func TestSpawnMirrorDirect(t *testing.T) {
	d := startDaemon(t, Config{})
	c := d.dial()
	c.requestPassing("process.spawn", `{"id":"warm","command":"true","mirror":["stdout"]}`) // refused; see TestSpawnMirrorRefusals
	for _, tc := range []struct{ name, spawn, wantOut, wantErr string }{
		{"command", `"command":"sh","args":["-c","echo out; echo err >&2; readlink /proc/self/fd/1"]`, "out\n", "err\n"},
		{"pipeline", `"pipeline":[["sh","-c","echo one >&2; echo data"],["sh","-c","echo two >&2; tr a-z A-Z"]]`, "DATA\n", ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r, w := testutil.Pipe(t)
			file, err := os.Create(filepath.Join(t.TempDir(), "stderr"))
			if err != nil {
				t.Fatal(err)
			}
			defer file.Close()
			before := testutil.OpenFDs(t)
			id := "direct-" + tc.name // each subtest its own: the connection keeps every id's frames
			params := `{"id":"` + id + `",` + tc.spawn + `,"mirror":["stdout","stderr"],"direct":true}`
			if resp := c.requestPassing("process.spawn", params, w, file); !bytes.Contains(resp, []byte(`"success":true`)) {
				t.Fatalf("spawn: %s", resp)
			}
			w.Close()
			before--
			out, _ := io.ReadAll(r) // the end comes once the child and the daemon let go
			frames := c.waitExit(id)
			if len(frames) != 1 || exitCodeOf(frames) != 0 {
				t.Errorf("frames %+v, want only an exit 0", frames)
			}
			if !strings.HasPrefix(string(out), tc.wantOut) {
				t.Errorf("stdout pipe got %q, want it to start with %q", out, tc.wantOut)
			}
			errOut, _ := os.ReadFile(file.Name())
			if !strings.HasPrefix(string(errOut), tc.wantErr) {
				t.Errorf("stderr file got %q, want it to start with %q", errOut, tc.wantErr)
			}
			if tc.name == "pipeline" && (!bytes.Contains(errOut, []byte("one\n")) || !bytes.Contains(errOut, []byte("two\n"))) {
				t.Errorf("the stages' stderr: %q", errOut)
			}
			if tc.name == "command" && !bytes.Contains(out, []byte("pipe:[")) {
				t.Errorf("the child's stdout is not the pipe: %q", out)
			}
			waitOpenFDs(t, before)
			other := d.dial()
			other.result("process.reattach", `{"id":"`+id+`","fromSeq":0}`)
			if replay := other.waitExit(id); len(replay) != 1 {
				t.Errorf("replay %+v, want only the exit", replay)
			}
		})
	}
}
