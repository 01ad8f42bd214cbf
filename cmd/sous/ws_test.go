package main

import (
	"bufio"
	"bytes"
	"context"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/seed5ad92d46/sous/daemon/client"
	"github.com/seed5ad92d46/sous/internal/testutil"
)

// servedDaemon is `sous daemon serve` run as a real subprocess.
type servedDaemon struct {
	cmd            *exec.Cmd
	stdout, stderr *testutil.SyncBuffer
	exited         chan struct{}
}

// serveDaemonProc starts `sous daemon serve ARGS... --token-file F` and
// waits until it printed n "listening" lines.
func serveDaemonProc(t *testing.T, token string, n int, args ...string) *servedDaemon {
	t.Helper()
	args = append([]string{"daemon", "serve", "--token-file", tokenFile(t, token)}, args...)
	d := &servedDaemon{cmd: exec.Command(sousBinary(t), args...), stdout: &testutil.SyncBuffer{}, stderr: &testutil.SyncBuffer{}, exited: make(chan struct{})}
	d.cmd.Stdout, d.cmd.Stderr = d.stdout, d.stderr
	if err := d.cmd.Start(); err != nil {
		t.Fatal(err)
	}
	go func() { d.cmd.Wait(); close(d.exited) }()
	t.Cleanup(func() {
		d.cmd.Process.Signal(syscall.SIGTERM)
		select {
		case <-d.exited:
		case <-time.After(10 * time.Second):
			d.cmd.Process.Kill()
			<-d.exited
		}
		if t.Failed() {
			t.Logf("daemon stdout:\n%s\ndaemon stderr:\n%s", d.stdout, d.stderr)
		}
	})
	d.waitFor(t, func() bool { return strings.Count(d.stdout.String(), "listening on") >= n }, "listening lines")
	return d
}

func (d *servedDaemon) waitFor(t *testing.T, cond func() bool, what string) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for !cond() {
		select {
		case <-d.exited:
			t.Fatalf("daemon exited while waiting for %s\nstdout:\n%s\nstderr:\n%s", what, d.stdout, d.stderr)
		default:
		}
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s\nstdout:\n%s\nstderr:\n%s", what, d.stdout, d.stderr)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

var (
	wsLine      = regexp.MustCompile(`listening on (ws://\S+)`)
	metricsLine = regexp.MustCompile(`metrics: serving (http://\S+/metrics)`)
)

// url returns the first match of re in the daemon's output.
func (d *servedDaemon) url(t *testing.T, re *regexp.Regexp) string {
	t.Helper()
	var u string
	d.waitFor(t, func() bool {
		m := re.FindStringSubmatch(d.stdout.String() + d.stderr.String())
		if m != nil {
			u = m[1]
		}
		return m != nil
	}, re.String())
	return u
}

// scrape fetches the metrics and returns them by name (labels-free lines).
func scrape(t *testing.T, url string) (map[string]float64, string) {
	t.Helper()
	resp, err := http.Get(url)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(resp.Body)
	if resp.StatusCode != 200 {
		t.Fatalf("GET %s: %d %s", url, resp.StatusCode, body)
	}
	m := make(map[string]float64)
	sc := bufio.NewScanner(strings.NewReader(string(body)))
	for sc.Scan() {
		name, val, ok := strings.Cut(sc.Text(), " ")
		if !ok || strings.HasPrefix(name, "#") {
			continue
		}
		if f, err := strconv.ParseFloat(val, 64); err == nil {
			m[name] = f
		}
	}
	return m, string(body)
}

// `sous daemon serve --listen ws://...` end to end: sous exec and sous run
// --remote ws://..., host("ws://..."), bearer refusal, and the metrics
// moving with what the clients did.
func TestWebSocketServeEndToEnd(t *testing.T) {
	t.Parallel()
	const token = "ws end-to-end token"
	d := serveDaemonProc(t, token, 1, "--socket", "", "--listen", "ws://127.0.0.1:0", "--metrics-addr", "127.0.0.1:0")
	ws := strings.TrimSuffix(d.url(t, wsLine), "/")
	metricsURL := d.url(t, metricsLine)
	tok := tokenFile(t, token)

	before, _ := scrape(t, metricsURL)
	for _, name := range []string{"sous_daemon_spawns_total", "sous_daemon_connections_total", "sous_daemon_websocket_connections_open"} {
		if v, ok := before[name]; !ok || v != 0 {
			t.Errorf("%s = %v (present %v) before any client", name, v, ok)
		}
	}

	// sous exec exits with the child's code; output and stdin go through.
	o := sous(t, "exec", "--remote", ws, "--token-file", tok, "--", "sh", "-c", "echo out; echo err >&2; exit 3")
	if o.code != 3 || o.stdout != "out\n" || !strings.Contains(o.stderr, "err\n") {
		t.Fatalf("exec: code %d stdout %q stderr %q", o.code, o.stdout, o.stderr)
	}
	// A wrong token is refused at the upgrade, in one clear line.
	o = sous(t, "exec", "--remote", ws, "--token-file", tokenFile(t, "wrong"), "--", "true")
	if o.code == 0 || !strings.Contains(o.stderr, "daemon refused the token (HTTP 401") {
		t.Fatalf("wrong token: code %d stderr %q", o.code, o.stderr)
	}

	// sous run: the default host and host() both over WebSocket.
	src := `
print(run(["sh", "-c", "echo default host"], echo = False).stdout.strip())
h = host("` + ws + `", token = "` + token + `")
p = h.spawn(["cat"], echo = False)
p.write("via host\n")
p.close_stdin()
print(p.wait().stdout.strip())
print(h.run(["sh", "-c", "echo $((6*7))"], echo = False).stdout.strip())
`
	o, _ = runStar(t, src, "--remote", ws, "--token-file", tok)
	if o.code != 0 || !strings.Contains(o.stderr, "default host\nvia host\n42\n") {
		t.Fatalf("run: code %d\nstdout:\n%s\nstderr:\n%s", o.code, o.stdout, o.stderr)
	}

	// Exits are counted as the daemon reaps; the last may trail the run.
	after, body := scrape(t, metricsURL)
	for deadline := time.Now().Add(5 * time.Second); after["sous_daemon_exits_total"] < 4 && time.Now().Before(deadline); {
		time.Sleep(10 * time.Millisecond)
		after, body = scrape(t, metricsURL)
	}
	if got := after["sous_daemon_spawns_total"] - before["sous_daemon_spawns_total"]; got < 4 {
		t.Errorf("spawns_total moved by %v, want at least 4", got)
	}
	if after["sous_daemon_exits_total"] < 4 || after["sous_daemon_stream_bytes_total"] == 0 {
		t.Errorf("exits %v, stream bytes %v", after["sous_daemon_exits_total"], after["sous_daemon_stream_bytes_total"])
	}
	if after["sous_daemon_connections_total"] < 3 || after["sous_daemon_websocket_upgrades_unauthorized_total"] != 1 {
		t.Errorf("connections %v, unauthorized upgrades %v", after["sous_daemon_connections_total"], after["sous_daemon_websocket_upgrades_unauthorized_total"])
	}
	if !strings.Contains(body, "# TYPE sous_daemon_spawns_total counter") || !strings.Contains(body, "# TYPE sous_daemon_connections_open gauge") {
		t.Errorf("metric types missing:\n%s", body)
	}
	if strings.Contains(body, token) || strings.Contains(body, "echo") {
		t.Errorf("a token or a command reached the metrics")
	}
}

func TestWebSocketServeStdinAndReattach(t *testing.T) {
	t.Parallel()
	const token = "tok"
	sock := filepath.Join(testutil.ShortTempDir(t), "d.sock")
	d := serveDaemonProc(t, token, 2, "--socket", sock, "--listen", "ws://127.0.0.1:0/rpc")
	ws := d.url(t, wsLine)
	if !strings.HasSuffix(ws, "/rpc") {
		t.Fatalf("url %s", ws)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	c, err := client.Open(ctx, client.Target{URL: ws, Token: token})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Shutdown()
	p, err := c.Spawn(ctx, client.SpawnSpec{ID: "cat", Command: "cat"}, nil)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := p.Write(ctx, []byte("hello over ws\n")); err != nil {
		t.Fatal(err)
	}
	if err := p.CloseStdin(ctx); err != nil {
		t.Fatal(err)
	}
	if code, err := p.Wait(ctx); code != 0 || err != nil {
		t.Fatalf("wait: %d %v", code, err)
	}
	// `sous attach` replays the whole output over the Unix socket.
	o := sous(t, "attach", "--socket", sock, "--token-file", tokenFile(t, token), "cat")
	if o.code != 0 || o.stdout != "hello over ws\n" {
		t.Fatalf("attach: code %d stdout %q stderr %q", o.code, o.stdout, o.stderr)
	}
}

// Flag mistakes, and a socket that cannot be served, fail serve and start
// before the token file is read (and deleted): the user fixes the command
// and runs it again with the same file.
func TestDaemonServeFlagErrors(t *testing.T) {
	t.Parallel()
	tok := tokenFile(t, "x")
	dir := testutil.ShortTempDir(t)
	busy := filepath.Join(dir, "busy.sock")
	ln, err := net.Listen("unix", busy)
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	notSocket := filepath.Join(dir, "file")
	os.WriteFile(notSocket, []byte("keep me"), 0o600)
	free := filepath.Join(dir, "free.sock")
	for _, tc := range []struct {
		args []string
		code int
		want string
	}{
		{[]string{"serve", "--listen", "http://127.0.0.1:1"}, 2, "want ws://HOST:PORT[/PATH]"},
		{[]string{"serve", "--listen", "ws://127.0.0.1"}, 2, "want ws://HOST:PORT[/PATH]"},
		{[]string{"serve", "--listen", "wss://127.0.0.1:1"}, 2, "put TLS in front of it"},
		{[]string{"serve", "--socket", ""}, 2, `--socket "" needs a --listen`},
		{[]string{"serve", "--socket", free, "--log-format", "bogus"}, 2, `--log-format: want text or json, got "bogus"`},
		{[]string{"serve", "--socket", free, "--allow-command", ""}, 2, `--allow-command: allowed command "": want a program name`},
		{[]string{"serve", "--socket", busy}, 1, "a daemon is already serving this socket"},
		{[]string{"serve", "--socket", notSocket}, 1, "the path exists and is not a socket"},
		{[]string{"start", "--socket", busy}, 1, "a daemon is already serving this socket"},
		{[]string{"start", "--socket", filepath.Join(dir, "missing", "d.sock")}, 1, "start: --socket " + filepath.Join(dir, "missing", "d.sock") + ": its directory: "},
		{[]string{"start", "--socket", free, "--log-format", "bogus"}, 2, `--log-format: want text or json`},
	} {
		o := sous(t, append([]string{"daemon", tc.args[0], "--token-file", tok}, tc.args[1:]...)...)
		if o.code != tc.code || !strings.Contains(o.stderr, tc.want) {
			t.Errorf("%v: code %d stderr %q, want %d and %q", tc.args, o.code, o.stderr, tc.code, tc.want)
		}
		if _, err := os.Stat(tok); err != nil {
			t.Fatalf("%v consumed the token file: %v", tc.args, err)
		}
	}
	if b, _ := os.ReadFile(notSocket); string(b) != "keep me" {
		t.Errorf("the file named by --socket was changed: %q", b)
	}
}

// A metrics address that cannot be bound is logged, and the daemon serves.
func TestMetricsBindFailureIsNotFatal(t *testing.T) {
	t.Parallel()
	busy, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer busy.Close()
	sock := filepath.Join(testutil.ShortTempDir(t), "d.sock")
	d := serveDaemonProc(t, "tok", 1, "--socket", sock, "--metrics-addr", busy.Addr().String())
	d.waitFor(t, func() bool {
		return strings.Contains(d.stderr.String(), "[Server] metrics: listen tcp "+busy.Addr().String())
	}, "the metrics error")
	c := dialDaemon(t, sock, "tok")
	if err := c.Call(context.Background(), "server.ping", nil, nil); err != nil {
		t.Fatal(err)
	}
}

// --keep-children through the real command: SIGTERM leaves the child
// running and logs the contract's line; without the flag it is killed.
func TestKeepChildrenThroughServe(t *testing.T) {
	t.Parallel()
	for _, keep := range []bool{true, false} {
		sock := filepath.Join(testutil.ShortTempDir(t), "d.sock")
		args := []string{"--socket", sock}
		if keep {
			args = append(args, "--keep-children")
		}
		d := serveDaemonProc(t, "tok", 1, args...)
		c := dialDaemon(t, sock, "tok")
		pidFile := filepath.Join(t.TempDir(), "pid")
		ctx := context.Background()
		if _, err := c.Spawn(ctx, client.SpawnSpec{ID: "kid", Command: "sh", Args: []string{"-c", "echo $$ > " + pidFile + "; exec sleep 60"}}, nil); err != nil {
			t.Fatal(err)
		}
		d.waitFor(t, func() bool { b, _ := os.ReadFile(pidFile); return strings.HasSuffix(string(b), "\n") }, "the child's pid")
		pid := readPid(t, pidFile)
		d.cmd.Process.Signal(syscall.SIGTERM)
		select {
		case <-d.exited:
		case <-time.After(10 * time.Second):
			t.Fatal("daemon did not exit on SIGTERM")
		}
		const line = "[Server] -keep-children: leaving 1 running child process(es) alive across shutdown"
		if keep {
			if !strings.Contains(d.stderr.String(), line) {
				t.Errorf("log lacks %q:\n%s", line, d.stderr)
			}
			if !testutil.Alive(pid) {
				t.Errorf("--keep-children: child %d was killed", pid)
			}
			syscall.Kill(pid, syscall.SIGKILL)
		} else {
			waitGone(t, pid, 5*time.Second)
			if strings.Contains(d.stderr.String(), "-keep-children") {
				t.Errorf("keep-children line without the flag:\n%s", d.stderr)
			}
		}
	}
}

// sous exec over a WebSocket forwards a large stdin through process.stdin
// (batched while writes are answered, the batches pipelined where the
// daemon orders them: daemon/client's tests time that), and the command
// reads it exactly: from a socket (not a pipe, so nothing could be passed
// even on a Unix socket) that delivers in small pieces.
func TestWebSocketExecLargeStdin(t *testing.T) {
	t.Parallel()
	const token = "tok"
	d := serveDaemonProc(t, token, 1, "--socket", "", "--listen", "ws://127.0.0.1:0/")
	ws := d.url(t, wsLine)
	dir := t.TempDir()
	_, data := randomDataFile(t, dir, 12<<20+3)
	out := filepath.Join(dir, "received")
	fds, err := unix.Socketpair(unix.AF_UNIX, unix.SOCK_STREAM|unix.SOCK_CLOEXEC, 0)
	if err != nil {
		t.Fatal(err)
	}
	ours, theirs := os.NewFile(uintptr(fds[0]), "ours"), os.NewFile(uintptr(fds[1]), "theirs")
	defer theirs.Close()
	go func() {
		for rest := data; len(rest) > 0; {
			n := min(len(rest), 100<<10)
			ours.Write(rest[:n])
			rest = rest[n:]
		}
		ours.Close()
	}()
	cmd := exec.Command(sousBinary(t), "exec", "--remote", ws, "--", "sh", "-c", `cat > "$0"`, out)
	cmd.Env = append(cleanEnv(), "SOUS_TOKEN="+token)
	cmd.Stdin = theirs
	if b, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("exec: %v\n%s", err, b)
	}
	got, err := os.ReadFile(out)
	if err != nil || !bytes.Equal(got, data) {
		t.Fatalf("the command read %d bytes (%v), want the %d sent", len(got), err, len(data))
	}
}
