package main

import (
	"bytes"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"io/fs"
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

	"github.com/seed5ad92d46/sous/internal/testutil"
)

// TestDaemonStartKeepsTheTokenSecret starts a detached daemon the way the
// README says (`sous daemon start --token-fd 0`), uses it with the right and
// wrong tokens, stops it, and looks for the token everywhere it must not be:
// the daemon's argv and environment (/proc/PID/cmdline, environ), the
// environment and open descriptors of its children, its log file, its
// metrics endpoint, and every file under its socket dir, state dir and
// TMPDIR (--token-fd never puts it on disk).
func TestDaemonStartKeepsTheTokenSecret(t *testing.T) {
	t.Parallel()
	bin := sousBinary(t)
	dir := testutil.ShortTempDir(t)
	tmp := filepath.Join(dir, "tmp")
	os.Mkdir(tmp, 0o700)
	sock, logFile := filepath.Join(dir, "d.sock"), filepath.Join(dir, "d.log")
	raw := make([]byte, 24)
	rand.Read(raw)
	token := "tok-" + hex.EncodeToString(raw)
	wrong := "wrong-" + hex.EncodeToString(raw[:8])
	env := append(cleanEnv(), "TMPDIR="+tmp)

	args := []string{"daemon", "start", "--socket", sock, "--token-fd", "0", "--state-dir", filepath.Join(dir, "state"), "--log-file", logFile}
	metricsURL := ""
	if help, _ := exec.Command(bin, "daemon", "serve", "--help").CombinedOutput(); bytes.Contains(help, []byte("--metrics-addr")) {
		addr := fmt.Sprintf("127.0.0.1:%d", testutil.FreePort(t))
		args = append(args, "--metrics-addr", addr)
		metricsURL = "http://" + addr + "/metrics"
	}
	start := exec.Command(bin, args...)
	start.Env = env
	start.Stdin = strings.NewReader(token + "\n")
	out, err := start.CombinedOutput()
	if err != nil {
		t.Fatalf("sous daemon start: %v\n%s", err, out)
	}
	m := regexp.MustCompile(`\(pid (\d+)\)`).FindSubmatch(out)
	if m == nil {
		t.Fatalf("no pid in %q", out)
	}
	pid, _ := strconv.Atoi(string(m[1]))
	t.Cleanup(func() {
		if testutil.Alive(pid) {
			syscall.Kill(pid, syscall.SIGKILL)
		}
	})
	secret := func(what string, b []byte) {
		t.Helper()
		if bytes.Contains(b, []byte(token)) {
			t.Errorf("the token appears in %s", what)
		}
		if bytes.Contains(b, []byte(wrong)) {
			t.Errorf("a wrong token a client sent appears in %s", what)
		}
	}

	// A second start on the same socket fails, in the foreground, before it
	// reads the token: a daemon already serves it.
	again := exec.Command(bin, "daemon", "start", "--socket", sock, "--token-fd", "0", "--log-file", filepath.Join(dir, "again.log"))
	again.Env, again.Stdin = env, strings.NewReader("another-token\n")
	if out, err := again.CombinedOutput(); exitCode(err) != 1 || !strings.Contains(string(out), "a daemon is already serving this socket") {
		t.Errorf("a second daemon start on a served socket: %v\n%s", err, out)
	}

	// argv and environment of the daemon.
	for _, f := range []string{"cmdline", "environ"} {
		b, err := os.ReadFile(fmt.Sprintf("/proc/%d/%s", pid, f))
		if err != nil {
			t.Fatalf("read /proc/%d/%s: %v", pid, f, err)
		}
		secret("/proc/PID/"+f+" of the daemon", b)
	}

	client := func(tok string, args ...string) (string, string, int) {
		cmd := exec.Command(bin, args...)
		cmd.Env = append(cleanEnv(), "SOUS_TOKEN="+tok)
		var o, e bytes.Buffer
		cmd.Stdout, cmd.Stderr = &o, &e
		code := exitCode(cmd.Run())
		return o.String(), e.String(), code
	}
	// A wrong token is refused, and the daemon stays up.
	if _, e, code := client(wrong, "rpc", "--socket", sock, "server.ping"); code == 0 || !strings.Contains(e, "refused the token") {
		t.Errorf("a wrong token: exit %d, %q", code, e)
	}
	// The children's environment and descriptors.
	o, e, code := client(token, "exec", "--socket", sock, "--", "env")
	if code != 0 || !strings.Contains(o, "PATH=") {
		t.Fatalf("exec env: %d %q %q", code, o, e)
	}
	secret("a child's environment", []byte(o))
	o, e, code = client(token, "exec", "--socket", sock, "--", "ls", "/proc/self/fd")
	allowed := inheritedFDs() // what this test's environment hands down anyway
	for _, fd := range []string{"0", "1", "2", "3"} {
		allowed[fd] = true // stdio, and ls's own directory
	}
	for _, fd := range strings.Fields(o) {
		if !allowed[fd] {
			t.Errorf("a child inherits descriptor %s of the daemon: %q %q", fd, o, e)
		}
	}
	if code != 0 || len(strings.Fields(o)) < 4 {
		t.Errorf("ls /proc/self/fd in a child: %d %q %q", code, o, e)
	}
	// Metrics, when the daemon has them.
	if metricsURL != "" {
		resp, err := http.Get(metricsURL)
		if err != nil {
			t.Fatalf("metrics: %v", err)
		}
		body, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if !bytes.Contains(body, []byte("sous_daemon")) {
			t.Errorf("metrics body lacks the daemon's counters:\n%.500s", body)
		}
		secret("the metrics endpoint", body)
	} else {
		t.Log("no --metrics-addr in this build: metrics not checked")
	}

	// Stop it, then read everything it left behind.
	if _, e, code := client(token, "daemon", "stop", "--socket", sock); code != 0 {
		t.Fatalf("daemon stop: %d %s", code, e)
	}
	deadline := time.Now().Add(10 * time.Second)
	for testutil.Alive(pid) {
		if time.Now().After(deadline) {
			t.Fatal("the daemon did not stop")
		}
		time.Sleep(20 * time.Millisecond)
	}
	logs, err := os.ReadFile(logFile)
	if err != nil || !bytes.Contains(logs, []byte("Unauthorized request")) {
		t.Errorf("the log file lacks the refused request (%v):\n%s", err, logs)
	}
	files := 0
	filepath.WalkDir(dir, func(path string, d fs.DirEntry, err error) error {
		if err != nil || !d.Type().IsRegular() {
			return nil
		}
		files++
		b, _ := os.ReadFile(path)
		secret(path, b)
		return nil
	})
	if _, err := net.Dial("unix", sock); err == nil {
		t.Error("the socket still accepts after stop")
	}
	t.Logf("token absent from argv, environ, children's env and fds, %d files left on disk (logs included)%s",
		files, map[bool]string{true: ", metrics", false: ""}[metricsURL != ""])
}

// TestDaemonTokenFileIsDeleted: --token-file is read once and deleted as
// the daemon starts to serve, and only its path, never the token, is in
// argv. A daemon that cannot serve (TestDaemonKeepsTheTokenFileWhenItCannotServe)
// leaves it.
func TestDaemonTokenFileIsDeleted(t *testing.T) {
	t.Parallel()
	bin := sousBinary(t)
	dir := testutil.ShortTempDir(t)
	tok, sock := filepath.Join(dir, "tok"), filepath.Join(dir, "d.sock")
	os.WriteFile(tok, []byte("file-token-secret\n"), 0o600)
	cmd := exec.Command(bin, "daemon", "serve", "--socket", sock, "--token-file", tok)
	cmd.Env = cleanEnv()
	var log bytes.Buffer
	cmd.Stdout, cmd.Stderr = &log, &log
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cmd.Process.Signal(syscall.SIGTERM); cmd.Wait() })
	deadline := time.Now().Add(10 * time.Second)
	for {
		if c, err := net.Dial("unix", sock); err == nil {
			c.Close()
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("no daemon: %s", log.String())
		}
		time.Sleep(10 * time.Millisecond)
	}
	// Deleted once the daemon listens, just before it serves: the socket
	// may take a connection into its backlog a moment before.
	for {
		_, err := os.Stat(tok)
		if os.IsNotExist(err) {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("the token file is still there once the daemon accepts: %v", err)
		}
		time.Sleep(10 * time.Millisecond)
	}
	if fi, err := os.Stat(sock); err != nil || fi.Mode().Perm() != 0o600 {
		t.Errorf("socket mode: %v %v", fi.Mode(), err)
	}
	b, _ := os.ReadFile(fmt.Sprintf("/proc/%d/cmdline", cmd.Process.Pid))
	if bytes.Contains(b, []byte("file-token-secret")) {
		t.Error("the token is in the daemon's argv")
	}
	// daemon stop takes the token from a file too, and leaves the file be
	// (a client's token file is the user's).
	clientTok := filepath.Join(dir, "client-tok")
	os.WriteFile(clientTok, []byte("file-token-secret\n"), 0o600)
	stop := exec.Command(bin, "daemon", "stop", "--socket", sock, "--token-file", clientTok)
	stop.Env = cleanEnv()
	if out, err := stop.CombinedOutput(); err != nil || len(out) != 0 {
		t.Fatalf("daemon stop: %v %q", err, out)
	}
	exited := make(chan error, 1)
	go func() { exited <- cmd.Wait() }()
	select {
	case <-exited:
	case <-time.After(10 * time.Second):
		t.Fatal("the daemon did not stop")
	}
	if _, err := os.Stat(clientTok); err != nil {
		t.Errorf("daemon stop deleted its token file: %v", err)
	}
}

// TestDaemonKeepsTheTokenFileWhenItCannotServe: a daemon that fails to
// listen (its --listen port taken, its socket's directory missing) leaves
// --token-file where it was, for the next try; serve and start alike.
func TestDaemonKeepsTheTokenFileWhenItCannotServe(t *testing.T) {
	t.Parallel()
	bin := sousBinary(t)
	dir := testutil.ShortTempDir(t)
	busy, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer busy.Close()
	for _, tc := range []struct {
		name string
		args []string
		want string
	}{
		{"serve, port taken", []string{"serve", "--socket", filepath.Join(dir, "a.sock"), "--listen", "ws://" + busy.Addr().String()}, "address already in use"},
		{"serve, no socket dir", []string{"serve", "--socket", filepath.Join(dir, "nodir", "b.sock")}, "no such file or directory"},
		{"start, port taken", []string{"start", "--socket", filepath.Join(dir, "c.sock"), "--listen", "ws://" + busy.Addr().String()}, "address already in use"},
		{"start, no socket dir", []string{"start", "--socket", filepath.Join(dir, "nodir", "d.sock")}, "start: --socket " + filepath.Join(dir, "nodir", "d.sock") + ": its directory: "},
	} {
		t.Run(tc.name, func(t *testing.T) {
			tok := filepath.Join(t.TempDir(), "tok")
			if err := os.WriteFile(tok, []byte("kept-token\n"), 0o600); err != nil {
				t.Fatal(err)
			}
			cmd := exec.Command(bin, append(append([]string{"daemon"}, tc.args...), "--token-file", tok)...)
			cmd.Env = cleanEnv()
			out, err := cmd.CombinedOutput()
			if err == nil || !strings.Contains(string(out), tc.want) {
				t.Errorf("err %v, output %q, want a failure saying %q", err, out, tc.want)
			}
			if b, err := os.ReadFile(tok); err != nil || string(b) != "kept-token\n" {
				t.Errorf("token file after the failure: %q, %v", b, err)
			}
		})
	}
}

// inheritedFDs are this process's descriptors without close-on-exec: every
// program it starts inherits them, the daemon and its children included.
func inheritedFDs() map[string]bool {
	out := map[string]bool{}
	ents, _ := os.ReadDir("/proc/self/fdinfo")
	for _, e := range ents {
		b, err := os.ReadFile("/proc/self/fdinfo/" + e.Name())
		if err != nil {
			continue
		}
		m := regexp.MustCompile(`flags:\s+([0-7]+)`).FindSubmatch(b)
		if m == nil {
			continue
		}
		if flags, err := strconv.ParseInt(string(m[1]), 8, 64); err == nil && flags&syscall.O_CLOEXEC == 0 {
			out[e.Name()] = true
		}
	}
	return out
}

// TestDaemonRefusesAnEmptyToken: a request without "auth" would match an
// empty token, so a daemon given one (an empty file, a bare newline on the
// descriptor) does not start.
func TestDaemonRefusesAnEmptyToken(t *testing.T) {
	t.Parallel()
	bin := sousBinary(t)
	dir := testutil.ShortTempDir(t)
	for name, setup := range map[string]func(*exec.Cmd){
		"token-file": func(cmd *exec.Cmd) {
			tok := filepath.Join(dir, "empty")
			os.WriteFile(tok, nil, 0o600)
			cmd.Args = append(cmd.Args, "--token-file", tok)
		},
		"token-fd": func(cmd *exec.Cmd) {
			cmd.Args = append(cmd.Args, "--token-fd", "0")
			cmd.Stdin = strings.NewReader("\n")
		},
	} {
		cmd := exec.Command(bin, "daemon", "serve", "--socket", filepath.Join(dir, name+".sock"))
		setup(cmd)
		cmd.Env = cleanEnv()
		out, err := cmd.CombinedOutput()
		var ee *exec.ExitError
		if !errors.As(err, &ee) || ee.ExitCode() != 1 || !strings.Contains(string(out), "the token is empty") {
			t.Errorf("%s: %v\n%s", name, err, out)
		}
		if strings.Contains(string(out), "listening") {
			t.Errorf("%s: the daemon started:\n%s", name, out)
		}
	}
}
