package client_test

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"path/filepath"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/seed5ad92d46/sous/daemon"
	"github.com/seed5ad92d46/sous/daemon/client"
	"github.com/seed5ad92d46/sous/daemon/wire"
	"github.com/seed5ad92d46/sous/internal/soak"
	"github.com/seed5ad92d46/sous/internal/testutil"
)

// TestLoadMixedClients holds 32 concurrent clients, each on its own
// connection, doing a mix of requests against one socket daemon for a fixed
// time (5 s in CI, 2 min with SOUS_SOAK=1): server.ping, files.stat,
// process.spawn + wait of /bin/true, and process.stdin to a cat each client
// keeps running. Every request must succeed, every byte written to a cat must
// come back, and afterwards the daemon's goroutines, open files and children
// are back where they started. Latency percentiles per request kind are
// logged.
//
// The daemon runs in this test process, so "the daemon's" goroutines, fds
// and children are this process's: the test does not run in parallel with
// others.
func TestLoadMixedClients(t *testing.T) {
	const clients = 32
	dur := soak.Duration(5*time.Second, 2*time.Minute)
	if testing.Short() {
		dur = time.Second
	}
	sock := startDaemon(t, daemon.Config{ShutdownGrace: time.Second})
	statPath := filepath.Join(t.TempDir(), "stat-me")
	if err := os.WriteFile(statPath, []byte("x"), 0o600); err != nil {
		t.Fatal(err)
	}
	trueCmd := "/bin/true"
	if _, err := os.Stat(trueCmd); err != nil {
		trueCmd = "true"
	}

	// Baselines, with the daemon up and idle.
	runtime.GC()
	var mem runtime.MemStats
	runtime.ReadMemStats(&mem)
	baseHeap := mem.HeapAlloc
	baseGoroutines := runtime.NumGoroutine()
	baseFDs := testutil.OpenFDs(t)
	baseChildren := children(os.Getpid())

	ctx, cancel := context.WithTimeout(context.Background(), dur+2*time.Minute)
	defer cancel()
	var (
		mu       sync.Mutex
		lat      = map[string][]time.Duration{}
		errs     []string
		requests atomic.Int64
	)
	record := func(kind string, d time.Duration, err error) {
		requests.Add(1)
		mu.Lock()
		defer mu.Unlock()
		lat[kind] = append(lat[kind], d)
		if err != nil && len(errs) < 20 {
			errs = append(errs, fmt.Sprintf("%s: %v", kind, err))
		}
	}
	start := time.Now()
	stop := start.Add(dur)
	var wg sync.WaitGroup
	for i := range clients {
		wg.Add(1)
		go func() {
			defer wg.Done()
			c, err := client.DialUnix(ctx, sock, testToken, client.Options{})
			if err != nil {
				record("dial", 0, err)
				return
			}
			defer c.Close()
			var echoed bytes.Buffer
			var echoMu sync.Mutex
			cat, err := c.Spawn(ctx, client.SpawnSpec{ID: fmt.Sprintf("cat-%d", i), Command: "cat"}, func(f *wire.Frame) {
				if f.Stream == wire.Stdout {
					echoMu.Lock()
					echoed.Write(f.Data)
					echoMu.Unlock()
				}
			})
			if err != nil {
				record("spawn cat", 0, err)
				return
			}
			var sent bytes.Buffer
			for n := 0; time.Now().Before(stop); n++ {
				var kind string
				t0 := time.Now()
				switch n % 4 {
				case 0:
					kind = "server.ping"
					err = c.Call(ctx, "server.ping", nil, nil)
				case 1:
					kind = "files.stat"
					var st wire.StatResult
					err = c.Call(ctx, "files.stat", map[string]string{"path": statPath}, &st)
					if err == nil && (!st.Exists || st.Size != 1) {
						err = fmt.Errorf("stat %s: %+v", statPath, st)
					}
				case 2:
					kind = "spawn+wait /bin/true"
					var p *client.Proc
					p, err = c.Spawn(ctx, client.SpawnSpec{ID: fmt.Sprintf("true-%d-%d", i, n), Command: trueCmd}, nil)
					if err == nil {
						var code int
						code, err = p.Wait(ctx)
						if err == nil && code != 0 {
							err = fmt.Errorf("true exited %d", code)
						}
					}
				case 3:
					kind = "process.stdin"
					line := "client " + strconv.Itoa(i) + " line " + strconv.Itoa(n) + "\n"
					sent.WriteString(line)
					_, err = cat.Write(ctx, []byte(line))
				}
				record(kind, time.Since(t0), err)
				if err != nil {
					return
				}
			}
			if err := cat.CloseStdin(ctx); err != nil {
				record("close stdin", 0, err)
				return
			}
			if code, err := cat.Wait(ctx); err != nil || code != 0 {
				record("wait cat", 0, fmt.Errorf("code %d, %v", code, err))
				return
			}
			echoMu.Lock()
			defer echoMu.Unlock()
			if !bytes.Equal(echoed.Bytes(), sent.Bytes()) {
				record("cat echo", 0, fmt.Errorf("cat %d echoed %d bytes, sent %d", i, echoed.Len(), sent.Len()))
			}
		}()
	}
	wg.Wait()
	elapsed := time.Since(start)
	if len(errs) > 0 {
		t.Fatalf("%d clients under load: errors:\n%s", clients, strings.Join(errs, "\n"))
	}

	var report strings.Builder
	var all []time.Duration
	kinds := make([]string, 0, len(lat))
	for k := range lat {
		kinds = append(kinds, k)
	}
	slices.Sort(kinds)
	for _, k := range kinds {
		all = append(all, lat[k]...)
		fmt.Fprintf(&report, "\n  %-22s %s", k, percentiles(lat[k]))
	}
	t.Logf("load: %d clients, %s, %d requests (%.0f/s), zero errors; latency:%s\n  %-22s %s",
		clients, elapsed.Round(time.Millisecond), requests.Load(), float64(requests.Load())/elapsed.Seconds(),
		report.String(), "all", percentiles(all))

	// Back to baseline: goroutines, open files, children.
	if g, err := settle(baseGoroutines, 10*time.Second, runtime.NumGoroutine); err != nil {
		t.Errorf("goroutines: %d after the load, %d before\n%s", g, baseGoroutines, goroutineDump())
	}
	if n, err := settle(baseFDs, 10*time.Second, func() int { return testutil.OpenFDs(t) }); err != nil {
		t.Errorf("open files: %d after the load, %d before", n, baseFDs)
	}
	deadline := time.Now().Add(10 * time.Second)
	for {
		extra := newChildren(baseChildren, children(os.Getpid()))
		if len(extra) == 0 {
			break
		}
		if time.Now().After(deadline) {
			t.Errorf("children left behind: %v", extra)
			break
		}
		time.Sleep(20 * time.Millisecond)
	}
	runtime.GC()
	runtime.ReadMemStats(&mem)
	// The heap does not go back: the daemon keeps every exited process (its
	// exit frame, for replay) until it stops. Reported, not judged.
	t.Logf("after the load: %d goroutines (baseline %d), %d open files (baseline %d), no child left; heap %+.1f MiB (exited processes kept for replay)",
		runtime.NumGoroutine(), baseGoroutines, testutil.OpenFDs(t), baseFDs, (float64(mem.HeapAlloc)-float64(baseHeap))/(1<<20))
}

// percentiles formats p50, p90, p99 and max of ds.
func percentiles(ds []time.Duration) string {
	if len(ds) == 0 {
		return "none"
	}
	s := slices.Clone(ds)
	slices.Sort(s)
	at := func(q float64) time.Duration { return s[min(len(s)-1, int(q*float64(len(s))))] }
	r := func(d time.Duration) string {
		switch {
		case d < time.Millisecond:
			return d.Round(time.Microsecond).String()
		default:
			return d.Round(10 * time.Microsecond).String()
		}
	}
	return fmt.Sprintf("n=%-6d p50 %-8s p90 %-8s p99 %-8s max %s", len(s), r(at(.5)), r(at(.9)), r(at(.99)), r(s[len(s)-1]))
}

// settle waits until get() is at most want, returning the last value.
func settle(want int, timeout time.Duration, get func() int) (int, error) {
	deadline := time.Now().Add(timeout)
	for {
		n := get()
		if n <= want {
			return n, nil
		}
		if time.Now().After(deadline) {
			return n, fmt.Errorf("%d > %d", n, want)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

func goroutineDump() string {
	buf := make([]byte, 1<<20)
	return string(buf[:runtime.Stack(buf, true)])
}

// openFDs counts this process's open file descriptors.

// children lists the pids whose parent is ppid, zombies included (a child
// nobody reaped is left behind too).
func children(ppid int) []int {
	ents, _ := os.ReadDir("/proc")
	var out []int
	for _, e := range ents {
		pid, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		stat, err := os.ReadFile("/proc/" + e.Name() + "/stat")
		if err != nil {
			continue
		}
		// pid (comm) state ppid ...
		i := bytes.LastIndexByte(stat, ')')
		if i < 0 {
			continue
		}
		f := strings.Fields(string(stat[i+1:]))
		if len(f) > 1 && f[1] == strconv.Itoa(ppid) {
			out = append(out, pid)
		}
	}
	return out
}

func newChildren(before, now []int) []int {
	var out []int
	for _, p := range now {
		if !slices.Contains(before, p) {
			out = append(out, p)
		}
	}
	return out
}
