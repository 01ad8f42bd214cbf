package main

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/seed5ad92d46/sous/internal/testutil"
)

// serveProc is a `sous daemon serve` subprocess: a real daemon process the
// tests can SIGKILL.
type serveProc struct {
	cmd    *exec.Cmd
	socket string
	token  string
	dir    string
	log    *testutil.SyncBuffer // its stderr (slog)
	exited chan struct{}
}

// startServe runs `sous daemon serve` with the token on --token-fd 0 and
// waits until its socket accepts. It is stopped (SIGKILL if still running)
// when the test ends; its children are the test's to clean up.
func startServe(t *testing.T, token string, extra ...string) *serveProc {
	t.Helper()
	return startServeEnv(t, token, func(string) []string { return cleanEnv() }, extra...)
}

// startServeEnv is startServe with the daemon's environment given by env,
// which is told the socket's path.
func startServeEnv(t *testing.T, token string, env func(socket string) []string, extra ...string) *serveProc {
	t.Helper()
	return startServeUnder(t, token, env, nil, extra...)
}

// startServeUnder is startServeEnv with the daemon run by the command
// under ("nohup"), which execs it.
func startServeUnder(t *testing.T, token string, env func(socket string) []string, under []string, extra ...string) *serveProc {
	t.Helper()
	bin := sousBinary(t)
	dir := testutil.ShortTempDir(t)
	s := &serveProc{socket: filepath.Join(dir, "d.sock"), token: token, dir: dir, log: &testutil.SyncBuffer{}, exited: make(chan struct{})}
	args := append([]string{"daemon", "serve", "--socket", s.socket, "--token-fd", "0", "--state-dir", filepath.Join(dir, "state")}, extra...)
	argv := append(append(append([]string(nil), under...), bin), args...)
	s.cmd = exec.Command(argv[0], argv[1:]...)
	s.cmd.Stdin = strings.NewReader(token + "\n")
	s.cmd.Stdout, s.cmd.Stderr = s.log, s.log
	s.cmd.Env = env(s.socket)
	if err := s.cmd.Start(); err != nil {
		t.Fatal(err)
	}
	go func() { s.cmd.Wait(); close(s.exited) }()
	t.Cleanup(func() {
		s.cmd.Process.Kill()
		<-s.exited
		if t.Failed() {
			t.Logf("daemon log:\n%s", s.log.String())
		}
	})
	deadline := time.Now().Add(15 * time.Second)
	for {
		if c, err := net.Dial("unix", s.socket); err == nil {
			c.Close()
			return s
		}
		select {
		case <-s.exited:
			t.Fatalf("daemon exited at start: %s", s.log.String())
		default:
		}
		if time.Now().After(deadline) {
			t.Fatalf("daemon did not accept: %s", s.log.String())
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// cleanEnv is the test's environment without any sous or claustrum
// variables, so neither a developer's daemon nor a token leaks in.
func cleanEnv() []string {
	var env []string
	for _, kv := range os.Environ() {
		if strings.HasPrefix(kv, "SOUS_") || strings.HasPrefix(kv, "CLAUDE_RPC_TOKEN=") {
			continue
		}
		env = append(env, kv)
	}
	return env
}

// clientEnv is what a client of s needs.
func (s *serveProc) clientEnv(extra ...string) []string {
	return append(append(cleanEnv(), "SOUS_TOKEN="+s.token), extra...)
}

// sousCmd prepares the sous binary as a client of s.
func (s *serveProc) sousCmd(t *testing.T, env []string, args ...string) *exec.Cmd {
	cmd := exec.Command(sousBinary(t), args...)
	cmd.Env = env
	return cmd
}

// waitForLine starts cmd with stderr piped through a scanner, and returns
// once a stderr line contains marker. The rest of stderr is collected in
// the returned buffer, complete once cmd.Wait returns.
func startAndWaitLine(t *testing.T, cmd *exec.Cmd, marker string, timeout time.Duration) (stderr *testutil.SyncBuffer, done <-chan error) {
	t.Helper()
	pr, pw := io.Pipe()
	cmd.Stderr = pw
	stderr = &testutil.SyncBuffer{}
	seen := make(chan struct{})
	copied := make(chan struct{})
	go func() {
		defer close(copied)
		sc := bufio.NewScanner(pr)
		once := false
		for sc.Scan() {
			stderr.Write(append(sc.Bytes(), '\n'))
			if !once && strings.Contains(sc.Text(), marker) {
				once = true
				close(seen)
			}
		}
		io.Copy(io.Discard, pr)
	}()
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	d := make(chan error, 1)
	go func() {
		err := cmd.Wait()
		pw.Close()
		<-copied
		d <- err
	}()
	select {
	case <-seen:
	case err := <-d:
		t.Fatalf("%v exited (%v) before printing %q:\n%s", cmd.Args, err, marker, stderr.String())
	case <-time.After(timeout):
		cmd.Process.Kill()
		t.Fatalf("%v did not print %q within %s:\n%s", cmd.Args, marker, timeout, stderr.String())
	}
	return stderr, d
}

func exitCode(err error) int {
	if err == nil {
		return 0
	}
	if ee, ok := err.(*exec.ExitError); ok {
		return ee.ExitCode()
	}
	return -2
}

// killPidFile SIGKILLs the process group whose leader wrote its pid to path
// (children of a SIGKILLed daemon outlive it: the test cleans them up).
func killPidFile(path string) {
	b, err := os.ReadFile(path)
	if err != nil {
		return
	}
	if pid, err := strconv.Atoi(strings.TrimSpace(string(b))); err == nil && pid > 1 {
		syscall.Kill(-pid, syscall.SIGKILL)
	}
}

// TestDaemonKilledMidRun: the daemon a `sous run --socket` recipe talks to is
// SIGKILLed while the recipe waits on a process. The run must fail promptly
// (SOUS_RECONNECT_TIMEOUT bounds the redialing) with exit code 1 and one
// clear line on stderr saying the connection to the daemon was lost, naming
// the socket.
func TestDaemonKilledMidRun(t *testing.T) {
	t.Parallel()
	d := startServe(t, "kill-the-daemon-token")
	dir := t.TempDir()
	pidFile := filepath.Join(dir, "pid")
	t.Cleanup(func() { killPidFile(pidFile) })
	recipe := filepath.Join(dir, "wait.star")
	os.WriteFile(recipe, []byte(fmt.Sprintf(`
p = spawn(["sh", "-c", "echo $$ > %s; exec sleep 60"], id = "waiter", echo = False)
print("spawned waiter")
p.wait()
print("never reached")
`, pidFile)), 0o644)

	run := d.sousCmd(t, d.clientEnv("SOUS_RECONNECT_TIMEOUT=1s"), "run", "--socket", d.socket, recipe)
	stderr, done := startAndWaitLine(t, run, "spawned waiter", 30*time.Second)
	time.Sleep(100 * time.Millisecond) // let the recipe block in wait
	killed := time.Now()
	d.cmd.Process.Kill()
	var err error
	select {
	case err = <-done:
	case <-time.After(20 * time.Second):
		run.Process.Kill()
		t.Fatalf("sous run still waits 20 s after its daemon was killed:\n%s", stderr.String())
	}
	took := time.Since(killed)
	if code := exitCode(err); code != 1 {
		t.Errorf("sous run exited %d (%v), want 1", code, err)
	}
	if took > 10*time.Second {
		t.Errorf("sous run took %s to notice its daemon was gone (reconnect timeout 1s)", took)
	}
	var lost []string
	for _, line := range strings.Split(stderr.String(), "\n") {
		if strings.Contains(line, "daemon") && !strings.HasPrefix(line, "sous: connection to daemon lost; reconnecting") {
			lost = append(lost, line)
		}
	}
	if !strings.Contains(stderr.String(), "sous: connection to daemon lost; reconnecting") {
		t.Errorf("no notice that the connection dropped and sous was reconnecting; stderr:\n%s", stderr.String())
	}
	if len(lost) != 1 || !strings.Contains(lost[0], "connection to the daemon lost") || !strings.Contains(lost[0], d.socket) ||
		strings.Contains(lost[0], "i/o timeout") {
		t.Errorf("want one line saying the connection to the daemon at %s was lost; stderr:\n%s", d.socket, stderr.String())
	}
	t.Logf("daemon SIGKILLed: sous run exited %d after %s: %s", exitCode(err), took.Round(time.Millisecond), strings.TrimSpace(strings.Join(lost, "")))
}

// TestExecLeavesWhenTheDaemonDies: the daemon of a `sous exec --socket` is
// SIGKILLed. exec says at once that the connection dropped and that it is
// reconnecting, and a second Ctrl-C, while the first has had no answer for a
// second, makes it leave (130) rather than wait out the reconnect timeout.
func TestExecLeavesWhenTheDaemonDies(t *testing.T) {
	t.Parallel()
	d := startServe(t, "exec-daemon-dies-token")
	dir := t.TempDir()
	pidFile := filepath.Join(dir, "pid")
	t.Cleanup(func() { killPidFile(pidFile) })
	cmd := d.sousCmd(t, d.clientEnv("SOUS_RECONNECT_TIMEOUT=60s"), "exec", "--socket", d.socket, "--",
		// The pause lets the spawn's answer reach exec before the daemon is
		// killed: exec handles signals once it follows the command.
		"sh", "-c", "echo $$ > "+pidFile+"; sleep 0.5; echo started >&2; exec sleep 60")
	stderr, done := startAndWaitLine(t, cmd, "started", 30*time.Second)
	d.cmd.Process.Kill()
	deadline := time.Now().Add(5 * time.Second)
	for !strings.Contains(stderr.String(), "sous: connection to daemon lost; reconnecting") {
		if time.Now().After(deadline) {
			cmd.Process.Kill()
			t.Fatalf("no notice within 5 s of the daemon's death; stderr:\n%s", stderr.String())
		}
		time.Sleep(10 * time.Millisecond)
	}
	cmd.Process.Signal(syscall.SIGINT)
	time.Sleep(1200 * time.Millisecond)
	cmd.Process.Signal(syscall.SIGINT)
	var err error
	select {
	case err = <-done:
	case <-time.After(5 * time.Second):
		cmd.Process.Kill()
		t.Fatalf("sous exec still waits 5 s after a second Ctrl-C; stderr:\n%s", stderr.String())
	}
	if code := exitCode(err); code != 130 {
		t.Errorf("exit code %d, want 130", code)
	}
	if !strings.Contains(stderr.String(), "leaving without waiting for") {
		t.Errorf("stderr does not say why it left:\n%s", stderr.String())
	}
}

// TestRunnerKilledChildrenSurvive: the `sous run` driving processes on a
// persistent daemon is SIGKILLed mid-run. The children keep running on the
// daemon, and `sous attach` recovers each one's whole output, byte for byte,
// every line once, and its exit code. The daemon keeps only 64 KiB per
// process in memory, so the replay comes back from its spill files.
func TestRunnerKilledChildrenSurvive(t *testing.T) {
	t.Parallel()
	d := startServe(t, "kill-the-runner-token", "--replay-mem-limit", "65536")
	dir := t.TempDir()
	// tick-N prints 150 numbered lines over about 1.5 s then exits N; bulk
	// prints 400,000 numbered lines (2.6 MiB) as fast as it can.
	recipe := filepath.Join(dir, "children.star")
	os.WriteFile(recipe, []byte(`
ps = []
for n in [3, 4]:
    ps.append(spawn(["sh", "-c", "i=1; while [ $i -le 150 ]; do echo tick-%d line $i; i=$((i+1)); sleep 0.01; done; exit %d" % (n, n)], id = "tick-%d" % n))
ps.append(spawn(["sh", "-c", "seq 1 400000; exit 5"], id = "bulk", echo = False))
print("spawned all")
wait_all(ps)
print("never reached")
`), 0o644)
	run := d.sousCmd(t, d.clientEnv(), "run", "--socket", d.socket, recipe)
	var out testutil.SyncBuffer
	run.Stdout = &out
	_, done := startAndWaitLine(t, run, "spawned all", 30*time.Second)
	time.Sleep(300 * time.Millisecond)
	run.Process.Kill()
	<-done

	// The children outlive their runner: still running on the daemon.
	ps := d.sousCmd(t, d.clientEnv(), "ps", "--socket", d.socket, "--json")
	psOut, err := ps.Output()
	if err != nil {
		t.Fatalf("sous ps: %v", err)
	}
	var list []struct {
		ID      string `json:"id"`
		Running bool   `json:"running"`
	}
	if err := json.Unmarshal(psOut, &list); err != nil {
		t.Fatalf("sous ps --json: %v\n%s", err, psOut)
	}
	running := map[string]bool{}
	for _, p := range list {
		running[p.ID] = p.Running
	}
	if !running["tick-3"] || !running["tick-4"] {
		t.Errorf("the tickers do not run any more after their runner was killed:\n%s", psOut)
	}

	want := map[string]string{}
	for _, n := range []int{3, 4} {
		var b strings.Builder
		for i := 1; i <= 150; i++ {
			fmt.Fprintf(&b, "tick-%d line %d\n", n, i)
		}
		want[fmt.Sprintf("tick-%d", n)] = b.String()
	}
	var bulk strings.Builder
	for i := 1; i <= 400000; i++ {
		bulk.WriteString(strconv.Itoa(i))
		bulk.WriteByte('\n')
	}
	want["bulk"] = bulk.String()
	codes := map[string]int{"tick-3": 3, "tick-4": 4, "bulk": 5}
	for id, w := range want {
		attach := d.sousCmd(t, d.clientEnv(), "attach", "--socket", d.socket, id)
		var o, e bytes.Buffer
		attach.Stdout, attach.Stderr = &o, &e
		err := attach.Run()
		if code := exitCode(err); code != codes[id] {
			t.Errorf("attach %s: exit %d, want %d; stderr %s", id, code, codes[id], e.String())
		}
		if o.String() != w {
			t.Errorf("attach %s recovered %d bytes (%d lines), want %d bytes (%d lines), byte-exact", id,
				o.Len(), strings.Count(o.String(), "\n"), len(w), strings.Count(w, "\n"))
		}
	}
	t.Logf("runner SIGKILLed: its tickers kept running; attach recovered 2 x 150 lines and %d bytes (400,000 lines) byte-exact, with their exit codes",
		len(want["bulk"]))
}

// TestReconnectTimeoutEnvIsChecked: a malformed SOUS_RECONNECT_TIMEOUT is a
// usage error naming the variable, found before anything runs.
func TestReconnectTimeoutEnvIsChecked(t *testing.T) {
	t.Parallel()
	recipe := filepath.Join(t.TempDir(), "r.star")
	os.WriteFile(recipe, []byte("print('ran')\n"), 0o644)
	cmd := exec.Command(sousBinary(t), "run", "--socket", "/nonexistent/d.sock", recipe)
	cmd.Env = append(cleanEnv(), "SOUS_RECONNECT_TIMEOUT=soon")
	out, err := cmd.CombinedOutput()
	if exitCode(err) != 2 || !strings.Contains(string(out), "SOUS_RECONNECT_TIMEOUT=\"soon\"") || strings.Contains(string(out), "ran") {
		t.Errorf("exit %d: %s", exitCode(err), out)
	}
}

// sous killed with SIGKILL runs no shutdown, yet the children of its
// embedded daemon do not outlive it: the kernel kills them (Pdeathsig).
func TestEmbeddedChildrenDieWithSous(t *testing.T) {
	t.Parallel()
	bin := sousBinary(t)
	dir := t.TempDir()
	pidFile := filepath.Join(dir, "pid")
	child := `echo $$ > "$0.tmp" && mv "$0.tmp" "$0" && exec sleep 1000`
	recipe := filepath.Join(dir, "r.star")
	if err := os.WriteFile(recipe, []byte(fmt.Sprintf("spawn(\"sh\", [\"-c\", %q, %q], echo=False).wait()\n", child, pidFile)), 0o644); err != nil {
		t.Fatal(err)
	}
	// Sandboxed, the child is exec'd by a helper (sous itself), which must
	// keep the parent-death signal it was given.
	sandboxed := filepath.Join(dir, "sandboxed.star")
	if err := os.WriteFile(sandboxed, []byte(fmt.Sprintf("spawn(\"sh\", [\"-c\", %q, %q], echo=False, sandbox={\"write\": [%q]}).wait()\n", child, pidFile, dir)), 0o644); err != nil {
		t.Fatal(err)
	}
	for _, args := range [][]string{
		{"exec", "--", "sh", "-c", child, pidFile},
		{"run", recipe},
		{"run", sandboxed},
	} {
		os.Remove(pidFile)
		cmd := exec.Command(bin, args...)
		cmd.Env = cleanEnv()
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		var pid int
		for deadline := time.Now().Add(10 * time.Second); pid == 0; time.Sleep(10 * time.Millisecond) {
			if b, err := os.ReadFile(pidFile); err == nil {
				pid, _ = strconv.Atoi(strings.TrimSpace(string(b)))
			}
			if time.Now().After(deadline) {
				cmd.Process.Kill()
				cmd.Wait()
				t.Fatalf("%v: the child never wrote its pid", args)
			}
		}
		cmd.Process.Kill() // SIGKILL: no handler runs
		cmd.Wait()
		if !testutil.Exits(pid, 10*time.Second) {
			syscall.Kill(pid, syscall.SIGKILL)
			t.Fatalf("%v: child %d outlived sous killed with SIGKILL", args, pid)
		}
	}
}

// What a recipe's processes leave running in their groups (`sh -c 'server
// &'`) is stopped when the recipe ends, as the processes still running are;
// and stop() of a process whose leader exited reaches what it left.
func TestRecipeEndStopsWhatChildrenLeft(t *testing.T) {
	t.Parallel()
	bin := sousBinary(t)
	dir := t.TempDir()
	recipe := filepath.Join(dir, "r.star")
	script := `r = run("sh", ["-c", "sleep 60 & echo $!"])
print("left", r.stdout.strip())
p = spawn("sh", ["-c", "sleep 61 & echo $!"], echo=False)
p.wait()
p.stop()
pid = p.output().strip()
# Gone (or a zombie) before the recipe ends: stop() itself reached it.
gone = run(["sh", "-c", "while [ -e /proc/$0 ] && ! grep -q ') Z' /proc/$0/stat; do sleep 0.05; done", pid],
           timeout=5, check=False, echo=False)
print("stopped", pid, gone.status)
`
	if err := os.WriteFile(recipe, []byte(script), 0o644); err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(bin, "run", recipe)
	cmd.Env = cleanEnv()
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("sous run: %v\n%s", err, out)
	}
	pids := map[string]int{}
	for _, line := range strings.Split(string(out), "\n") {
		f := strings.Fields(line)
		switch {
		case len(f) == 2 && f[0] == "left":
			pids["left"], _ = strconv.Atoi(f[1])
		case len(f) == 3 && f[0] == "stopped":
			pids["stopped"], _ = strconv.Atoi(f[1])
			if f[2] != "ok" {
				t.Errorf("the background sleep (pid %s) outlived stop(): the wait for it ended %s", f[1], f[2])
			}
		}
	}
	if pids["left"] == 0 || pids["stopped"] == 0 {
		t.Fatalf("no pids in the output:\n%s", out)
	}
	for what, pid := range pids {
		if !testutil.Exits(pid, 5*time.Second) {
			syscall.Kill(pid, syscall.SIGKILL)
			t.Fatalf("the background sleep (%s, pid %d) outlived the recipe", what, pid)
		}
	}
}

// --replay-disk-limit 0 spills nothing: a replay from the start keeps only
// the memory window, and says so, while the default spill replays it all.
// Negative limits are usage errors.
func TestServeReplayDiskLimitZero(t *testing.T) {
	script := "head -c 4194304 /dev/zero; echo done"
	for _, tc := range []struct {
		name      string
		flags     []string
		truncated bool
	}{
		{"spill", nil, false},
		{"no spill", []string{"--replay-disk-limit", "0"}, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			s := startServe(t, "replay-disk-token", append([]string{"--replay-mem-limit", "65536"}, tc.flags...)...)
			env := s.clientEnv()
			if out, err := s.sousCmd(t, env, "exec", "--socket", s.socket, "--id", "big", "--", "sh", "-c", script).Output(); err != nil || len(out) != 4<<20+5 {
				t.Fatalf("exec: %v, %d bytes", err, len(out))
			}
			cmd := s.sousCmd(t, env, "attach", "--socket", s.socket, "big")
			var stderr bytes.Buffer
			cmd.Stderr = &stderr
			out, err := cmd.Output()
			if err != nil {
				t.Fatalf("attach: %v: %s", err, stderr.String())
			}
			if !strings.HasSuffix(string(out), "done\n") {
				t.Fatalf("attach output does not end with the last line")
			}
			warned := strings.Contains(stderr.String(), "no longer retained")
			if tc.truncated != (len(out) < 4<<20) || tc.truncated != warned {
				t.Fatalf("attach replayed %d bytes, warned %v: %s", len(out), warned, stderr.String())
			}
			// A spilling daemon makes its replay dir at start (the
			// segments in it are unlinked once open, so they cannot be
			// counted); one that spills nothing has none.
			_, err = os.Stat(filepath.Join(s.dir, "state", "replay"))
			if spills := err == nil; spills == tc.truncated {
				t.Fatalf("replay dir: %v, with the daemon expected to spill: %v", err, !tc.truncated)
			}
		})
	}
	for _, bad := range [][]string{{"--replay-disk-limit", "-1"}, {"--replay-mem-limit", "0"}, {"--replay-disk-total", "0"}, {"--replay-mem-total", "-5"}} {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second) // a daemon that took the flag would serve on
		defer cancel()
		cmd := exec.CommandContext(ctx, sousBinary(t), append([]string{"daemon", "serve", "--token-fd", "0", "--socket", filepath.Join(testutil.ShortTempDir(t), "d.sock")}, bad...)...)
		cmd.Stdin = strings.NewReader("tok\n")
		out, err := cmd.CombinedOutput()
		if code := exitCode(err); code != 2 || !strings.Contains(string(out), bad[0]) {
			t.Errorf("serve %v: exit %d, %s", bad, code, out)
		}
	}
}

// daemon stop says in one line on stderr, and exits 1, when there was
// nothing it could stop: no daemon on the socket, no token, a token the
// daemon refused (it printed the daemon's raw JSON-RPC reply, and without a
// daemon it exited 0 silently). Stopping one is silent, exit 0.
func TestDaemonStopRefused(t *testing.T) {
	t.Parallel()
	d := startServe(t, "the-real-token")
	stop := func(env []string, socket string) (code int, stdout, stderr string) {
		t.Helper()
		cmd := d.sousCmd(t, env, "daemon", "stop", "--socket", socket)
		var o, e strings.Builder
		cmd.Stdout, cmd.Stderr = &o, &e
		return exitCode(cmd.Run()), o.String(), e.String()
	}
	for _, tc := range []struct {
		name   string
		env    []string
		socket string
		want   string
	}{
		{"wrong token", append(cleanEnv(), "SOUS_TOKEN=a-wrong-token"), d.socket,
			"sous: daemon stop: the daemon on " + d.socket + " refused the token and is still running (set --token-file, SOUS_TOKEN or CLAUDE_RPC_TOKEN to the daemon's token)\n"},
		{"no token", cleanEnv(), d.socket,
			"sous: daemon stop: the daemon on " + d.socket + " needs its token to stop, and none was given (set --token-file, SOUS_TOKEN or CLAUDE_RPC_TOKEN)\n"},
		{"no daemon", d.clientEnv(), filepath.Join(d.dir, "none.sock"),
			"sous: daemon stop: no daemon listens on " + filepath.Join(d.dir, "none.sock") + " (no such file or directory)\n"},
	} {
		code, stdout, stderr := stop(tc.env, tc.socket)
		if code != 1 || stdout != "" || stderr != tc.want {
			t.Errorf("%s: exit %d, stdout %q, stderr %q\nwant exit 1, no stdout, stderr %q", tc.name, code, stdout, stderr, tc.want)
		}
	}
	select {
	case <-d.exited:
		t.Fatal("the daemon stopped without its token")
	default:
	}
	if out, err := d.sousCmd(t, d.clientEnv(), "daemon", "stop", "--socket", "").CombinedOutput(); exitCode(err) != 2 {
		t.Errorf("stop --socket \"\": %v %q", err, out)
	}
	if code, stdout, stderr := stop(d.clientEnv(), d.socket); code != 0 || stdout != "" || stderr != "" {
		t.Errorf("stop with the token: exit %d, stdout %q, stderr %q", code, stdout, stderr)
	}
	select {
	case <-d.exited:
	case <-time.After(10 * time.Second):
		t.Fatal("the daemon did not stop with the right token")
	}
	// Its socket is gone; one left behind by a daemon that died is no
	// daemon either.
	if code, _, stderr := stop(d.clientEnv(), d.socket); code != 1 || !strings.Contains(stderr, "no daemon listens on "+d.socket) {
		t.Errorf("stop after it stopped: exit %d, stderr %q", code, stderr)
	}
	stale := filepath.Join(d.dir, "stale.sock")
	ln, err := net.Listen("unix", stale)
	if err != nil {
		t.Fatal(err)
	}
	ln.(*net.UnixListener).SetUnlinkOnClose(false)
	ln.Close()
	if code, _, stderr := stop(d.clientEnv(), stale); code != 1 || stderr != "sous: daemon stop: no daemon listens on "+stale+" (connection refused: a socket left behind)\n" {
		t.Errorf("stop on a stale socket: exit %d, stderr %q", code, stderr)
	}
}

// TestDaemonDefaultSocket: without --socket, serve, start and stop agree on
// one socket, ~/.claude/remote/rpc.sock, and serve and start create its
// directory (0700) where it is missing: start failed on it ("its
// directory: no such file or directory"), and so did serve.
func TestDaemonDefaultSocket(t *testing.T) {
	t.Parallel()
	bin := sousBinary(t)
	for _, verb := range []string{"serve", "start"} {
		t.Run(verb, func(t *testing.T) {
			t.Parallel()
			home := testutil.ShortTempDir(t)
			env := append(cleanEnv(), "HOME="+home)
			sock := filepath.Join(home, ".claude", "remote", "rpc.sock")
			cmd := exec.Command(bin, "daemon", verb, "--token-fd", "0", "--login-path=false")
			cmd.Env = env
			cmd.Stdin = strings.NewReader("tok\n")
			var out testutil.SyncBuffer
			cmd.Stdout, cmd.Stderr = &out, &out
			if err := cmd.Start(); err != nil {
				t.Fatal(err)
			}
			exited := make(chan error, 1)
			go func() { exited <- cmd.Wait() }()
			t.Cleanup(func() {
				stop := exec.Command(bin, "daemon", "stop")
				stop.Env = append(env, "SOUS_TOKEN=tok")
				stop.Run()
				cmd.Process.Kill()
			})
			for deadline := time.Now().Add(15 * time.Second); ; time.Sleep(20 * time.Millisecond) {
				if c, err := net.Dial("unix", sock); err == nil {
					c.Close()
					break
				}
				select {
				case err := <-exited:
					if verb == "serve" || err != nil {
						t.Fatalf("daemon %s exited (%v) before %s accepted:\n%s", verb, err, sock, out.String())
					}
					exited = nil // start returns; its daemon serves on
				default:
				}
				if time.Now().After(deadline) {
					t.Fatalf("nothing accepts on %s:\n%s", sock, out.String())
				}
			}
			for _, dir := range []string{filepath.Dir(sock), filepath.Dir(filepath.Dir(sock))} {
				if fi, err := os.Stat(dir); err != nil || fi.Mode().Perm() != 0o700 {
					t.Errorf("%s: %v, mode %v; want a 0700 directory", dir, err, fi.Mode())
				}
			}
			stop := exec.Command(bin, "daemon", "stop")
			stop.Env = append(env, "SOUS_TOKEN=tok")
			if b, err := stop.CombinedOutput(); err != nil || len(b) != 0 {
				t.Errorf("daemon stop: %v %q", err, b)
			}
			for deadline := time.Now().Add(10 * time.Second); ; time.Sleep(20 * time.Millisecond) {
				if _, err := os.Stat(sock); err != nil {
					break
				}
				if time.Now().After(deadline) {
					t.Fatalf("the daemon on %s did not stop", sock)
				}
			}
		})
	}
}

// spawnHolder relays connections to a daemon socket line by line and holds
// up the first process.spawn: with holdRequest the request never reaches
// the daemon; without, it does, but nothing the daemon sends after it
// reaches the client. Either way the spawn waits, as one does while the
// client reconnects.
type spawnHolder struct {
	path string
	seen chan struct{} // closed once the spawn came by
}

func startSpawnHolder(t *testing.T, target string, holdRequest bool) *spawnHolder {
	t.Helper()
	h := &spawnHolder{path: filepath.Join(testutil.ShortTempDir(t), "hold.sock"), seen: make(chan struct{})}
	ln, err := net.Listen("unix", h.path)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { ln.Close() })
	var once sync.Once
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			d, err := net.Dial("unix", target)
			if err != nil {
				c.Close()
				continue
			}
			t.Cleanup(func() { c.Close(); d.Close() })
			var mute atomic.Bool
			go func() { // client to daemon
				r := bufio.NewReader(c)
				for {
					line, err := r.ReadBytes('\n')
					if err != nil {
						d.Close()
						return
					}
					if bytes.Contains(line, []byte(`"method":"process.spawn"`)) {
						first := false
						once.Do(func() { first = true; close(h.seen) })
						if first && holdRequest {
							continue
						}
						if first {
							mute.Store(true) // before the request: its answer comes after
						}
					}
					if _, err := d.Write(line); err != nil {
						return
					}
				}
			}()
			go func() { // daemon to client
				buf := make([]byte, 64<<10)
				for {
					n, err := d.Read(buf)
					if n > 0 && !mute.Load() {
						if _, werr := c.Write(buf[:n]); werr != nil {
							return
						}
					}
					if err != nil {
						c.Close()
						return
					}
				}
			}()
		}
	}()
	return h
}

// A Ctrl-C while exec's spawn waits for its answer ends exec with 130, as
// one while it follows the command does, instead of killing it by the
// signal's default action; and a command the daemon started meanwhile gets
// the signal rather than running on with nobody to follow it.
func TestExecInterruptedWhileStarting(t *testing.T) {
	t.Parallel()
	d := startServe(t, "exec-interrupted-token")
	for _, tc := range []struct {
		name        string
		holdRequest bool
	}{{"spawn not sent", true}, {"answer not received", false}} {
		t.Run(tc.name, func(t *testing.T) {
			h := startSpawnHolder(t, d.socket, tc.holdRequest)
			dir := t.TempDir()
			pidFile := filepath.Join(dir, "pid")
			t.Cleanup(func() { killPidFile(pidFile) })
			// Sockets, not pipes or files: exec would pass those to the
			// daemon (a tee, or files it writes), which this relay cannot
			// carry.
			out, _ := socketOutput(t)
			errOut, stderr := socketOutput(t)
			cmd := d.sousCmd(t, d.clientEnv(), "exec", "--socket", h.path, "--", "sh", "-c", "echo $$ > "+pidFile+"; exec sleep 60")
			cmd.Stdout, cmd.Stderr = out, errOut
			if err := cmd.Start(); err != nil {
				t.Fatal(err)
			}
			done := make(chan error, 1)
			go func() { done <- cmd.Wait() }()
			select {
			case <-h.seen:
			case <-time.After(20 * time.Second):
				cmd.Process.Kill()
				t.Fatalf("no spawn came by; stderr:\n%s", stderr())
			}
			pid := 0
			if !tc.holdRequest {
				deadline := time.Now().Add(10 * time.Second)
				for !lineWritten(pidFile) {
					if time.Now().After(deadline) {
						cmd.Process.Kill()
						t.Fatal("the command did not start")
					}
					time.Sleep(10 * time.Millisecond)
				}
				pid = readPid(t, pidFile)
			}
			cmd.Process.Signal(syscall.SIGINT)
			select {
			case err := <-done:
				if code := exitCode(err); code != 130 {
					t.Fatalf("exit %v (code %d), want code 130; stderr:\n%s", err, code, stderr())
				}
			case <-time.After(10 * time.Second):
				cmd.Process.Kill()
				t.Fatalf("exec still waits 10 s after Ctrl-C; stderr:\n%s", stderr())
			}
			if pid != 0 && !strings.Contains(stderr(), "stop it with: sous kill ") {
				// The kill's answer is held up too: exec cannot know it worked.
				t.Errorf("stderr does not say what may still run:\n%s", stderr())
			}
			if pid != 0 {
				deadline := time.Now().Add(10 * time.Second)
				for syscall.Kill(pid, 0) == nil {
					if time.Now().After(deadline) {
						t.Fatalf("the command the daemon started (pid %d) still runs after exec left; stderr:\n%s", pid, stderr())
					}
					time.Sleep(10 * time.Millisecond)
				}
			}
		})
	}
}

// A graceful stop ends what the daemon ran and closes its connections: a
// `sous exec` following a command fails at once, without 30 s of
// reconnecting to a socket that is gone. `sous rpc server.shutdown` is
// answered by the connection closing, as docs/PROTOCOL.md says, and exits 0.
func TestGracefulStopEndsClientsPromptly(t *testing.T) {
	t.Parallel()
	d := startServe(t, "tok")
	follower := d.sousCmd(t, d.clientEnv(), "exec", "--socket", d.socket, "--", "sleep", "100")
	var stderr strings.Builder
	follower.Stderr = &stderr
	if err := follower.Start(); err != nil {
		t.Fatal(err)
	}
	followed := make(chan error, 1)
	go func() { followed <- follower.Wait() }()
	for deadline := time.Now().Add(10 * time.Second); ; {
		out, _ := d.sousCmd(t, d.clientEnv(), "ps", "--socket", d.socket).Output()
		if strings.Contains(string(out), "sleep 100") {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("the command never ran: ps says %q; exec's stderr %q", out, stderr.String())
		}
		time.Sleep(20 * time.Millisecond)
	}

	start := time.Now()
	rpc := d.sousCmd(t, d.clientEnv(), "rpc", "--socket", d.socket, "server.shutdown")
	if out, err := rpc.CombinedOutput(); err != nil || len(out) != 0 {
		t.Errorf("rpc server.shutdown: %v %q", err, out)
	}
	select {
	case <-d.exited:
	case <-time.After(10 * time.Second):
		t.Fatal("the daemon did not stop")
	}
	select {
	case err := <-followed:
		if exitCode(err) != 1 || !strings.Contains(stderr.String(), "the daemon is gone") {
			t.Errorf("exec: %v, stderr %q", err, stderr.String())
		}
	case <-time.After(10 * time.Second):
		follower.Process.Kill()
		t.Fatalf("exec still waits after the daemon stopped; stderr %q", stderr.String())
	}
	if el := time.Since(start); el > 8*time.Second {
		t.Errorf("took %v", el)
	}
}

// `sous run ... | head -3`: when the reader of its output goes away, sous
// stops the recipe's processes, what they left in their groups included,
// and exits 141 as a shell's command would. Go used to kill sous outright
// with SIGPIPE at its first write, and the grandchildren ran on.
func TestRunStopsWhenItsReaderGoesAway(t *testing.T) {
	t.Parallel()
	bin := sousBinary(t)
	dir := t.TempDir()
	recipe := filepath.Join(dir, "main.star")
	os.WriteFile(recipe, []byte(`
spawn(["sh", "-c", "sleep 1000 & echo $! > `+dir+`/grandchild; wait"], echo=False)
p = spawn(["sh", "-c", "while :; do echo line; sleep 0.01; done"])
p.wait()
`), 0o644)
	for _, json := range []bool{false, true} {
		os.Remove(filepath.Join(dir, "grandchild"))
		args := []string{"run", recipe}
		if json {
			args = append(args, "--json")
		}
		cmd := exec.Command(bin, args...)
		cmd.Env = cleanEnv()
		var stderr strings.Builder
		cmd.Stderr = &stderr
		out, err := cmd.StdoutPipe()
		if err != nil {
			t.Fatal(err)
		}
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		r := bufio.NewReader(out)
		for range 3 {
			if _, err := r.ReadString('\n'); err != nil {
				t.Fatalf("json %v: reading sous's output: %v", json, err)
			}
		}
		for deadline := time.Now().Add(10 * time.Second); ; time.Sleep(10 * time.Millisecond) {
			if b, err := os.ReadFile(filepath.Join(dir, "grandchild")); err == nil && strings.HasSuffix(string(b), "\n") {
				break
			}
			if time.Now().After(deadline) {
				t.Fatalf("json %v: the grandchild never started", json)
			}
		}
		grandchild := readPid(t, filepath.Join(dir, "grandchild"))
		out.Close() // as head does once it has its lines
		err = cmd.Wait()
		if exitCode(err) != 141 || !strings.Contains(stderr.String(), "the reader of its output went away") {
			t.Errorf("json %v: %v, stderr %q; want exit 141 saying why", json, err, stderr.String())
		}
		waitGone(t, grandchild, 5*time.Second)
	}
}

// socketOutput returns one end of a socket pair, for a command's output
// that sous exec cannot pass to a daemon, and what has come out of the
// other end so far.
func socketOutput(t *testing.T) (w *os.File, read func() string) {
	t.Helper()
	fds, err := unix.Socketpair(unix.AF_UNIX, unix.SOCK_STREAM|unix.SOCK_CLOEXEC, 0)
	if err != nil {
		t.Fatal(err)
	}
	w, r := os.NewFile(uintptr(fds[0]), "output"), os.NewFile(uintptr(fds[1]), "output-reader")
	t.Cleanup(func() { w.Close(); r.Close() })
	var (
		mu  sync.Mutex
		got []byte
	)
	go func() {
		buf := make([]byte, 4096)
		for {
			n, err := r.Read(buf)
			mu.Lock()
			got = append(got, buf[:n]...)
			mu.Unlock()
			if err != nil {
				return
			}
		}
	}()
	return w, func() string { mu.Lock(); defer mu.Unlock(); return string(got) }
}
