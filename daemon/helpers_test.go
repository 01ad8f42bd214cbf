package daemon

import (
	"bufio"
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"path/filepath"
	"runtime"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/seed5ad92d46/sous/daemon/wire"
	"github.com/seed5ad92d46/sous/internal/testutil"
)

const testToken = "s3cret token"

// testDaemon is a real daemon serving a real Unix socket in a temp dir (and
// a WebSocket endpoint on loopback, when started by startDaemonWS).
type testDaemon struct {
	t     *testing.T
	srv   *Server
	sock  string
	wsURL string     // ws://127.0.0.1:PORT/ when serving WebSocket
	done  chan error // Serve's result
}

// startDaemon starts a daemon with cfg (Token defaults to testToken) and
// closes it when the test ends.
func startDaemon(t *testing.T, cfg Config) *testDaemon {
	t.Helper()
	if cfg.Token == "" {
		cfg.Token = testToken
	}
	if cfg.ShutdownGrace == 0 {
		cfg.ShutdownGrace = 500 * time.Millisecond
	}
	srv, err := New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	// Unix socket paths are short; t.TempDir() can be long, so use a short dir.
	dir := testutil.ShortTempDir(t)
	sock := filepath.Join(dir, "s")
	ln, err := ListenUnix(sock)
	if err != nil {
		t.Fatal(err)
	}
	d := &testDaemon{t: t, srv: srv, sock: sock, done: make(chan error, 1)}
	go func() { d.done <- srv.Serve(ln) }()
	t.Cleanup(func() { srv.Close() })
	return d
}

// rawClient speaks NDJSON over a real socket. A reader goroutine sorts
// incoming lines into responses (by id) and stream frames (by process id),
// keeping their exact bytes.
type rawClient struct {
	t  *testing.T
	nc net.Conn

	mu       sync.Mutex
	cond     *sync.Cond
	resps    [][]byte            // responses in arrival order
	frames   map[string][][]byte // raw frame lines per process id
	all      [][]byte            // every line, in order
	readErr  error               // set when the connection ended
	nextID   int
	readDone chan struct{}
}

func (d *testDaemon) dial() *rawClient {
	d.t.Helper()
	nc, err := net.Dial("unix", d.sock)
	if err != nil {
		d.t.Fatal(err)
	}
	return d.newRawClient(nc)
}

// newRawClient reads lines from nc (the socket, or a WebSocket seen as
// lines: see wsLineConn) until the test ends.
func (d *testDaemon) newRawClient(nc net.Conn) *rawClient {
	c := &rawClient{t: d.t, nc: nc, frames: make(map[string][][]byte), readDone: make(chan struct{})}
	c.cond = sync.NewCond(&c.mu)
	go c.readLoop()
	d.t.Cleanup(func() { nc.Close(); <-c.readDone })
	return c
}

func (c *rawClient) readLoop() {
	defer close(c.readDone)
	r := bufio.NewReaderSize(c.nc, 1<<20)
	var f wire.Frame
	for {
		line, err := r.ReadBytes('\n')
		if err != nil {
			c.mu.Lock()
			c.readErr = err
			if len(line) > 0 {
				c.all = append(c.all, line) // a partial line is a bug; keep it for the report
			}
			c.cond.Broadcast()
			c.mu.Unlock()
			return
		}
		c.mu.Lock()
		if wire.IsFrameLine(line) {
			// A binary frame (connection.binaryFrames) is kept as it came:
			// its header line and its data.
			id, n, perr := wire.ParseFrameHeader(line, &f)
			if perr == nil && n >= 0 {
				line = append(line, make([]byte, n)...)
				if _, err := io.ReadFull(r, line[len(line)-n:]); err != nil {
					c.readErr = fmt.Errorf("within a binary frame's data: %w", err)
					c.cond.Broadcast()
					c.mu.Unlock()
					return
				}
			}
			if perr != nil {
				c.t.Errorf("bad frame %q: %v", line, perr)
			}
			c.all = append(c.all, line)
			c.frames[string(id)] = append(c.frames[string(id)], line)
		} else {
			c.all = append(c.all, line)
			c.resps = append(c.resps, line)
		}
		c.cond.Broadcast()
		c.mu.Unlock()
	}
}

// send writes raw bytes.
func (c *rawClient) send(s string) {
	c.t.Helper()
	if _, err := io.WriteString(c.nc, s); err != nil {
		c.t.Fatalf("write: %v", err)
	}
}

// waitFor waits until cond (called with mu held) is true or the timeout.
func (c *rawClient) waitFor(what string, timeout time.Duration, cond func() bool) {
	c.t.Helper()
	timer := time.AfterFunc(timeout, func() { c.mu.Lock(); c.cond.Broadcast(); c.mu.Unlock() })
	defer timer.Stop()
	deadline := time.Now().Add(timeout)
	c.mu.Lock()
	defer c.mu.Unlock()
	for !cond() {
		if time.Now().After(deadline) {
			c.t.Fatalf("timed out waiting for %s", what)
		}
		if c.readErr != nil {
			c.t.Fatalf("connection ended (%v) while waiting for %s", c.readErr, what)
		}
		c.cond.Wait()
	}
}

// respFor returns the exact response line whose id is the JSON text id.
func (c *rawClient) respFor(id string) []byte {
	c.t.Helper()
	var out []byte
	c.waitFor("response id "+id, 15*time.Second, func() bool {
		for i, r := range c.resps {
			var env struct{ ID json.RawMessage }
			json.Unmarshal(r, &env)
			if string(env.ID) == id {
				out = r
				c.resps = append(c.resps[:i:i], c.resps[i+1:]...)
				return true
			}
		}
		return false
	})
	return out
}

// request sends one line made of method and params (raw JSON, "" for none)
// with a fresh id and valid auth, and returns the exact response line.
func (c *rawClient) request(method, params string) []byte {
	c.t.Helper()
	id := c.sendRequest(method, params)
	return c.respFor(strconv.Itoa(id))
}

func (c *rawClient) sendRequest(method, params string) int {
	c.mu.Lock()
	c.nextID++
	id := c.nextID
	c.mu.Unlock()
	line := fmt.Sprintf(`{"jsonrpc":"2.0","id":%d,"method":%q`, id, method)
	if params != "" {
		line += `,"params":` + params
	}
	line += `,"auth":` + string(wire.QuoteID(testToken)) + "}\n"
	c.send(line)
	return id
}

// result calls method and returns the result object's exact bytes, failing
// the test on an error response.
func (c *rawClient) result(method, params string) string {
	c.t.Helper()
	line := c.request(method, params)
	var env struct {
		Result json.RawMessage
		Error  *wire.Error
	}
	if err := json.Unmarshal(line, &env); err != nil || env.Error != nil || env.Result == nil {
		c.t.Fatalf("%s %s: %s", method, params, line)
	}
	return string(env.Result)
}

// wantResult calls method and compares the whole response line byte for byte.
func (c *rawClient) wantResult(method, params, result string) {
	c.t.Helper()
	c.mu.Lock()
	id := c.nextID + 1
	c.mu.Unlock()
	got := string(c.request(method, params))
	want := fmt.Sprintf(`{"jsonrpc":"2.0","id":%d,"result":%s}`+"\n", id, result)
	if got != want {
		c.t.Errorf("%s %s:\n got %s\nwant %s", method, params, got, want)
	}
}

// wantError calls method and compares the error response byte for byte.
func (c *rawClient) wantError(method, params string, code int, msg string) {
	c.t.Helper()
	c.mu.Lock()
	id := c.nextID + 1
	c.mu.Unlock()
	got := string(c.request(method, params))
	want := fmt.Sprintf(`{"jsonrpc":"2.0","id":%d,"error":{"code":%d,"message":%s}}`+"\n", id, code, wire.QuoteID(msg))
	if got != want {
		c.t.Errorf("%s %s:\n got %s\nwant %s", method, params, got, want)
	}
}

// waitExit waits for the exit frame of process id and returns its frames.
func (c *rawClient) waitExit(id string) []wire.Frame {
	c.t.Helper()
	c.waitFor("exit of "+id, 30*time.Second, func() bool {
		fs := c.frames[id]
		return len(fs) > 0 && bytes.Contains(fs[len(fs)-1], []byte(`"stream":"exit"`))
	})
	return c.parsedFrames(id)
}

// waitFrames waits until process id has at least n frames.
func (c *rawClient) waitFrames(id string, n int) []wire.Frame {
	c.t.Helper()
	c.waitFor(fmt.Sprintf("%d frames of %s", n, id), 30*time.Second, func() bool { return len(c.frames[id]) >= n })
	return c.parsedFrames(id)
}

func (c *rawClient) parsedFrames(id string) []wire.Frame {
	c.mu.Lock()
	lines := append([][]byte(nil), c.frames[id]...)
	c.mu.Unlock()
	out := make([]wire.Frame, len(lines))
	for i, l := range lines {
		if err := parseStoredFrame(l, &out[i]); err != nil {
			c.t.Fatalf("frame %q: %v", l, err)
		}
	}
	return out
}

// parseStoredFrame parses a frame as readLoop keeps it: a JSON line, or a
// binary frame's header line and data.
func parseStoredFrame(raw []byte, f *wire.Frame) error {
	if isBinaryFrame(raw) {
		_, err := wire.ParseBinaryFrame(raw, f)
		return err
	}
	_, err := wire.ParseFrame(raw, f)
	return err
}

// isBinaryFrame reports whether a frame readLoop kept is in binary form.
func isBinaryFrame(raw []byte) bool {
	header, _, _ := bytes.Cut(raw, []byte("\n"))
	return bytes.Contains(header, []byte(`"dataBytes":`))
}

func (c *rawClient) rawFrames(id string) [][]byte {
	c.mu.Lock()
	defer c.mu.Unlock()
	return append([][]byte(nil), c.frames[id]...)
}

// resetFrames forgets the frames received so far for id.
func (c *rawClient) resetFrames(id string) {
	c.mu.Lock()
	delete(c.frames, id)
	c.mu.Unlock()
}

// waitClosed waits until the daemon closed the connection.
func (c *rawClient) waitClosed(timeout time.Duration) {
	c.t.Helper()
	select {
	case <-c.readDone:
	case <-time.After(timeout):
		c.t.Fatal("connection still open")
	}
}

// output concatenates the data of a process's stdout and stderr frames.
func output(frames []wire.Frame, s wire.Stream) []byte {
	var b []byte
	for _, f := range frames {
		if f.Stream == s {
			b = append(b, f.Data...)
		}
	}
	return b
}

// checkSeqs verifies seqs run from first by one, and that only the last frame is the exit.
func checkSeqs(t *testing.T, frames []wire.Frame, first int64) {
	t.Helper()
	for i, f := range frames {
		if f.Seq != first+int64(i) {
			t.Fatalf("frame %d has seq %d, want %d", i, f.Seq, first+int64(i))
		}
		if (f.Stream == wire.Exit) != (i == len(frames)-1) {
			t.Fatalf("frame %d (seq %d) is %v", i, f.Seq, f.Stream)
		}
		if len(f.Data) > wire.MaxFrameData {
			t.Fatalf("frame seq %d carries %d bytes", f.Seq, len(f.Data))
		}
	}
}

func exitCodeOf(frames []wire.Frame) int {
	return frames[len(frames)-1].ExitCode
}

// waitGone waits until pid is gone.
func waitGone(t *testing.T, pid int, timeout time.Duration) {
	t.Helper()
	deadline := time.Now().Add(timeout)
	for testutil.Alive(pid) {
		if time.Now().After(deadline) {
			t.Fatalf("pid %d still alive", pid)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// readPidFile waits for a file holding a pid written by a child.
func readPidFile(t *testing.T, path string) int {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for {
		b, err := os.ReadFile(path)
		if err == nil && bytes.HasSuffix(b, []byte("\n")) {
			pid, err := strconv.Atoi(string(bytes.TrimSpace(b)))
			if err != nil {
				t.Fatalf("pid file %q", b)
			}
			return pid
		}
		if time.Now().After(deadline) {
			t.Fatalf("no pid file %s", path)
		}
		time.Sleep(5 * time.Millisecond)
	}
}

// settleGoroutines waits for the goroutine count to drop to at most n.
func settleGoroutines(n int, timeout time.Duration) (int, error) {
	deadline := time.Now().Add(timeout)
	for {
		g := runtime.NumGoroutine()
		if g <= n {
			return g, nil
		}
		if time.Now().After(deadline) {
			buf := make([]byte, 1<<20)
			buf = buf[:runtime.Stack(buf, true)]
			return g, errors.New(string(buf))
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// spawnParams builds process.spawn params for a shell script.
func shParams(id, script string) string {
	b, _ := json.Marshal(map[string]any{"id": id, "command": "sh", "args": []string{"-c", script}})
	return string(b)
}

func mustJSON(v any) string {
	b, err := json.Marshal(v)
	if err != nil {
		panic(err)
	}
	return string(b)
}
