package daemon

import (
	"bufio"
	"bytes"
	stdbase64 "encoding/base64"
	"fmt"
	"io"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"runtime/pprof"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/seed5ad92d46/sous/daemon/sandbox"
	"github.com/seed5ad92d46/sous/daemon/wire"
	"github.com/seed5ad92d46/sous/internal/testutil"
)

// The daemon benchmarks run the daemon in its own process (this test binary,
// re-executed), as in production: child -> daemon -> Unix socket -> client
// are three processes competing for the CPUs.
const daemonSocketEnv = "SOUS_TEST_DAEMON_SOCKET"

func TestMain(m *testing.M) {
	sandbox.MaybeRunHelper() // this binary is the helper of its sandboxed children
	if sock := os.Getenv(daemonSocketEnv); sock != "" {
		os.Exit(runDaemonProcess(sock))
	}
	os.Exit(m.Run())
}

// runDaemonProcess serves sock until server.shutdown or until its stdin
// closes (the benchmark that started it is gone).
func runDaemonProcess(sock string) int {
	if path := os.Getenv("SOUS_TEST_DAEMON_CPUPROFILE"); path != "" {
		f, err := os.Create(path)
		if err == nil {
			pprof.StartCPUProfile(f)
			defer pprof.StopCPUProfile()
		}
	}
	srv, err := New(Config{Token: testToken, StateDir: os.Getenv("SOUS_TEST_DAEMON_STATE")})
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	ln, err := ListenUnix(sock)
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	go srv.Serve(ln)
	go func() { io.Copy(io.Discard, os.Stdin); srv.requestShutdown() }()
	fmt.Println("ready")
	<-srv.ShutdownRequested()
	srv.Close()
	return 0
}

func base64Std(b []byte) string { return stdbase64.StdEncoding.EncodeToString(b) }

// daemonProcess is a daemon running in a child process.
type daemonProcess struct {
	cmd   *exec.Cmd
	stdin io.WriteCloser
	sock  string
}

func startDaemonProcess(b testing.TB, stateDir string) *daemonProcess {
	b.Helper()
	exe, err := os.Executable()
	if err != nil {
		b.Fatal(err)
	}
	dir := testutil.ShortTempDir(b)
	sock := filepath.Join(dir, "s")
	cmd := exec.Command(exe, "-test.run=^$")
	cmd.Env = append(os.Environ(), daemonSocketEnv+"="+sock, "SOUS_TEST_DAEMON_STATE="+stateDir)
	cmd.Stderr = os.Stderr
	stdin, _ := cmd.StdinPipe()
	stdout, _ := cmd.StdoutPipe()
	if err := cmd.Start(); err != nil {
		b.Fatal(err)
	}
	line, err := bufio.NewReader(stdout).ReadString('\n')
	if err != nil || line != "ready\n" {
		cmd.Process.Kill()
		b.Fatalf("daemon process: %q %v", line, err)
	}
	d := &daemonProcess{cmd: cmd, stdin: stdin, sock: sock}
	b.Cleanup(d.stop)
	return d
}

func (d *daemonProcess) stop() {
	d.stdin.Close()
	done := make(chan struct{})
	go func() { d.cmd.Wait(); close(done) }()
	select {
	case <-done:
	case <-time.After(10 * time.Second):
		d.cmd.Process.Kill()
		<-done
	}
}

// cpuTime is the CPU (user and system) the daemon process has used so far.
func (d *daemonProcess) cpuTime(b testing.TB) time.Duration {
	stat, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", d.cmd.Process.Pid))
	if err != nil {
		b.Fatal(err)
	}
	// utime and stime are fields 14 and 15, counted after the ")" that ends
	// the command name.
	f := strings.Fields(string(stat[bytes.LastIndexByte(stat, ')')+2:]))
	ut, _ := strconv.ParseInt(f[11], 10, 64)
	st, _ := strconv.ParseInt(f[12], 10, 64)
	return time.Duration(ut+st) * time.Second / 100 // USER_HZ
}

// selfCPU is the CPU this process has used so far.
func selfCPU() time.Duration {
	var ru syscall.Rusage
	syscall.Getrusage(syscall.RUSAGE_SELF, &ru)
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

// peakRSS is the daemon process's high-water resident set (VmHWM), in bytes.
func (d *daemonProcess) peakRSS(b testing.TB) int64 {
	status, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", d.cmd.Process.Pid))
	if err != nil {
		b.Fatal(err)
	}
	for _, line := range strings.Split(string(status), "\n") {
		if v, ok := strings.CutPrefix(line, "VmHWM:"); ok {
			kb, _ := strconv.ParseInt(strings.TrimSpace(strings.TrimSuffix(strings.TrimSpace(v), "kB")), 10, 64)
			return kb << 10
		}
	}
	b.Fatal("no VmHWM")
	return 0
}

// rawPipe times `head -c n /dev/zero` read straight from its stdout pipe in
// 32 KiB reads: the baseline.
func rawPipe(b testing.TB, n int64) time.Duration {
	start := time.Now()
	cmd := exec.Command("head", "-c", strconv.FormatInt(n, 10), "/dev/zero")
	out, err := cmd.StdoutPipe()
	if err != nil {
		b.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		b.Fatal(err)
	}
	buf := make([]byte, wire.MaxFrameData)
	var got int64
	for {
		k, err := out.Read(buf)
		got += int64(k)
		if err != nil {
			break
		}
	}
	cmd.Wait()
	if got != n {
		b.Fatalf("pipe read %d bytes", got)
	}
	return time.Since(start)
}

// streamOnce spawns `head -c n /dev/zero` through the daemon at sock and
// decodes every frame, returning the time from the request to the exit frame.
func streamOnce(b testing.TB, sock, id string, n int64) time.Duration {
	el, _ := streamFrames(b, sock, id, n)
	return el
}

// streamFrames is streamOnce that also counts the frames.
func streamFrames(b testing.TB, sock, id string, n int64) (time.Duration, int) {
	nc, err := net.Dial("unix", sock)
	if err != nil {
		b.Fatal(err)
	}
	defer nc.Close()
	r := bufio.NewReaderSize(nc, 1<<20)
	start := time.Now()
	io.WriteString(nc, requestLine(1, "process.spawn", `{"id":"`+id+`","command":"head","args":["-c","`+strconv.FormatInt(n, 10)+`","/dev/zero"]}`))
	var f wire.Frame
	var got int64
	next := int64(1)
	for {
		line, err := r.ReadSlice('\n')
		if err != nil {
			b.Fatalf("after %d bytes: %v", got, err)
		}
		if !wire.IsFrameLine(line) {
			continue // the spawn reply
		}
		if _, err := wire.ParseFrame(line, &f); err != nil {
			b.Fatal(err)
		}
		if f.Seq != next {
			b.Fatalf("seq %d, want %d", f.Seq, next)
		}
		next++
		if f.Stream == wire.Exit {
			break
		}
		got += int64(len(f.Data))
	}
	el := time.Since(start)
	if got != n {
		b.Fatalf("streamed %d bytes, want %d", got, n)
	}
	return el, int(next - 1)
}

// BenchmarkStreamSocket compares a child's output relayed by the daemon over
// its Unix socket, every frame decoded, with the same output read from a raw
// pipe. x-pipe is the daemon's throughput as a fraction of the pipe's.
func BenchmarkStreamSocket(b *testing.B) {
	n := testutil.BenchBytes(b, 1<<30)
	d := startDaemonProcess(b, "")
	b.SetBytes(n)
	var pipe, daemon, daemonCPU, clientCPU time.Duration
	frames := 0
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		b.StopTimer()
		pipe += rawPipe(b, n)
		b.StartTimer()
		d0, c0 := d.cpuTime(b), selfCPU()
		el, k := streamFrames(b, d.sock, fmt.Sprintf("bench%d", i), n)
		daemonCPU += d.cpuTime(b) - d0
		clientCPU += selfCPU() - c0
		daemon += el
		frames += k
	}
	b.StopTimer()
	mbps := func(d time.Duration) float64 { return float64(n) * float64(b.N) / d.Seconds() / 1e6 }
	b.ReportMetric(pipe.Seconds()/daemon.Seconds(), "x-pipe")
	b.ReportMetric(mbps(pipe), "pipe-MB/s")
	b.ReportMetric(float64(n)*float64(b.N)/float64(frames)/1024, "KiB/frame")
	gib := float64(n) * float64(b.N) / (1 << 30)
	b.ReportMetric(daemonCPU.Seconds()/gib, "daemon-cpu-s/GiB")
	b.ReportMetric(clientCPU.Seconds()/gib, "client-cpu-s/GiB")
	b.ReportMetric(float64(d.peakRSS(b))/(1<<20), "daemon-peak-MiB")
}

// BenchmarkPeakMemory streams twice SOUS_BENCH_BYTES (default 2 GiB) through
// a daemon process and reports its peak resident memory: with a client
// reading along, and with nobody reading (spilled to a state dir).
func BenchmarkPeakMemory(b *testing.B) {
	n := 2 * testutil.BenchBytes(b, 1<<30)
	b.Run("reader", func(b *testing.B) {
		d := startDaemonProcess(b, "")
		for i := 0; i < b.N; i++ {
			streamOnce(b, d.sock, fmt.Sprintf("mem%d", i), n)
		}
		b.ReportMetric(float64(d.peakRSS(b))/(1<<20), "daemon-peak-MiB")
	})
	b.Run("detached-spill", func(b *testing.B) {
		d := startDaemonProcess(b, b.TempDir())
		for i := 0; i < b.N; i++ {
			nc, err := net.Dial("unix", d.sock)
			if err != nil {
				b.Fatal(err)
			}
			r := bufio.NewReader(nc)
			id := fmt.Sprintf("det%d", i)
			io.WriteString(nc, requestLine(1, "process.spawn", `{"id":"`+id+`","command":"head","args":["-c","`+strconv.FormatInt(n, 10)+`","/dev/zero"]}`))
			r.ReadBytes('\n')
			nc.Close() // nobody follows the output now
			waitExited(b, d.sock, id)
		}
		b.ReportMetric(float64(d.peakRSS(b))/(1<<20), "daemon-peak-MiB")
	})
}

// waitExited polls process.reattach until id is no longer running.
func waitExited(b testing.TB, sock, id string) {
	nc, err := net.Dial("unix", sock)
	if err != nil {
		b.Fatal(err)
	}
	defer nc.Close()
	r := bufio.NewReader(nc)
	for i := 0; ; i++ {
		// fromSeq far ahead: nothing is replayed, only the state comes back.
		io.WriteString(nc, requestLine(i, "process.reattach", `{"id":"`+id+`","fromSeq":9223372036854775000}`))
		line, err := r.ReadBytes('\n')
		if err != nil {
			b.Fatal(err)
		}
		if bytes.Contains(line, []byte(`"running":false`)) {
			return
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// BenchmarkPing measures server.ping round trips on one connection and
// reports their median and 99th percentile.
func BenchmarkPing(b *testing.B) {
	d := startDaemonProcess(b, "")
	nc, err := net.Dial("unix", d.sock)
	if err != nil {
		b.Fatal(err)
	}
	defer nc.Close()
	r := bufio.NewReader(nc)
	req := []byte(requestLine(1, "server.ping", `{}`))
	want := `{"jsonrpc":"2.0","id":1,"result":{"pong":true}}` + "\n"
	rtts := make([]time.Duration, 0, b.N)
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		start := time.Now()
		nc.Write(req)
		line, err := r.ReadSlice('\n')
		rtts = append(rtts, time.Since(start))
		if err != nil || string(line) != want {
			b.Fatalf("%q %v", line, err)
		}
	}
	b.StopTimer()
	slices.Sort(rtts)
	b.ReportMetric(float64(rtts[len(rtts)/2].Nanoseconds())/1e3, "p50-µs")
	b.ReportMetric(float64(rtts[len(rtts)*99/100].Nanoseconds())/1e3, "p99-µs")
}

// BenchmarkReplay times a full replay (reattach from seq 0) of a finished
// process's output spilled to the state dir, every frame decoded, against
// the same bytes read from a raw pipe.
func BenchmarkReplay(b *testing.B) {
	n := min(testutil.BenchBytes(b, 1<<30), 512<<20) // within the default 1 GiB disk limit
	d := startDaemonProcess(b, b.TempDir())
	nc, err := net.Dial("unix", d.sock)
	if err != nil {
		b.Fatal(err)
	}
	io.WriteString(nc, requestLine(1, "process.spawn", `{"id":"r","command":"head","args":["-c","`+strconv.FormatInt(n, 10)+`","/dev/zero"]}`))
	bufio.NewReader(nc).ReadBytes('\n')
	nc.Close()
	waitExited(b, d.sock, "r")
	b.SetBytes(n)
	var pipe, replay time.Duration
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		b.StopTimer()
		pipe += rawPipe(b, n)
		b.StartTimer()
		replay += replayOnce(b, d.sock, "r", n)
	}
	b.StopTimer()
	b.ReportMetric(pipe.Seconds()/replay.Seconds(), "x-pipe")
}

func replayOnce(b testing.TB, sock, id string, n int64) time.Duration {
	nc, err := net.Dial("unix", sock)
	if err != nil {
		b.Fatal(err)
	}
	defer nc.Close()
	r := bufio.NewReaderSize(nc, 1<<20)
	start := time.Now()
	io.WriteString(nc, requestLine(1, "process.reattach", `{"id":"`+id+`","fromSeq":0}`))
	var f wire.Frame
	var got int64
	for {
		line, err := r.ReadSlice('\n')
		if err != nil {
			b.Fatal(err)
		}
		if !wire.IsFrameLine(line) {
			if !bytes.Contains(line, []byte(`"firstSeq":1,`)) {
				b.Fatalf("replay is not from seq 1: %s", line)
			}
			break // the reply follows the replay
		}
		if _, err := wire.ParseFrame(line, &f); err != nil {
			b.Fatal(err)
		}
		got += int64(len(f.Data))
	}
	if got != n {
		b.Fatalf("replayed %d bytes, want %d", got, n)
	}
	return time.Since(start)
}

// BenchmarkStdin feeds a child's stdin through process.stdin (base64 in
// 512 KiB requests with offsets, one at a time as daemon/client sends them:
// requests are dispatched concurrently, so two in flight could be applied
// out of order) against writing the same bytes to a raw pipe.
func BenchmarkStdin(b *testing.B) {
	n := min(testutil.BenchBytes(b, 1<<30), 256<<20)
	d := startDaemonProcess(b, "")
	b.SetBytes(n)
	var pipe, daemon, daemonCPU time.Duration
	for i := 0; i < b.N; i++ {
		pipe += rawStdin(b, n)
		c0 := d.cpuTime(b)
		daemon += stdinOnce(b, d.sock, fmt.Sprintf("in%d", i), n)
		daemonCPU += d.cpuTime(b) - c0
	}
	b.ReportMetric(pipe.Seconds()/daemon.Seconds(), "x-pipe")
	b.ReportMetric(daemonCPU.Seconds()/(float64(n)*float64(b.N)/(1<<30)), "daemon-cpu-s/GiB")
}

func rawStdin(b testing.TB, n int64) time.Duration {
	start := time.Now()
	cmd := exec.Command("cat")
	in, _ := cmd.StdinPipe()
	if err := cmd.Start(); err != nil {
		b.Fatal(err)
	}
	chunk := make([]byte, 512<<10)
	for sent := int64(0); sent < n; sent += int64(len(chunk)) {
		in.Write(chunk[:min(int64(len(chunk)), n-sent)])
	}
	in.Close()
	cmd.Wait()
	return time.Since(start)
}

func stdinOnce(b testing.TB, sock, id string, n int64) time.Duration {
	nc, err := net.Dial("unix", sock)
	if err != nil {
		b.Fatal(err)
	}
	defer nc.Close()
	r := bufio.NewReaderSize(nc, 1<<20)
	start := time.Now()
	io.WriteString(nc, requestLine(1, "process.spawn", `{"id":"`+id+`","command":"sh","args":["-c","cat >/dev/null"]}`))
	const chunk = 512 << 10
	data := base64Std(make([]byte, chunk))
	const window = 1 // requests in flight
	sent, reqs, replies := int64(0), 0, 0
	exited := false
	for !exited || replies < reqs {
		for sent < n && reqs-replies < window {
			size := min(int64(chunk), n-sent)
			payload := data
			if size < chunk {
				payload = base64Std(make([]byte, size))
			}
			closing := ""
			if sent+size == n {
				closing = `,"close":true`
			}
			reqs++
			io.WriteString(nc, requestLine(reqs+1, "process.stdin", `{"id":"`+id+`","data":"`+payload+`","offset":`+strconv.FormatInt(sent, 10)+closing+`}`))
			sent += size
		}
		line, err := r.ReadSlice('\n')
		if err != nil {
			b.Fatal(err)
		}
		switch {
		case wire.IsFrameLine(line):
			exited = bytes.Contains(line, []byte(`"stream":"exit"`))
		case bytes.Contains(line, []byte(`"applied"`)):
			replies++
		case bytes.Contains(line, []byte(`"error"`)):
			b.Fatalf("%s", line)
		}
	}
	return time.Since(start)
}
