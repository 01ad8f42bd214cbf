package main

import (
	"bufio"
	"bytes"
	"io"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/seed5ad92d46/sous/daemon"
	"github.com/seed5ad92d46/sous/daemon/wire"
	"github.com/seed5ad92d46/sous/internal/testutil"
)

// Through ssh, the bridge hands sshd's pipes to the daemon
// (connection.stdio), and everything works as through the relay: stdin,
// stdout, stderr and the exit code; with --pass-stdio=false it relays. In
// both cases no bridge is left once the command is done (sshd ends the
// session only when the bridge has exited and the daemon let go of its
// pipes).
func TestSSHBridgePassesStdio(t *testing.T) {
	f := newSSHFixture(t)
	for _, tc := range []struct {
		name   string
		bridge string
		handed int // connections moved to the bridge's pipes
	}{
		{"handed", f.bin + " daemon bridge --socket", 1},
		{"relayed", f.bin + " daemon bridge --pass-stdio=false --socket", 0},
	} {
		t.Run(tc.name, func(t *testing.T) {
			before := strings.Count(f.log.String(), "state=stdio")
			cmd := exec.Command(f.bin, "exec", "--remote", f.remote, "--", "sh", "-c", "cat; echo to-err >&2; exit 5")
			cmd.Env = append(f.env, "SOUS_BRIDGE_CMD="+tc.bridge)
			cmd.Stdin = strings.NewReader("through the pipes\n")
			var o, e bytes.Buffer
			cmd.Stdout, cmd.Stderr = &o, &e
			err := cmd.Run()
			if ee, _ := err.(*exec.ExitError); ee == nil || ee.ExitCode() != 5 || o.String() != "through the pipes\n" || e.String() != "to-err\n" {
				t.Fatalf("exec over ssh: %v, stdout %q, stderr %q", err, o.String(), e.String())
			}
			if got := strings.Count(f.log.String(), "state=stdio") - before; got != tc.handed {
				t.Fatalf("%d connections moved to the bridge's pipes, want %d; daemon log:\n%s", got, tc.handed, f.log.String())
			}
			waitNoBridge(t, f.socket)
		})
	}
}

// waitNoBridge waits until no `daemon bridge` for socket is running.
func waitNoBridge(t *testing.T, socket string) {
	t.Helper()
	for deadline := time.Now().Add(10 * time.Second); ; time.Sleep(20 * time.Millisecond) {
		left := bridgesFor(socket)
		if len(left) == 0 {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("bridges still running after the command ended: %v", left)
		}
	}
}

func bridgesFor(socket string) []string {
	var found []string
	entries, _ := os.ReadDir("/proc")
	for _, e := range entries {
		b, err := os.ReadFile(filepath.Join("/proc", e.Name(), "cmdline"))
		if err != nil {
			continue
		}
		args := strings.ReplaceAll(string(b), "\x00", " ")
		if strings.Contains(args, "daemon bridge") && strings.Contains(args, socket) {
			found = append(found, e.Name()+": "+args)
		}
	}
	return found
}

// bridgeOn runs `sous daemon bridge --socket socket` with pipes for stdin
// and stdout (as sshd gives them), and returns them.
func bridgeOn(t *testing.T, socket string) (*exec.Cmd, io.WriteCloser, *bufio.Reader) {
	t.Helper()
	cmd := exec.Command(sousBinary(t), "daemon", "bridge", "--socket", socket)
	in, err := cmd.StdinPipe()
	if err != nil {
		t.Fatal(err)
	}
	out, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	var e testutil.SyncBuffer
	cmd.Stderr = &e
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		cmd.Process.Kill()
		cmd.Wait()
		if t.Failed() {
			t.Logf("bridge stderr: %s", e.String())
		}
	})
	return cmd, in, bufio.NewReader(out)
}

// A daemon without connection.stdio (here, one with it disabled: it refuses
// the request without a token, as claustrum and older sous daemons do) gets
// the plain relay on the same connection, the refusal kept from the client.
func TestBridgeRelaysToADaemonWithoutStdio(t *testing.T) {
	cfg := embeddedConfig()
	cfg.Token = "old-daemon-token"
	cfg.DisableFeatures = []string{wire.FeatureConnectionStdio}
	srv, err := daemon.New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	socket := filepath.Join(testutil.ShortTempDir(t), "s")
	ln, err := daemon.ListenUnix(socket)
	if err != nil {
		t.Fatal(err)
	}
	go srv.Serve(ln)
	t.Cleanup(func() { srv.Close() })

	cmd, in, out := bridgeOn(t, socket)
	io.WriteString(in, `{"jsonrpc":"2.0","id":1,"method":"server.ping","auth":"old-daemon-token"}`+"\n")
	line, err := out.ReadString('\n')
	if err != nil || line != `{"jsonrpc":"2.0","id":1,"result":{"pong":true}}`+"\n" {
		t.Fatalf("through the bridge: %q, %v", line, err)
	}
	in.Close()
	if rest, _ := io.ReadAll(out); len(rest) != 0 {
		t.Fatalf("after the answer: %q", rest)
	}
	if err := cmd.Wait(); err != nil {
		t.Fatalf("bridge: %v", err)
	}
}

// A daemon that hangs up on a request it does not know is dialled again,
// and the client's bytes go through the new connection as they were sent.
func TestBridgeRedialsADaemonThatHangsUp(t *testing.T) {
	socket := filepath.Join(testutil.ShortTempDir(t), "s")
	ln, err := net.Listen("unix", socket)
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	firstLines := make(chan string, 2)
	go func() {
		for i := 0; ; i++ {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			r := bufio.NewReader(c)
			line, _ := r.ReadString('\n')
			firstLines <- line
			if i == 0 {
				c.Close() // a daemon that does not take the request
				continue
			}
			io.WriteString(c, `{"jsonrpc":"2.0","id":7,"result":{}}`+"\n")
			io.Copy(io.Discard, r)
			c.Close()
			return
		}
	}()
	cmd, in, out := bridgeOn(t, socket)
	request := `{"jsonrpc":"2.0","id":7,"method":"server.version","auth":"x"}` + "\n"
	io.WriteString(in, request)
	line, err := out.ReadString('\n')
	if err != nil || line != `{"jsonrpc":"2.0","id":7,"result":{}}`+"\n" {
		t.Fatalf("through the bridge: %q, %v", line, err)
	}
	if first := <-firstLines; !strings.Contains(first, `"method":"connection.stdio"`) {
		t.Fatalf("the first connection's line: %q", first)
	}
	if second := <-firstLines; second != request {
		t.Fatalf("the second connection's first line: %q, want the client's", second)
	}
	in.Close()
	if err := cmd.Wait(); err != nil {
		t.Fatalf("bridge: %v", err)
	}
}
