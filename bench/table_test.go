// Package bench measures sous against its baselines, side by side in the same
// run, and prints the table of docs/PERFORMANCE.md.
//
//	make bench                                  # the whole table (several minutes)
//	SOUS_BENCH_TABLE=1 SOUS_BENCH_REPEATS=3 go test ./bench -run TestTable -v -timeout 60m
//	SOUS_BENCH_ONLY=ping,extract make bench     # some rows: exec exec-socket socket-frames protocol ws ssh rss ping spawn start extract children fanout live sessions agent-turn journal
//
// Every figure is a ratio against a baseline measured in the same run, as
// the median of interleaved repeats: the machines are shared and noisy, so
// absolute times mean little and alternating the two sides spreads the noise
// over both. SOUS_BENCH_BYTES overrides the stream size (default 1 GiB).
package bench

import (
	"bufio"
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/seed5ad92d46/sous/daemon/client"
	"github.com/seed5ad92d46/sous/internal/testutil"
)

type row struct {
	figure, baseline, target, result string
	ok                               bool
}

func TestTable(t *testing.T) {
	if os.Getenv("SOUS_BENCH_TABLE") == "" {
		t.Skip("set SOUS_BENCH_TABLE=1 (or run `make bench`) to measure the performance table")
	}
	e := newEnv(t)
	var rows []row
	// SOUS_BENCH_ONLY=ping,extract measures only the rows named.
	only := os.Getenv("SOUS_BENCH_ONLY")
	one := func(measure func(*env, *testing.T) row) func(*env, *testing.T) []row {
		return func(e *env, t *testing.T) []row { return []row{measure(e, t)} }
	}
	for _, m := range []struct {
		name    string
		measure func(*env, *testing.T) []row
	}{
		{"exec", one(func(e *env, t *testing.T) row { return e.execStream(t, false) })},
		{"exec-socket", one(func(e *env, t *testing.T) row { return e.execStream(t, true) })},
		{"socket-frames", one((*env).socketFrames)},
		{"protocol", one((*env).protocolClient)},
		{"ws", one((*env).wsStream)},
		{"ssh", one((*env).sshStream)},
		{"rss", one((*env).peakRSS)},
		{"ping", one((*env).ping)},
		{"spawn", one((*env).spawnExit)},
		{"start", one((*env).recipeStart)},
		{"extract", one((*env).extractTar)},
		{"children", one((*env).concurrentChildren)},
		{"fanout", one((*env).fanout)},
		{"live", one((*env).liveArea)},
		{"sessions", one((*env).sessions)},
		{"agent-turn", one((*env).agentTurn)},
		{"journal", (*env).journalRows},
	} {
		if only != "" && !slices.Contains(strings.Split(only, ","), m.name) {
			continue
		}
		// Each row is a subtest of its own, with a directory of its own:
		// the daemons it started stop and the files it wrote go when it
		// ends, and the disk is synced before the next row starts. Rows
		// used to share one directory and leave their daemons running to
		// the end, so the last rows ran beside a dozen idle daemons (the
		// streams' spill files were gone: a daemon removes a stream's
		// when its process goes), and read worse than alone (the
		// journal's row, last, read 1.056x in the full run of 2026-11-27
		// against 1.013x alone).
		t.Run(m.name, func(t *testing.T) {
			for _, r := range m.measure(e.forRow(t), t) {
				rows = append(rows, r)
				t.Logf("%s: %s", r.figure, r.result)
			}
		})
		if err := exec.Command("sync").Run(); err != nil {
			t.Fatalf("sync after row %s: %v", m.name, err)
		}
	}

	var b strings.Builder
	fmt.Fprintf(&b, "\n| figure | baseline | target | result | met |\n| --- | --- | --- | --- | --- |\n")
	for _, r := range rows {
		met := "yes"
		if !r.ok {
			met = "no"
		}
		fmt.Fprintf(&b, "| %s | %s | %s | %s | %s |\n", r.figure, r.baseline, r.target, r.result, met)
	}
	fmt.Fprintf(&b, "\n%d repeats, medians; %s, %d CPUs, %s\n", e.repeats, runtime.Version(), runtime.NumCPU(), time.Now().Format(time.DateOnly))
	fmt.Print(b.String())
}

type env struct {
	bin     string
	dir     string
	repeats int
	bytes   int64
}

func newEnv(t *testing.T) *env {
	dir := t.TempDir()
	bin := filepath.Join(dir, "sous")
	if out, err := exec.Command("go", "build", "-o", bin, "../cmd/sous").CombinedOutput(); err != nil {
		t.Fatalf("build sous: %v\n%s", err, out)
	}
	e := &env{bin: bin, dir: dir, repeats: 5, bytes: testutil.BenchBytes(t, 1<<30)}
	if n, err := strconv.Atoi(os.Getenv("SOUS_BENCH_REPEATS")); err == nil && n > 0 {
		e.repeats = n
	}
	return e
}

// forRow is e for one row: the same binary, and a directory of the row's
// own, removed when the row's subtest ends.
func (e *env) forRow(t *testing.T) *env {
	r := *e
	r.dir = t.TempDir()
	return &r
}

// interleave runs a and b alternately and returns their median durations.
func (e *env) interleave(t *testing.T, a, b func() time.Duration) (time.Duration, time.Duration) {
	var as, bs []time.Duration
	for range e.repeats {
		as = append(as, a())
		bs = append(bs, b())
	}
	return median(as), median(bs)
}

// pairedRatios runs a and b n times each, in pairs whose order alternates
// (a b, b a, ...), and returns the pairs' ratios a/b, sorted, with the
// median times: a ratio taken pair by pair is not moved by the machine's
// speed drifting between one pair and the next, which a ratio of medians
// is when the difference sought is a few percent. The spread of the
// ratios says how far the median can be trusted.
func pairedRatios(n int, a, b func() time.Duration) (ratios []float64, ta, tb time.Duration) {
	var as, bs []time.Duration
	for i := range n {
		var da, db time.Duration
		if i%2 == 0 {
			da, db = a(), b()
		} else {
			db, da = b(), a()
		}
		as, bs = append(as, da), append(bs, db)
		ratios = append(ratios, da.Seconds()/db.Seconds())
	}
	slices.Sort(ratios)
	return ratios, median(as), median(bs)
}

// rate is n bytes over the median of times, in MB/s: a row's own speed,
// and its baseline's beside it (the pipe ran anywhere from 1.8 to 4.5 GB/s
// between runs here, which moves a ratio to it more than sous does).
func rate(n int64, times []time.Duration) float64 {
	return float64(n) / median(times).Seconds() / 1e6
}

func median(ds []time.Duration) time.Duration {
	s := slices.Clone(ds)
	slices.Sort(s)
	return s[len(s)/2]
}

func timeShell(t *testing.T, script string, env ...string) time.Duration {
	t.Helper()
	cmd := exec.Command("sh", "-c", script)
	cmd.Env = append(os.Environ(), env...)
	start := time.Now()
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("%s: %v\n%s", script, err, out)
	}
	return time.Since(start)
}

// timeWrite times script, which writes the file at path, and then removes
// the file and syncs, untimed. Removed inside the timing, a file's blocks
// were freed and, on a filesystem mounted with discard (this host's root
// is), discarded at the next journal commit, while whichever command came
// next was being timed: the file rows' removals fell on the next repeat's
// spilling stream.
func timeWrite(t *testing.T, script, path string, env ...string) time.Duration {
	t.Helper()
	d := timeShell(t, script, env...)
	if out, err := exec.Command("sh", "-c", "rm -f "+path+" && sync").CombinedOutput(); err != nil {
		t.Fatalf("remove %s: %v\n%s", path, err, out)
	}
	return d
}

// daemonProc is a `sous daemon serve` subprocess.
type daemonProc struct {
	cmd    *exec.Cmd
	socket string
	token  string
}

func (e *env) startDaemon(t *testing.T, flags ...string) *daemonProc {
	t.Helper()
	d := &daemonProc{socket: filepath.Join(e.dir, fmt.Sprintf("d%d.sock", time.Now().UnixNano()%1e6)), token: "bench"}
	d.cmd = exec.Command(e.bin, append([]string{"daemon", "serve", "--socket", d.socket, "--token-fd", "0", "--log-format", "json"}, flags...)...)
	d.cmd.Stdin = strings.NewReader(d.token + "\n")
	d.cmd.Stderr = nil
	out, err := d.cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := d.cmd.Start(); err != nil {
		t.Fatal(err)
	}
	line, _ := bufio.NewReader(out).ReadString('\n')
	if !strings.Contains(line, "listening") {
		t.Fatalf("daemon did not start: %q", line)
	}
	t.Cleanup(func() { d.cmd.Process.Signal(syscall.SIGTERM); d.cmd.Wait() })
	return d
}

// vmHWM reads a process's peak resident set size.
func vmHWM(pid int) (int64, error) {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		return 0, err
	}
	for _, line := range strings.Split(string(b), "\n") {
		if v, ok := strings.CutPrefix(line, "VmHWM:"); ok {
			kb, err := strconv.ParseInt(strings.TrimSuffix(strings.TrimSpace(v), " kB"), 10, 64)
			return kb << 10, err
		}
	}
	return 0, fmt.Errorf("no VmHWM")
}

func (e *env) execStream(t *testing.T, socket bool) row {
	size := strconv.FormatInt(e.bytes, 10)
	base := "head -c " + size + " /dev/zero | cat > /dev/null"
	// A C relay in sous's place: what any process between the child and
	// the reader costs here (two pipes instead of one, three processes on
	// the CPUs instead of two).
	relay := "head -c " + size + " /dev/zero | cat | cat > /dev/null"
	via := e.bin + " exec -- head -c " + size + " /dev/zero | cat > /dev/null"
	var extra []string
	noSpill := "" // socket only: the same through a daemon that spills no replay to disk
	// Socket only: the disk's own direct write of the same bytes, into the
	// file system the daemon spills to (a private temp dir, as e.dir is).
	// A socket daemon writes every byte past its memory window to a spill
	// file, so this is the disk its stream shares. Not a bound: dd reads a
	// block and then writes it, where the daemon fills its next buffer
	// while the last one is written, and the stream often passes dd.
	disk := ""
	diskFile := filepath.Join(e.dir, "disk")
	r := row{figure: "`sous exec` streaming " + human(e.bytes) + ", embedded daemon", baseline: "`head -c` into a pipe", target: ">= 0.6 of the pipe"}
	want := 0.6
	if socket {
		d := e.startDaemon(t)
		via = e.bin + " exec --socket " + d.socket + " -- head -c " + size + " /dev/zero | cat > /dev/null"
		extra = []string{"SOUS_TOKEN=" + d.token}
		nd := e.startDaemon(t, "--replay-disk-limit", "0")
		noSpill = e.bin + " exec --socket " + nd.socket + " -- head -c " + size + " /dev/zero | cat > /dev/null"
		disk = directWrite(diskFile, size)
		probe := filepath.Join(e.dir, "probe")
		if exec.Command("sh", "-c", directWrite(probe, "4096")+" && rm "+probe).Run() != nil {
			disk = "" // no O_DIRECT here (tmpfs before Linux 6.6): the daemon writes through the page cache too
		}
		r.figure = "the same through a Unix-socket daemon"
		r.target = ">= 0.4 of the pipe"
		want = 0.4
	}
	// Each repeat times the three back to back and contributes its own
	// ratios: a burst of noise then skews one repeat, not one side.
	var viaRatios, relayRatios, noSpillRatios, diskRatios []float64
	var viaTimes, pipeTimes []time.Duration
	for range e.repeats {
		tb := timeShell(t, base)
		pipeTimes = append(pipeTimes, tb)
		tr := timeShell(t, relay)
		ts := timeShell(t, via, extra...)
		viaRatios = append(viaRatios, tb.Seconds()/ts.Seconds())
		relayRatios = append(relayRatios, tb.Seconds()/tr.Seconds())
		viaTimes = append(viaTimes, ts)
		if noSpill != "" {
			noSpillRatios = append(noSpillRatios, tb.Seconds()/timeShell(t, noSpill, extra...).Seconds())
		}
		if disk != "" {
			diskRatios = append(diskRatios, tb.Seconds()/timeWrite(t, disk, diskFile).Seconds())
		}
	}
	ratio := medianFloat(viaRatios)
	r.result = fmt.Sprintf("%.2fx of the pipe (%.0f MB/s; the pipe %.0f MB/s); a C relay (`cat`) in its place: %.2fx", ratio,
		rate(e.bytes, viaTimes), rate(e.bytes, pipeTimes), medianFloat(relayRatios))
	if noSpill != "" {
		r.result += fmt.Sprintf("; `--replay-disk-limit 0` (no spill): %.2fx", medianFloat(noSpillRatios))
	}
	if disk != "" {
		r.result += fmt.Sprintf("; the disk alone (`dd oflag=direct` of the same bytes, a block at a time): %.2fx", medianFloat(diskRatios))
	}
	r.ok = ratio >= want
	return r
}

// directWrite is a shell command that writes size zero bytes to path with
// O_DIRECT, as the daemon's spill does, and removes the file.
func directWrite(path, size string) string {
	return "dd if=/dev/zero of=" + path + " bs=4M iflag=count_bytes count=" + size + " oflag=direct status=none"
}

func medianFloat(xs []float64) float64 {
	s := slices.Clone(xs)
	slices.Sort(s)
	return s[len(s)/2]
}

func (e *env) peakRSS(t *testing.T) row {
	d := e.startDaemon(t)
	size := strconv.FormatInt(2*e.bytes, 10)
	timeShell(t, e.bin+" exec --socket "+d.socket+" -- head -c "+size+" /dev/zero > /dev/null", "SOUS_TOKEN="+d.token)
	hwm, err := vmHWM(d.cmd.Process.Pid)
	if err != nil {
		t.Fatal(err)
	}
	return row{figure: "daemon peak RSS while a child writes " + human(2*e.bytes), baseline: "—", target: "under 64 MiB",
		result: fmt.Sprintf("%.1f MiB", float64(hwm)/(1<<20)), ok: hwm < 64<<20}
}

func (e *env) ping(t *testing.T) row {
	d := e.startDaemon(t)
	ctx := context.Background()
	c, err := client.DialUnix(ctx, d.socket, d.token, client.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	// Alternated with the same number of round trips through an echo
	// server, the floor of any round trip between two processes here.
	echo := e.startEcho(t)
	const echoLine = `{"jsonrpc":"2.0","id":1,"method":"server.ping","auth":"bench"}` + "\n"
	var lat, echoLat []time.Duration
	for range 5 {
		for range 4000 {
			start := time.Now()
			if err := c.Call(ctx, "server.ping", nil, nil); err != nil {
				t.Fatal(err)
			}
			lat = append(lat, time.Since(start))
		}
		echoLat = append(echoLat, echo.roundTrips(t, echoLine, 4000)...)
	}
	p50 := median(lat)

	// 16 connections, as fast as they go, for 2 s; then the same through
	// the echo server.
	rate := callRate(t, 16, 2*time.Second, func() func() error {
		cc, err := client.DialUnix(ctx, d.socket, d.token, client.Options{})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { cc.Close() })
		return func() error { return cc.Call(ctx, "server.ping", nil, nil) }
	})
	echoRate := callRate(t, 16, 2*time.Second, func() func() error { return echo.caller(t, echoLine) })
	return row{figure: "server.ping round trip", baseline: "—", target: "p50 under 50 µs; 16 connections over 100k calls/s",
		result: fmt.Sprintf("p50 %.0f µs (a bare echo server in its place: %.0f µs); %.0fk calls/s (the echo server: %.0fk)",
			float64(p50.Microseconds()), float64(median(echoLat).Microseconds()), rate/1000, echoRate/1000),
		ok: p50 < 50*time.Microsecond && rate > 100000}
}

// callRate runs n goroutines, each making calls as fast as it goes for d
// with the function setup gave it, and returns the successful calls per
// second of them all.
func callRate(t *testing.T, n int, d time.Duration, setup func() func() error) float64 {
	var wg sync.WaitGroup
	var total atomic.Int64
	calls := make([]func() error, n)
	for i := range calls {
		calls[i] = setup()
	}
	deadline := time.Now().Add(d)
	for _, call := range calls {
		wg.Go(func() {
			n := int64(0)
			for time.Now().Before(deadline) {
				if call() == nil {
					n++
				}
			}
			total.Add(n)
		})
	}
	wg.Wait()
	return float64(total.Load()) / d.Seconds()
}

func (e *env) recipeStart(t *testing.T) row {
	recipe := filepath.Join(e.dir, "one.star")
	os.WriteFile(recipe, []byte("x = 1\n"), 0o644)
	python := testutil.FastestPython(t)
	if python == "" {
		return row{figure: "`sous run` of a one-line recipe", baseline: "`python3 -c pass`", target: "at most 0.35x", result: "python3 not found"}
	}
	const n = 20
	loop := func(name string, args ...string) func() time.Duration {
		return func() time.Duration {
			start := time.Now()
			for range n {
				if out, err := exec.Command(name, args...).CombinedOutput(); err != nil {
					t.Fatalf("%s: %v %s", name, err, out)
				}
			}
			return time.Since(start)
		}
	}
	tb, ts := e.interleave(t, loop(python, "-c", "pass"), loop(e.bin, "run", recipe))
	ratio := ts.Seconds() / tb.Seconds()
	return row{figure: "`sous run` of a one-line recipe", baseline: "`python3 -c pass` (the quickest python3 here)", target: "at most 0.35x",
		result: fmt.Sprintf("%.2fx (%.1f vs %.1f ms)", ratio, ts.Seconds()*1000/n, tb.Seconds()*1000/n), ok: ratio <= 0.35}
}

func (e *env) extractTar(t *testing.T) row {
	src := filepath.Join(runtime.GOROOT(), "src")
	archive := filepath.Join(e.dir, "gosrc.tar.gz")
	timeShell(t, "tar czf "+archive+" -C "+filepath.Dir(src)+" src")
	d := e.startDaemon(t)
	n := 0
	// Each side starts from the same state: the previous tree deleted and
	// the disk synced, outside the timing. (A deletion left running in the
	// background slowed whichever side ran next: ext4 creates files slowly
	// while it frees thousands of others.)
	settle := func(dest string) {
		os.RemoveAll(dest)
		timeShell(t, "sync")
	}
	viaTar := func() time.Duration {
		n++
		dest := filepath.Join(e.dir, "tar", strconv.Itoa(n))
		os.MkdirAll(dest, 0o755)
		took := timeShell(t, "tar xzf "+archive+" -C "+dest)
		settle(dest)
		return took
	}
	viaSous := func() time.Duration {
		n++
		copyPath := filepath.Join(e.dir, fmt.Sprintf("copy%d.tar.gz", n))
		timeShell(t, "cp "+archive+" "+copyPath+" && sync") // extract_tar consumes its archive
		dest := filepath.Join(e.dir, "extracted", strconv.Itoa(n))
		took := timeShell(t, e.bin+" files extract-tar --socket "+d.socket+" "+copyPath+" "+dest, "SOUS_TOKEN="+d.token)
		settle(dest)
		return took
	}
	tb, ts := e.interleave(t, viaTar, viaSous)
	ratio := ts.Seconds() / tb.Seconds()
	return row{figure: "extract_tar of the Go source tree as tar.gz", baseline: "`tar xzf`", target: "no slower than 1.2x",
		result: fmt.Sprintf("%.2fx (%.2f vs %.2f s)", ratio, ts.Seconds(), tb.Seconds()), ok: ratio <= 1.2}
}

func (e *env) concurrentChildren(t *testing.T) row {
	recipe := filepath.Join(e.dir, "fanout.star")
	os.WriteFile(recipe, []byte(`ps = [spawn(["sleep", "1"], echo=False) for i in range(200)]
rs = wait_all(ps)
if len([r for r in rs if r.ok]) != 200:
    fail("not all children succeeded")
`), 0o644)
	var ds []time.Duration
	for range e.repeats {
		ds = append(ds, timeShell(t, e.bin+" run "+recipe))
	}
	beyond := median(ds) - time.Second
	return row{figure: "200 concurrent children spawned and waited from a recipe", baseline: "the children's own 1 s", target: "under 2 s beyond",
		result: fmt.Sprintf("%.2f s beyond", beyond.Seconds()), ok: beyond < 2*time.Second}
}

func human(n int64) string {
	if n >= 1<<30 && n%(1<<30) == 0 {
		return fmt.Sprintf("%d GiB", n>>30)
	}
	return fmt.Sprintf("%d MiB", n>>20)
}
