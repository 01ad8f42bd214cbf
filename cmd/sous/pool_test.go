package main

import (
	"bufio"
	"context"
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/seed5ad92d46/sous/daemon/client"
	"github.com/seed5ad92d46/sous/daemon/wire"
	"github.com/seed5ad92d46/sous/internal/testutil"
)

const poolToken = "pool token"

// poolDaemon is one `sous daemon serve` of a pool test: its target and a
// client of the test's own that counts its running processes.
type poolDaemon struct {
	target string
	served *servedDaemon
	watch  *client.Client
}

// socketPoolDaemon serves a daemon on a Unix socket; wsPoolDaemon on
// WebSocket only.
func socketPoolDaemon(t *testing.T) *poolDaemon {
	t.Helper()
	sock := filepath.Join(shortTempDir(t), "d.sock")
	return newPoolDaemon(t, "unix://"+sock, serveDaemonProc(t, poolToken, 1, "--socket", sock))
}

func wsPoolDaemon(t *testing.T) *poolDaemon {
	t.Helper()
	d := serveDaemonProc(t, poolToken, 1, "--socket", "", "--listen", "ws://127.0.0.1:0")
	return newPoolDaemon(t, strings.TrimSuffix(d.url(t, wsLine), "/"), d)
}

func newPoolDaemon(t *testing.T, target string, d *servedDaemon) *poolDaemon {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	conn, err := client.Open(ctx, client.Target{URL: target, Token: poolToken, Options: client.Options{ReconnectTimeout: -1}})
	if err != nil {
		t.Fatalf("%s: %v", target, err)
	}
	t.Cleanup(func() { conn.Close() })
	return &poolDaemon{target: target, served: d, watch: conn.Client}
}

// shortTempDir is a temp dir with a short path: a socket path has at most
// 107 bytes and t.TempDir's names are long.
func shortTempDir(t *testing.T) string {
	t.Helper()
	dir, err := os.MkdirTemp("", "pool")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(dir) })
	return dir
}

// running counts the processes the daemon runs now; -1 once it is gone.
func (d *poolDaemon) running() int {
	ctx, cancel := context.WithTimeout(context.Background(), time.Second)
	defer cancel()
	var res wire.ProcessListResult
	if err := d.watch.Call(ctx, "process.list", struct{}{}, &res); err != nil {
		return -1
	}
	n := 0
	for _, p := range res.Processes {
		if p.Running {
			n++
		}
	}
	return n
}

// kill SIGKILLs the daemon: no goodbye, no socket removed.
func (d *poolDaemon) kill(t *testing.T) {
	t.Helper()
	if err := d.served.cmd.Process.Signal(syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	<-d.served.exited
}

// sampler records, until stopped, the most processes each daemon ran at
// once, sampled with process.list every few milliseconds.
type sampler struct {
	mu   sync.Mutex
	most map[string]int
	stop chan struct{}
	done chan struct{}
}

func sample(daemons ...*poolDaemon) *sampler {
	s := &sampler{most: make(map[string]int), stop: make(chan struct{}), done: make(chan struct{})}
	go func() {
		defer close(s.done)
		for {
			for _, d := range daemons {
				n := d.running()
				s.mu.Lock()
				s.most[d.target] = max(s.most[d.target], n)
				s.mu.Unlock()
			}
			select {
			case <-s.stop:
				return
			case <-time.After(5 * time.Millisecond):
			}
		}
	}()
	return s
}

func (s *sampler) finish() map[string]int {
	close(s.stop)
	<-s.done
	return s.most
}

// runPool runs the recipe src with the sous binary, args a=..., b=...
// naming the daemons' targets, and a reconnect timeout short enough that
// a killed daemon is lost for good at once; during runs meanwhile. With
// asJSON it runs with --json and returns the events, else nil. It returns
// the exit code and stderr too.
func runPool(t *testing.T, src string, daemons []*poolDaemon, asJSON bool, during func()) (int, []map[string]any, string) {
	t.Helper()
	dir := testutil.WriteTree(t, map[string]string{"main.star": src})
	args := []string{"run", filepath.Join(dir, "main.star")}
	if asJSON {
		args = append(args, "--json")
	}
	for i, d := range daemons {
		args = append(args, "-a", string(rune('a'+i))+"="+d.target)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	cmd := exec.CommandContext(ctx, sousBinary(t), args...)
	cmd.Env = append(os.Environ(), "SOUS_TOKEN="+poolToken, "SOUS_RECONNECT_TIMEOUT=1s")
	stdout, stderr := &testutil.SyncBuffer{}, &testutil.SyncBuffer{}
	cmd.Stdout, cmd.Stderr = stdout, stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	if during != nil {
		during()
	}
	err := cmd.Wait()
	code := 0
	if ee, ok := err.(*exec.ExitError); ok {
		code = ee.ExitCode()
	} else if err != nil {
		t.Fatal(err)
	}
	if !asJSON {
		return code, nil, stderr.String()
	}
	var events []map[string]any
	sc := bufio.NewScanner(strings.NewReader(stdout.String()))
	for sc.Scan() {
		var ev map[string]any
		if err := json.Unmarshal(sc.Bytes(), &ev); err != nil {
			t.Fatalf("not a JSON line: %q", sc.Text())
		}
		events = append(events, ev)
	}
	return code, events, stderr.String()
}

// logs is the text of the log events (the recipe's print).
func logs(events []map[string]any) string {
	var b strings.Builder
	for _, ev := range events {
		if ev["event"] == "log" {
			b.WriteString(ev["text"].(string) + "\n")
		}
	}
	return b.String()
}

// spawnsByHost counts the spawn events of each host.
func spawnsByHost(events []map[string]any) map[string]int {
	n := make(map[string]int)
	for _, ev := range events {
		if ev["event"] == "spawn" {
			n[ev["host"].(string)]++
		}
	}
	return n
}

// waitRunning waits until d runs want processes.
func waitRunning(t *testing.T, d *poolDaemon, want int) {
	t.Helper()
	for deadline := time.Now().Add(20 * time.Second); d.running() < want; {
		if time.Now().After(deadline) {
			t.Fatalf("%s never ran %d processes", d.target, want)
		}
		time.Sleep(5 * time.Millisecond)
	}
}

// TestHostsPoolKeepsToItsSlots: a pool of two socket daemons and one
// WebSocket daemon with 2 slots each runs 18 tasks, never more than 2 at
// once on a daemon (sampled there with process.list), every daemon busy,
// the results in item order.
func TestHostsPoolKeepsToItsSlots(t *testing.T) {
	t.Parallel()
	daemons := []*poolDaemon{socketPoolDaemon(t), socketPoolDaemon(t), wsPoolDaemon(t)}
	src := `
pool = hosts([args["a"], args["b"], args["c"]], slots=2)
def start(i, h):
    return h.spawn(["sh", "-c", "sleep 0.3; echo %d" % i], echo=False)
res = parallel(list(range(18)), start, hosts=pool)
print([r.stdout.strip() for r in res] == [str(i) for i in range(18)])
print(pool.slots, pool.targets == [args["a"], args["b"], args["c"]], len(pool.hosts), pool.lost)
print(pool)
`
	var s *sampler
	code, events, stderr := runPool(t, src, daemons, true, func() { s = sample(daemons...) })
	most := s.finish()
	if code != 0 {
		t.Fatalf("exit %d\n%s", code, stderr)
	}
	if got, want := logs(events), "True\n2 True 3 []\n<Pool 3 hosts, 2 slots each, 0 lost>\n"; got != want {
		t.Errorf("printed %q, want %q", got, want)
	}
	for _, d := range daemons {
		if most[d.target] != 2 {
			t.Errorf("%s ran at most %d at once, want 2 (its slots)", d.target, most[d.target])
		}
	}
	// The spawn events say where each task ran: the pool spreads them
	// (6 each, unless one host ran a whole wave of tasks ahead).
	byHost, sum := spawnsByHost(events), 0
	for _, d := range daemons {
		if byHost[d.target] < 4 {
			t.Errorf("%s ran %d tasks, want about 6: %v", d.target, byHost[d.target], byHost)
		}
		sum += byHost[d.target]
	}
	if sum != 18 {
		t.Errorf("%d tasks spawned, want 18: %v", sum, byHost)
	}
	var last map[string]any
	for _, ev := range events {
		if ev["event"] == "parallel" {
			last = ev
		}
	}
	if last["done"] != 18.0 || last["running"] != 0.0 || last["remaining"] != 0.0 || last["total"] != 18.0 {
		t.Errorf("the last progress is %v", last)
	}
}

// TestHostsPoolMovesALostHostsTasks: the WebSocket daemon of the pool is
// killed while it runs two tasks; once its connection is lost for good
// those tasks start again on the socket daemons and the run succeeds,
// with every result in its place and the lost host named.
func TestHostsPoolMovesALostHostsTasks(t *testing.T) {
	t.Parallel()
	daemons := []*poolDaemon{socketPoolDaemon(t), socketPoolDaemon(t), wsPoolDaemon(t)}
	victim := daemons[2]
	src := `
pool = hosts([args["a"], args["b"], args["c"]], slots=2)
def start(i, h):
    return h.spawn(["sh", "-c", "sleep 0.5; echo %d" % i], echo=False)
res = parallel(list(range(12)), start, hosts=pool)
print([r.stdout.strip() for r in res] == [str(i) for i in range(12)])
print(pool.lost == [args["c"]], pool.targets == [args["a"], args["b"]])
`
	var s *sampler
	code, events, stderr := runPool(t, src, daemons, true, func() {
		waitRunning(t, victim, 2)
		victim.kill(t)
		s = sample(daemons[:2]...)
	})
	most := s.finish()
	if code != 0 {
		t.Fatalf("exit %d\n%s", code, stderr)
	}
	if got, want := logs(events), "True\nTrue True\n"; got != want {
		t.Errorf("printed %q, want %q", got, want)
	}
	var lost []map[string]any
	for _, ev := range events {
		if l, ok := ev["lost_host"].(map[string]any); ok {
			lost = append(lost, l)
		}
	}
	if len(lost) != 1 || lost[0]["host"] != victim.target || lost[0]["moved"] != 2.0 ||
		!strings.Contains(lost[0]["error"].(string), "connection to the daemon lost") {
		t.Errorf("lost_host in the parallel events: %v", lost)
	}
	// Every item ran once on the hosts that stayed: 10 placed there and
	// the 2 moved. The victim ran 2, but the answer to a spawn can die
	// with its daemon, so the recipe may have seen fewer of them.
	byHost := spawnsByHost(events)
	if byHost[daemons[0].target]+byHost[daemons[1].target] != 12 || byHost[victim.target] > 2 {
		t.Errorf("spawns by host: %v, want 12 on the socket daemons and at most 2 on the lost one", byHost)
	}
	for _, d := range daemons[:2] {
		if most[d.target] > 2 {
			t.Errorf("%s ran %d at once, more than its 2 slots", d.target, most[d.target])
		}
	}
}

// TestHostsPoolWithEveryHostLost: when every daemon of the pool is killed,
// parallel fails saying so and naming each; the human output said as each
// was lost.
func TestHostsPoolWithEveryHostLost(t *testing.T) {
	t.Parallel()
	daemons := []*poolDaemon{socketPoolDaemon(t), socketPoolDaemon(t)}
	src := `
pool = hosts([args["a"], args["b"]], slots=1)
parallel(list(range(4)), lambda i, h: h.spawn(["sleep", "3"], echo=False), hosts=pool)
print("finished")
`
	code, _, stderr := runPool(t, src, daemons, false, func() {
		for _, d := range daemons {
			waitRunning(t, d, 1)
		}
		for _, d := range daemons {
			d.kill(t)
		}
	})
	if code != 1 {
		t.Fatalf("exit %d, want 1\n%s", code, stderr)
	}
	wants := []string{"main.star:3:9", "parallel: every host of the pool was lost, 4 of 4 items not done: ",
		daemons[0].target + " (connection to the daemon lost", daemons[1].target + " (connection to the daemon lost"}
	for _, d := range daemons {
		wants = append(wants, "sous: parallel: lost "+d.target+" for good (connection to the daemon lost")
	}
	for _, want := range wants {
		if !strings.Contains(stderr, want) {
			t.Errorf("stderr lacks %q:\n%s", want, stderr)
		}
	}
	if slices.Contains(strings.Split(stderr, "\n"), "finished") {
		t.Error("the recipe went on")
	}
}

// TestHostsTakesTargetsAndHosts: a pool of the embedded daemon and a Host
// value, one slot each: three tasks, results in item order; a fn that
// fails on a host that works fails its item, it is not moved.
func TestHostsTakesTargetsAndHosts(t *testing.T) {
	t.Parallel()
	sock, _ := socketDaemon(t, "tok", daemonConfig(t))
	o, _ := runStar(t, `
h = host("unix://`+sock+`", token="tok")
pool = hosts(["embedded", h], slots=1)
print(pool.targets, pool.slots, pool.hosts[1] == h)
res = parallel(["a", "b", "c"], lambda s, h: h.spawn(["echo", s], echo=False), hosts=pool)
print([r.stdout.strip() for r in res])
def bad(i, h):
    if i == 1:
        fail("no good")
    return i
parallel([0, 1, 2], bad, hosts=pool)
`)
	o.expect(t, 1, `["embedded", "unix://`+sock+`"] 1 True`+"\n"+`["a", "b", "c"]`+"\n",
		"parallel: 1 of 3 items failed: item 1 (1): fail: no good")
}

// TestHostsArgumentErrors: what hosts() and parallel(hosts=) refuse.
func TestHostsArgumentErrors(t *testing.T) {
	t.Parallel()
	missing := filepath.Join(shortTempDir(t), "none.sock")
	for _, tt := range []struct{ src, want string }{
		{`hosts([])`, "hosts: targets is empty: want at least one host target or Host"},
		{`hosts("embedded")`, "hosts: targets: want list or tuple, got string"},
		{`hosts(["embedded", "embedded"])`, "hosts: targets[1]: embedded is given twice"},
		{`hosts([1])`, "hosts: targets[0]: want a target string or Host, got int"},
		{`hosts([""])`, `hosts: target is empty`},
		{`hosts(["embedded"], slots=0)`, "hosts: slots: "},
		{`hosts(["unix://` + missing + `"])`, "hosts: connect to daemon at " + missing},
		{`parallel([1], lambda i, h: i, hosts="embedded")`, "parallel: hosts: want Pool from hosts() or None, got string"},
	} {
		o, _ := runStar(t, tt.src+"\n")
		o.expect(t, 1, tt.want)
	}
}
