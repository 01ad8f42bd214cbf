package testutil

import (
	"bytes"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"testing"
	"time"
)

// SSHD is an OpenSSH server on a loopback port with keys made for the
// test: the ssh transport's tests and the bench's ssh row log in to it.
type SSHD struct {
	Port int
	Pid  int
	// Dir holds its keys and config: short, so a socket fits beside them.
	Dir string
	// Command is the ssh command line that logs in to it (with -p Port).
	Command string
}

// StartSSHD starts /usr/sbin/sshd for the test and stops it at its end
// (printing its log if the test failed). The caller checks that sshd is
// installed and that it runs as root (sshd's privilege separation).
func StartSSHD(tb testing.TB) *SSHD {
	tb.Helper()
	dir := ShortTempDir(tb)
	for _, k := range []string{"host_key", "user_key"} {
		if out, err := exec.Command("ssh-keygen", "-q", "-t", "ed25519", "-N", "", "-f", filepath.Join(dir, k)).CombinedOutput(); err != nil {
			tb.Fatalf("ssh-keygen: %v\n%s", err, out)
		}
	}
	pub, err := os.ReadFile(filepath.Join(dir, "user_key.pub"))
	if err != nil {
		tb.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "authorized_keys"), pub, 0o600); err != nil {
		tb.Fatal(err)
	}
	os.MkdirAll("/run/sshd", 0o755) // privilege separation directory
	port := FreePort(tb)
	config := fmt.Sprintf(`Port %d
ListenAddress 127.0.0.1
HostKey %s/host_key
AuthorizedKeysFile %s/authorized_keys
PidFile %s/sshd.pid
StrictModes no
UsePAM no
PermitRootLogin yes
PasswordAuthentication no
KbdInteractiveAuthentication no
LogLevel ERROR
`, port, dir, dir, dir)
	if err := os.WriteFile(filepath.Join(dir, "sshd_config"), []byte(config), 0o600); err != nil {
		tb.Fatal(err)
	}
	cmd := exec.Command("/usr/sbin/sshd", "-D", "-e", "-f", filepath.Join(dir, "sshd_config"))
	var log bytes.Buffer
	cmd.Stdout, cmd.Stderr = &log, &log
	if err := cmd.Start(); err != nil {
		tb.Fatal(err)
	}
	tb.Cleanup(func() {
		cmd.Process.Kill()
		cmd.Wait()
		if tb.Failed() {
			tb.Logf("sshd log:\n%s", log.String())
		}
	})
	WaitForPort(tb, port)
	return &SSHD{Port: port, Pid: cmd.Process.Pid, Dir: dir,
		Command: fmt.Sprintf("ssh -i %s/user_key -o UserKnownHostsFile=/dev/null -o StrictHostKeyChecking=no -o LogLevel=ERROR", dir)}
}

// FreePort returns a loopback TCP port nothing listens on now.
func FreePort(tb testing.TB) int {
	tb.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		tb.Fatal(err)
	}
	defer ln.Close()
	return ln.Addr().(*net.TCPAddr).Port
}

// WaitForPort waits up to 10 s for something to listen on a loopback port.
func WaitForPort(tb testing.TB, port int) {
	tb.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for time.Now().Before(deadline) {
		if c, err := net.Dial("tcp", fmt.Sprintf("127.0.0.1:%d", port)); err == nil {
			c.Close()
			return
		}
		time.Sleep(20 * time.Millisecond)
	}
	tb.Fatalf("nothing listens on port %d", port)
}
