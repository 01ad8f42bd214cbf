package daemon

import (
	"bytes"
	"crypto/rand"
	"os"
	"path/filepath"
	"strconv"
	"testing"
	"time"

	"github.com/seed5ad92d46/sous/daemon/wire"
)

// randomFiles writes files of random bytes of the given sizes into a new
// directory, named f0, f1, ..., and returns the directory and their contents.
func randomFiles(t *testing.T, sizes ...int) (string, [][]byte) {
	t.Helper()
	dir := t.TempDir()
	out := make([][]byte, len(sizes))
	for i, n := range sizes {
		out[i] = make([]byte, n)
		rand.Read(out[i])
		if err := os.WriteFile(filepath.Join(dir, "f"+strconv.Itoa(i)), out[i], 0o600); err != nil {
			t.Fatal(err)
		}
	}
	return dir, out
}

// A connection switches to binary frames when it asks: the frames sent
// before the answer are JSON lines, every output frame after it is binary
// (its header line, then its data), the exit frame stays JSON, and the
// bytes of both streams arrive exact, in seq order, over the socket and
// over WebSocket alike.
func TestBinaryFramesSwitchMidStream(t *testing.T) {
	for _, tr := range []string{"socket", "websocket"} {
		t.Run(tr, func(t *testing.T) {
			d := startDaemonWS(t, Config{}, WebSocketOptions{})
			c := d.dial()
			if tr == "websocket" {
				c = d.dialWS()
			}
			dir, data := randomFiles(t, 1<<20+7, 700<<10, 2<<20+3, 900<<10+1)
			// Stdout and stderr interleaved around a pause, which the test
			// ends (the file go) once it has switched.
			script := `cat f0; cat f1 >&2; while [ ! -e go ]; do sleep 0.01; done; cat f2; cat f3 >&2; cat f0`
			params := mustJSON(map[string]any{"id": "b", "command": "sh", "args": []string{"-c", script}, "cwd": dir})
			c.result("process.spawn", params)
			before := len(data[0]) + len(data[1])
			c.waitFor("the output before the pause", 30*time.Second, func() bool {
				n := 0
				var f wire.Frame
				for _, raw := range c.frames["b"] {
					parseStoredFrame(raw, &f)
					n += len(f.Data)
				}
				return n == before
			})
			c.wantResult(wire.BinaryFramesMethod, "{}", "{}")
			if err := os.WriteFile(filepath.Join(dir, "go"), nil, 0o600); err != nil {
				t.Fatal(err)
			}
			frames := c.waitExit("b")
			checkSeqs(t, frames, 1)
			if code := exitCodeOf(frames); code != 0 {
				t.Fatalf("exit code %d", code)
			}
			wantOut := append(append(append([]byte(nil), data[0]...), data[2]...), data[0]...)
			wantErr := append(append([]byte(nil), data[1]...), data[3]...)
			if out := output(frames, wire.Stdout); !bytes.Equal(out, wantOut) {
				t.Errorf("stdout: %d bytes, want %d (equal: %v)", len(out), len(wantOut), bytes.Equal(out, wantOut))
			}
			if errOut := output(frames, wire.Stderr); !bytes.Equal(errOut, wantErr) {
				t.Errorf("stderr: %d bytes, want %d", len(errOut), len(wantErr))
			}
			// In the order they came: JSON until the answer, binary after.
			c.mu.Lock()
			all := append([][]byte(nil), c.all...)
			c.mu.Unlock()
			answered, jsonFrames, binFrames := false, 0, 0
			for _, raw := range all {
				switch {
				case bytes.HasPrefix(raw, []byte(`{"jsonrpc":"2.0","id":2,"result":{}}`)):
					answered = true
				case !bytes.Contains(raw, []byte(`"processId":"b"`)):
				case bytes.Contains(raw, []byte(`"stream":"exit"`)) && !isBinaryFrame(raw):
					if bytes.Contains(raw, []byte("data")) {
						t.Errorf("exit frame %s", raw)
					}
				case !answered:
					jsonFrames++
					if isBinaryFrame(raw) {
						t.Fatalf("a binary frame before the switch's answer: %.100q", raw)
					}
				default:
					binFrames++
					if !isBinaryFrame(raw) {
						t.Fatalf("a JSON frame after the switch's answer: %.100q", raw)
					}
				}
			}
			if !answered || jsonFrames == 0 || binFrames == 0 {
				t.Fatalf("answered %v, %d JSON frames, %d binary ones", answered, jsonFrames, binFrames)
			}
			if ws, ok := c.nc.(*wsLineConn); ok && ws.binary.Load() != int64(binFrames) {
				t.Errorf("%d binary messages for %d binary frames", ws.binary.Load(), binFrames)
			}
		})
	}
}

// Replay and reattach in binary: a process's whole log (spilled to disk
// past a small memory window) and a tail of it, from a seq, come back to
// a binary connection exact, every output frame binary.
func TestBinaryFramesReplay(t *testing.T) {
	d := startDaemon(t, Config{ReplayMemLimit: 256 << 10, StateDir: t.TempDir()})
	dir, data := randomFiles(t, 3<<20+11, 1<<20+5)
	spawner := d.dial()
	spawner.result("process.spawn", mustJSON(map[string]any{"id": "r", "command": "sh", "args": []string{"-c", "cat f0; cat f1 >&2; cat f0"}, "cwd": dir}))
	orig := spawner.waitExit("r")
	wantOut := append(append([]byte(nil), data[0]...), data[0]...)
	if out := output(orig, wire.Stdout); !bytes.Equal(out, wantOut) {
		t.Fatalf("the spawner's stdout: %d bytes, want %d", len(out), len(wantOut))
	}
	for _, from := range []int64{0, int64(len(orig) / 2)} {
		c := d.dial()
		c.wantResult(wire.BinaryFramesMethod, "{}", "{}")
		c.result("process.reattach", `{"id":"r","fromSeq":`+strconv.FormatInt(from, 10)+`}`)
		replay := c.waitExit("r")
		checkSeqs(t, replay, from+1)
		want := orig[from:]
		for i := range want {
			if replay[i].Seq != want[i].Seq || replay[i].Stream != want[i].Stream || !bytes.Equal(replay[i].Data, want[i].Data) {
				t.Fatalf("from %d: frame %d is seq %d %v %d bytes, want seq %d %v %d bytes", from, i,
					replay[i].Seq, replay[i].Stream, len(replay[i].Data), want[i].Seq, want[i].Stream, len(want[i].Data))
			}
		}
		for _, raw := range c.rawFrames("r") {
			if isBinaryFrame(raw) == bytes.Contains(raw, []byte(`"stream":"exit"`)) {
				t.Fatalf("from %d: %.100q", from, raw)
			}
		}
	}
}

// A daemon with the extension disabled neither advertises nor answers it,
// and its frames stay JSON.
func TestBinaryFramesDisabled(t *testing.T) {
	d := startDaemon(t, Config{DisableFeatures: []string{wire.FeatureBinaryFrames}})
	c := d.dial()
	caps := c.result("server.capabilities", "")
	if bytes.Contains([]byte(caps), []byte(wire.FeatureBinaryFrames)) {
		t.Errorf("capabilities name the disabled extension: %s", caps)
	}
	c.wantError(wire.BinaryFramesMethod, "{}", wire.CodeMethodNotFound, "Unknown method: connection.binaryFrames")
	c.result("process.spawn", shParams("j", "head -c 100000 /dev/urandom"))
	c.waitExit("j")
	for _, raw := range c.rawFrames("j") {
		if isBinaryFrame(raw) {
			t.Fatalf("a binary frame from a daemon without the extension: %.100q", raw)
		}
	}
}
