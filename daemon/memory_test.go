package daemon

import (
	"bufio"
	"bytes"
	"crypto/rand"
	"crypto/sha256"
	"fmt"
	"hash"
	"io"
	"net"
	"os"
	"path/filepath"
	"runtime"
	"testing"
	"time"

	"github.com/seed5ad92d46/sous/daemon/wire"
	"github.com/seed5ad92d46/sous/internal/testutil"
)

// streamSummary is what a streaming read of one process's frames saw.
type streamSummary struct {
	resps    [][]byte // response lines, in order
	first    int64    // seq of the first frame
	frames   int
	bytes    int64
	sum      [32]byte // sha256 of stdout
	exitCode int
}

// collectStream reads the connection until the exit frame of id, checking
// that seqs are contiguous and frames are within the size cap, hashing
// stdout as it goes (nothing is kept). pause, when set, runs after each
// frame, to model a slow reader.
func collectStream(t *testing.T, r *bufio.Reader, id string, pause func()) streamSummary {
	t.Helper()
	var s streamSummary
	var h hash.Hash = sha256.New()
	var f wire.Frame
	next := int64(0)
	for {
		line, err := r.ReadSlice('\n')
		if err != nil {
			t.Fatalf("read after %d frames: %v", s.frames, err)
		}
		if !wire.IsFrameLine(line) {
			s.resps = append(s.resps, append([]byte(nil), line...))
			continue
		}
		pid, err := wire.ParseFrame(line, &f)
		if err != nil {
			t.Fatalf("frame: %v", err)
		}
		if string(pid) != id {
			t.Fatalf("frame for %q", pid)
		}
		if next == 0 {
			s.first = f.Seq
		} else if f.Seq != next {
			t.Fatalf("seq %d after %d", f.Seq, next-1)
		}
		next = f.Seq + 1
		if len(f.Data) > wire.MaxFrameData {
			t.Fatalf("frame of %d bytes", len(f.Data))
		}
		s.frames++
		if f.Stream == wire.Exit {
			s.exitCode = f.ExitCode
			copy(s.sum[:], h.Sum(nil))
			return s
		}
		h.Write(f.Data)
		s.bytes += int64(len(f.Data))
		if pause != nil {
			pause()
		}
	}
}

// requestLine is one authenticated request line.
func requestLine(id int, method, params string) string {
	return fmt.Sprintf(`{"jsonrpc":"2.0","id":%d,"method":%q,"params":%s,"auth":%s}`+"\n", id, method, params, wire.QuoteID(testToken))
}

// bigOutput writes a 1 MiB random file and returns a script that prints it
// n times, and the sha256 of that whole output.
func bigOutput(t *testing.T, n int) (script string, sum [32]byte, size int64) {
	chunk := make([]byte, 1<<20)
	rand.Read(chunk)
	path := filepath.Join(t.TempDir(), "chunk")
	if err := os.WriteFile(path, chunk, 0o600); err != nil {
		t.Fatal(err)
	}
	h := sha256.New()
	for i := 0; i < n; i++ {
		h.Write(chunk)
	}
	copy(sum[:], h.Sum(nil))
	return fmt.Sprintf(`i=0; while [ $i -lt %d ]; do cat %s; i=$((i+1)); done`, n, path), sum, int64(n) << 20
}

// spawnDetached spawns a process from a connection that closes at once, so
// nobody follows the output.
func spawnDetached(t *testing.T, d *testDaemon, params string) {
	t.Helper()
	nc, err := net.Dial("unix", d.sock)
	if err != nil {
		t.Fatal(err)
	}
	defer nc.Close()
	io.WriteString(nc, requestLine(1, "process.spawn", params))
	line, err := bufio.NewReader(nc).ReadBytes('\n')
	if err != nil || string(line) != `{"jsonrpc":"2.0","id":1,"result":{"success":true}}`+"\n" {
		t.Fatalf("spawn: %q %v", line, err)
	}
}

// watchMem samples the process's retained memory until it has exited and
// returns the peak.
func watchMem(t *testing.T, d *testDaemon, id string) int {
	t.Helper()
	var p interface {
		Done() <-chan struct{}
	}
	deadline := time.Now().Add(60 * time.Second)
	peak := 0
	for {
		pr := d.srv.Registry().Get(id)
		if pr != nil {
			p = pr
			peak = max(peak, pr.Log.Stats().MemBytes)
			select {
			case <-p.Done():
				return peak
			default:
			}
		}
		if time.Now().After(deadline) {
			t.Fatal("process did not finish")
		}
		time.Sleep(time.Millisecond)
	}
}

// bigSize is the MiB the bounded-memory tests push through a daemon.
func bigSize(t *testing.T) int {
	if testing.Short() || testutil.RaceEnabled {
		return 16
	}
	return 64
}

// With a state dir, nothing is lost: 64 MiB with nobody reading stays within
// the 1 MiB memory limit and replays exactly from seq 1.
func TestBoundedMemorySpill(t *testing.T) {
	t.Parallel()
	const limit = 1 << 20
	d := startDaemon(t, Config{StateDir: t.TempDir(), ReplayMemLimit: limit})
	script, sum, size := bigOutput(t, bigSize(t))
	spawnDetached(t, d, shParams("spill", script))
	if peak := watchMem(t, d, "spill"); peak > limit {
		t.Fatalf("retained %d bytes in memory, limit %d", peak, limit)
	}
	st := d.srv.Registry().Get("spill").Log.Stats()
	if st.FirstSeq != 1 || st.Disk == 0 {
		t.Fatalf("stats %+v", st)
	}

	nc, _ := net.Dial("unix", d.sock)
	defer nc.Close()
	nc.SetDeadline(time.Now().Add(60 * time.Second))
	io.WriteString(nc, requestLine(1, "process.reattach", `{"id":"spill","fromSeq":0}`))
	r := bufio.NewReaderSize(nc, 1<<20)
	s := collectStream(t, r, "spill", nil)
	if s.first != 1 || s.bytes != size || s.sum != sum || s.exitCode != 0 {
		t.Fatalf("replay: first %d, %d bytes, exit %d, same %v", s.first, s.bytes, s.exitCode, s.sum == sum)
	}
	// The replay precedes the reply.
	line, _ := r.ReadBytes('\n')
	want := fmt.Sprintf(`{"jsonrpc":"2.0","id":1,"result":{"found":true,"running":false,"firstSeq":1,"lastSeq":%d,"stdinApplied":0}}`+"\n", s.frames)
	if len(s.resps) > 0 || string(line) != want {
		t.Fatalf("reattach: %s want %s", line, want)
	}
}

// Without a state dir, old output is dropped and firstSeq says so; the replay
// starts there and is the exact tail of the output.
func TestBoundedMemoryTruncated(t *testing.T) {
	t.Parallel()
	const limit = 1 << 20
	d := startDaemon(t, Config{ReplayMemLimit: limit})
	chunk := make([]byte, 1<<20)
	rand.Read(chunk)
	path := filepath.Join(t.TempDir(), "chunk")
	os.WriteFile(path, chunk, 0o600)
	n := bigSize(t) / 4
	spawnDetached(t, d, shParams("trunc", fmt.Sprintf(`i=0; while [ $i -lt %d ]; do cat %s; i=$((i+1)); done`, n, path)))
	if peak := watchMem(t, d, "trunc"); peak > limit {
		t.Fatalf("retained %d bytes, limit %d", peak, limit)
	}
	st := d.srv.Registry().Get("trunc").Log.Stats()
	if st.FirstSeq <= 1 || st.Disk != 0 {
		t.Fatalf("stats %+v", st)
	}

	nc, _ := net.Dial("unix", d.sock)
	defer nc.Close()
	io.WriteString(nc, requestLine(1, "process.reattach", `{"id":"trunc","fromSeq":0}`))
	// Keep the replayed bytes: they must be a suffix of the output.
	r := bufio.NewReaderSize(nc, 1<<20)
	var got []byte
	var f wire.Frame
	var resp []byte
	first, next := int64(0), int64(0)
	for {
		line, err := r.ReadBytes('\n')
		if err != nil {
			t.Fatal(err)
		}
		if !wire.IsFrameLine(line) {
			resp = line
			continue
		}
		wire.ParseFrame(line, &f)
		if first == 0 {
			first, next = f.Seq, f.Seq
		}
		if f.Seq != next {
			t.Fatalf("seq %d, want %d", f.Seq, next)
		}
		next++
		if f.Stream == wire.Exit {
			break
		}
		got = append(got, f.Data...)
	}
	if first != st.FirstSeq {
		t.Fatalf("replay starts at %d, firstSeq %d", first, st.FirstSeq)
	}
	if resp == nil {
		resp, _ = r.ReadBytes('\n')
	}
	want := fmt.Sprintf(`{"jsonrpc":"2.0","id":1,"result":{"found":true,"running":false,"firstSeq":%d,"lastSeq":%d,"stdinApplied":0}}`+"\n", st.FirstSeq, st.LastSeq)
	if string(resp) != want {
		t.Fatalf("reattach %s want %s", resp, want)
	}
	if len(got) == 0 || len(got) > limit {
		t.Fatalf("replayed %d bytes", len(got))
	}
	all := bytes.Repeat(chunk, n)
	if !bytes.HasSuffix(all, got) {
		t.Fatal("replay is not the tail of the output")
	}
}

// A subscriber that reads slowly loses nothing, and the log stays bounded:
// the child is slowed down instead.
func TestSlowSubscriberBackpressure(t *testing.T) {
	t.Parallel()
	const limit = 256 << 10
	d := startDaemon(t, Config{ReplayMemLimit: limit})
	script, sum, size := bigOutput(t, 8)
	nc, _ := net.Dial("unix", d.sock)
	defer nc.Close()
	io.WriteString(nc, requestLine(1, "process.spawn", shParams("slow", script)))
	peak := make(chan int)
	go func() { peak <- watchMem(t, d, "slow") }()
	nc.SetDeadline(time.Now().Add(60 * time.Second))
	s := collectStream(t, bufio.NewReaderSize(nc, 64<<10), "slow", func() { time.Sleep(2 * time.Millisecond) })
	if s.first != 1 || s.bytes != size || s.sum != sum {
		t.Fatalf("slow reader got %d bytes from seq %d", s.bytes, s.first)
	}
	// The log filled up (so the reader really was behind) but never beyond
	// its limit. (Frames the reader has had are dropped since: a late replay
	// is truncated, a live reader never is.)
	if p := <-peak; p > limit || p < limit/2 {
		t.Fatalf("retained at most %d bytes, limit %d", p, limit)
	}
	if string(s.resps[0]) != `{"jsonrpc":"2.0","id":1,"result":{"success":true}}`+"\n" {
		t.Fatalf("spawn reply %s", s.resps[0])
	}
}

// A spawn whose reply is held up behind a busy connection still delivers its
// process's output from seq 1: the subscription exists from the spawn on, so
// the log holds the child back instead of dropping its first frames.
func TestSpawnNothingLostBeforeSubscribe(t *testing.T) {
	t.Parallel()
	d := startDaemon(t, Config{ReplayMemLimit: 64 << 10})
	script, sum, size := bigOutput(t, 4)
	nc, _ := net.Dial("unix", d.sock)
	defer nc.Close()
	nc.SetDeadline(time.Now().Add(60 * time.Second))
	// The first process fills the connection; nobody reads it yet.
	io.WriteString(nc, requestLine(1, "process.spawn", `{"id":"noisy","command":"head","args":["-c","8388608","/dev/zero"]}`))
	time.Sleep(200 * time.Millisecond)
	io.WriteString(nc, requestLine(2, "process.spawn", shParams("late", script)))
	time.Sleep(300 * time.Millisecond)

	r := bufio.NewReaderSize(nc, 1<<20)
	var f wire.Frame
	next := map[string]int64{"noisy": 1, "late": 1}
	got := map[string]int64{}
	h := sha256.New()
	for next["noisy"] > 0 || next["late"] > 0 {
		line, err := r.ReadSlice('\n')
		if err != nil {
			t.Fatal(err)
		}
		if !wire.IsFrameLine(line) {
			continue
		}
		id, _ := wire.ParseFrame(line, &f)
		if f.Seq != next[string(id)] {
			t.Fatalf("%s: seq %d, want %d", id, f.Seq, next[string(id)])
		}
		next[string(id)]++
		got[string(id)] += int64(len(f.Data))
		if string(id) == "late" {
			h.Write(f.Data)
		}
		if f.Stream == wire.Exit {
			next[string(id)] = 0
		}
	}
	if got["noisy"] != 8<<20 || got["late"] != size || [32]byte(h.Sum(nil)) != sum {
		t.Fatalf("got %v", got)
	}
}

// TestIdleConnectionHeap holds what a connected client that waits costs the
// daemon's heap. It was 71-72 KiB (two runs), 64 KiB of it the read
// buffer: a thousand waiting clients would hold 70 MiB.
func TestIdleConnectionHeap(t *testing.T) {
	d := startDaemon(t, Config{})
	const n = 300
	heap := func() int64 {
		runtime.GC()
		var ms runtime.MemStats
		runtime.ReadMemStats(&ms)
		return int64(ms.HeapInuse)
	}
	before := heap()
	conns := make([]net.Conn, 0, n)
	defer func() {
		for _, c := range conns {
			c.Close()
		}
	}()
	req := []byte(`{"jsonrpc":"2.0","id":1,"method":"server.ping","auth":` + string(wire.QuoteID(testToken)) + "}\n")
	for range n {
		nc, err := net.Dial("unix", d.sock)
		if err != nil {
			t.Fatal(err)
		}
		conns = append(conns, nc)
		if _, err := nc.Write(req); err != nil {
			t.Fatal(err)
		}
		if _, err := bufio.NewReaderSize(nc, 256).ReadSlice('\n'); err != nil {
			t.Fatal(err)
		}
	}
	per := (heap() - before) / n
	t.Logf("%d B of heap per idle connection", per)
	if per > 16<<10 {
		t.Errorf("an idle connection holds %d B of the daemon's heap, want 16 KiB at most", per)
	}
}
