package main

import (
	"bytes"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/seed5ad92d46/sous/internal/testutil"
)

// sshFixture is a real OpenSSH server on a loopback port with keys made for
// the test, and a standalone sous daemon it can bridge to.
type sshFixture struct {
	bin     string // the sous binary under test
	port    int
	socket  string
	token   string
	env     []string // what a client needs: SOUS_SSH_COMMAND, SOUS_BRIDGE_CMD, SOUS_TOKEN
	remote  string   // ssh://root@127.0.0.1:PORT/socket
	sshdPID int
	log     *testutil.SyncBuffer // the daemon's log
}

func newSSHFixture(t *testing.T) *sshFixture {
	t.Helper()
	if _, err := os.Stat("/usr/sbin/sshd"); err != nil {
		t.Skip("openssh-server is not installed (.ci/run installs it): skipping the ssh transport tests")
	}
	if os.Geteuid() != 0 {
		t.Skip("the ssh fixture logs in as the current user with sshd's root-only privilege separation: run as root")
	}
	bin := sousBinary(t)
	sshd := testutil.StartSSHD(t)
	dir, port := sshd.Dir, sshd.Port

	f := &sshFixture{bin: bin, port: port, socket: filepath.Join(dir, "d.sock"), token: "ssh-test-token", sshdPID: sshd.Pid}
	// The daemon: a standalone one the ssh bridge relays to.
	tokFile := filepath.Join(dir, "tok")
	os.WriteFile(tokFile, []byte(f.token+"\n"), 0o600)
	serve := exec.Command(bin, "daemon", "serve", "--socket", f.socket, "--token-file", tokFile)
	serveLog := &testutil.SyncBuffer{}
	f.log = serveLog
	serve.Stdout, serve.Stderr = serveLog, serveLog
	if err := serve.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		serve.Process.Signal(syscall.SIGTERM)
		serve.Wait()
		if t.Failed() {
			t.Logf("daemon log:\n%s", serveLog.String())
		}
	})
	deadline := time.Now().Add(10 * time.Second)
	for {
		if c, err := net.Dial("unix", f.socket); err == nil {
			c.Close()
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("daemon did not start: %s", serveLog.String())
		}
		time.Sleep(20 * time.Millisecond)
	}

	sshCmd := sshd.Command
	f.env = append(os.Environ(),
		"SOUS_SSH_COMMAND="+sshCmd,
		"SOUS_BRIDGE_CMD="+bin+" daemon bridge --socket",
		"SOUS_TOKEN="+f.token,
	)
	f.remote = fmt.Sprintf("ssh://root@127.0.0.1:%d%s", port, f.socket)
	return f
}

// sous runs the binary with the fixture's environment.
func (f *sshFixture) sous(t *testing.T, stdin string, args ...string) (stdout, stderr string, code int) {
	t.Helper()
	cmd := exec.Command(f.bin, args...)
	cmd.Env = f.env
	cmd.Stdin = strings.NewReader(stdin)
	var o, e bytes.Buffer
	cmd.Stdout, cmd.Stderr = &o, &e
	err := cmd.Run()
	code = 0
	if ee, ok := err.(*exec.ExitError); ok {
		code = ee.ExitCode()
	} else if err != nil {
		t.Fatal(err)
	}
	return o.String(), e.String(), code
}

func TestSSHExec(t *testing.T) {
	f := newSSHFixture(t)
	out, errOut, code := f.sous(t, "from stdin\n", "exec", "--remote", f.remote, "--", "sh", "-c", "cat; echo to-err >&2; exit 3")
	if code != 3 || out != "from stdin\n" || errOut != "to-err\n" {
		t.Fatalf("exec over ssh: code %d, stdout %q, stderr %q", code, out, errOut)
	}
	out, errOut, code = f.sous(t, "", "rpc", "--remote", f.remote, "server.ping")
	if code != 0 || !strings.Contains(out, `"pong": true`) {
		t.Fatalf("rpc over ssh: %d %q %q", code, out, errOut)
	}
	// A wrong token is refused in one line that says what to fix.
	cmd := exec.Command(f.bin, "rpc", "--remote", f.remote, "server.ping")
	cmd.Env = append(f.env, "SOUS_TOKEN=wrong")
	b, err := cmd.CombinedOutput()
	if err == nil || !strings.Contains(string(b), "refused the token") {
		t.Fatalf("wrong token: %v %s", err, b)
	}
	// An unreachable host: one line naming ssh's complaint.
	cmd = exec.Command(f.bin, "rpc", "--remote", fmt.Sprintf("ssh://root@127.0.0.1:%d/x.sock", testutil.FreePort(t)), "server.ping")
	cmd.Env = f.env
	b, err = cmd.CombinedOutput()
	if err == nil || !strings.Contains(string(b), "ssh:") {
		t.Fatalf("unreachable: %v %s", err, b)
	}
}

func TestSSHAttachSurvivesKilledConnection(t *testing.T) {
	f := newSSHFixture(t)
	// A process that outlives its runner: 40 lines over ~4 s.
	out, errOut, code := f.sous(t, "", "exec", "--remote", f.remote, "--detach", "--id", "ticker", "--",
		"sh", "-c", "for i in $(seq 1 40); do echo line $i; sleep 0.1; done; exit 4")
	if code != 0 || strings.TrimSpace(out) != "ticker" {
		t.Fatalf("detach: %d %q %q", code, out, errOut)
	}
	cmd := exec.Command(f.bin, "attach", "--remote", f.remote, "ticker")
	cmd.Env = f.env
	var o, e testutil.SyncBuffer
	cmd.Stdout, cmd.Stderr = &o, &e
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	// Cut the ssh connection under the attached client once it is up (a
	// first connection that breaks before it answered is not redialed):
	// kill the ssh client process sous started (the child of the attach
	// process).
	for deadline := time.Now().Add(20 * time.Second); !strings.Contains(o.String(), "line 1\n"); time.Sleep(10 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("attach printed nothing; stderr %s", e.String())
		}
	}
	time.Sleep(200 * time.Millisecond)
	killed := killChildren(t, cmd.Process.Pid, "ssh")
	if killed == 0 {
		t.Fatal("found no ssh process to kill")
	}
	err := cmd.Wait()
	ee, _ := err.(*exec.ExitError)
	if ee == nil || ee.ExitCode() != 4 {
		t.Fatalf("attach exit: %v; stderr %s", err, e.String())
	}
	var want strings.Builder
	for i := 1; i <= 40; i++ {
		fmt.Fprintf(&want, "line %d\n", i)
	}
	if o.String() != want.String() {
		t.Fatalf("attach output after a killed connection:\n%s\nwant 40 lines, each once", o.String())
	}
}

// killChildren SIGKILLs the direct children of pid whose command is name.
func killChildren(t *testing.T, pid int, name string) int {
	t.Helper()
	entries, _ := os.ReadDir("/proc")
	n := 0
	for _, e := range entries {
		stat, err := os.ReadFile(filepath.Join("/proc", e.Name(), "stat"))
		if err != nil {
			continue
		}
		// pid (comm) state ppid ...
		s := string(stat)
		open, close := strings.IndexByte(s, '('), strings.LastIndexByte(s, ')')
		if open < 0 || close < 0 {
			continue
		}
		comm := s[open+1 : close]
		fields := strings.Fields(s[close+1:]) // state ppid ...
		if len(fields) < 2 {
			continue
		}
		if fields[1] == fmt.Sprint(pid) && comm == name {
			var child int
			fmt.Sscanf(e.Name(), "%d", &child)
			syscall.Kill(child, syscall.SIGKILL)
			n++
		}
	}
	return n
}

func TestSSHRunRecipe(t *testing.T) {
	f := newSSHFixture(t)
	dir := t.TempDir()
	recipe := filepath.Join(dir, "remote.star")
	os.WriteFile(recipe, []byte(`
r = run("sh", ["-c", "echo remote-$((6*7))"], echo=False)
print("default host:", r.stdout.strip())
h = host(args["again"])
p = h.spawn(["cat"], echo=False)
p.write("through host()\n")
p.close_stdin()
print("host():", p.wait().stdout.strip())
`), 0o644)
	_, errOut, code := f.sous(t, "", "run", "--remote", f.remote, recipe, "-a", "again="+f.remote)
	if code != 0 || !strings.Contains(errOut, "default host: remote-42") || !strings.Contains(errOut, "host(): through host()") {
		t.Fatalf("sous run --remote: code %d\n%s", code, errOut)
	}
}

// TestSSHFirstConnectFailsAtOnce: when the first ssh connection fails after
// ssh started (the bridge not on the remote PATH, no daemon at the remote
// socket, the key refused), sous fails with ssh's own words after one
// login, as --socket does for a missing socket: it used to redial for the
// reconnect timeout (30 s, about 100 logins) and end in "gave up
// reconnecting". (Logins are counted, not timed: a login runs the remote
// user's shell profile, which takes what it takes.)
func TestSSHFirstConnectFailsAtOnce(t *testing.T) {
	f := newSSHFixture(t)
	dir := t.TempDir()
	if out, err := exec.Command("ssh-keygen", "-q", "-t", "ed25519", "-N", "", "-f", filepath.Join(dir, "other_key")).CombinedOutput(); err != nil {
		t.Fatalf("ssh-keygen: %v\n%s", err, out)
	}
	// ssh, counting its runs.
	logins := filepath.Join(dir, "logins")
	counting := filepath.Join(dir, "ssh")
	if err := os.WriteFile(counting, []byte("#!/bin/sh\necho login >> "+logins+"\nexec ssh \"$@\"\n"), 0o755); err != nil {
		t.Fatal(err)
	}
	var sshCmd string
	for _, kv := range f.env {
		if v, ok := strings.CutPrefix(kv, "SOUS_SSH_COMMAND=ssh "); ok {
			sshCmd = "SOUS_SSH_COMMAND=" + counting + " " + v
		}
	}
	otherKey := "SOUS_SSH_COMMAND=" + counting + " -i " + filepath.Join(dir, "other_key") + " -o IdentitiesOnly=yes -o UserKnownHostsFile=/dev/null -o StrictHostKeyChecking=no -o LogLevel=ERROR"
	noSocket := fmt.Sprintf("ssh://root@127.0.0.1:%d%s", f.port, filepath.Join(dir, "none.sock"))
	for _, tc := range []struct {
		name   string
		remote string
		env    []string
		want   []string
	}{
		{"bridge not on the remote PATH", f.remote, []string{sshCmd, "SOUS_BRIDGE_CMD=sous-not-installed daemon bridge --socket"},
			[]string{"sous-not-installed", "not found"}},
		{"no daemon at the remote socket", noSocket, []string{sshCmd},
			[]string{"dial server", filepath.Join(dir, "none.sock"), "no such file or directory"}},
		{"key refused", f.remote, []string{otherKey},
			[]string{"Permission denied (publickey"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			os.Remove(logins)
			cmd := exec.Command(f.bin, "rpc", "--remote", tc.remote, "server.ping")
			cmd.Env = append(slices.Clone(f.env), tc.env...) // the last of a name counts
			var stdout, stderr bytes.Buffer
			cmd.Stdout, cmd.Stderr = &stdout, &stderr
			err := cmd.Run()
			if code := exitCode(err); code != 1 {
				t.Errorf("exit code %d, want 1", code)
			}
			msg := stderr.String()
			if strings.Count(msg, "\n") != 1 || !strings.HasPrefix(msg, "sous: connect to "+tc.remote+": ssh: ") || strings.Contains(msg, "reconnect") {
				t.Errorf("stderr %q: want one line naming the target and ssh's complaint, nothing about reconnecting", msg)
			}
			for _, w := range tc.want {
				if !strings.Contains(msg, w) {
					t.Errorf("stderr %q lacks %q", msg, w)
				}
			}
			if b, _ := os.ReadFile(logins); string(b) != "login\n" {
				t.Errorf("ssh ran %d times, want once", strings.Count(string(b), "login"))
			}
		})
	}
}

// `sous exec --remote ssh://` takes binary frames through the bridge,
// which relays their raw bytes untouched: a child's random output, stdout
// and stderr interleaved, arrives exact, and no base64 data went through
// ssh (the bridge's output, teed to a file, shows it).
func TestSSHExecBinaryFramesByteExact(t *testing.T) {
	f := newSSHFixture(t)
	dir := t.TempDir()
	var want [2][]byte
	script, want0, want1 := testutil.RandomOutputScript(t, dir, 2<<20+1, 1<<20+3, 3<<20, 500<<10)
	want[0], want[1] = want0, want1
	seen := filepath.Join(dir, "bridge-out")
	wrap := filepath.Join(dir, "bridge.sh")
	wrapper := fmt.Sprintf("#!/bin/sh\n%q daemon bridge --socket \"$1\" | tee %q\n", f.bin, seen)
	if err := os.WriteFile(wrap, []byte(wrapper), 0o700); err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(f.bin, "exec", "--remote", f.remote, "--", "sh", "-c", script)
	cmd.Env = append(f.env, "SOUS_BRIDGE_CMD="+wrap)
	var o, e bytes.Buffer
	cmd.Stdout, cmd.Stderr = &o, &e
	if err := cmd.Run(); err != nil {
		t.Fatalf("exec over ssh: %v (stderr: %d bytes)", err, e.Len())
	}
	if !bytes.Equal(o.Bytes(), want[0]) || !bytes.Equal(e.Bytes(), want[1]) {
		t.Fatalf("stdout %d bytes (want %d), stderr %d (want %d): not the bytes written", o.Len(), len(want[0]), e.Len(), len(want[1]))
	}
	relayed, err := os.ReadFile(seen)
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Contains(relayed, []byte(`"dataBytes":`)) || bytes.Contains(relayed, []byte(`"data":"`)) {
		t.Fatalf("the bridge relayed %d bytes with no binary frames, or with base64 data", len(relayed))
	}
}
