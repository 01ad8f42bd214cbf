package bench

import (
	"bufio"
	"context"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// echoEnv, when set in the environment, makes the test binary an echo
// server on that Unix socket path instead of running tests: the ping row's
// baseline, a second process answering each line at once with no work, so
// that the row shows what a round trip between two processes costs on this
// machine in the same run.
const echoEnv = "SOUS_BENCH_ECHO_SOCKET"

func TestMain(m *testing.M) {
	if path := os.Getenv(echoEnv); path != "" {
		if err := serveEcho(path); err != nil {
			os.Stderr.WriteString("echo server: " + err.Error() + "\n")
			os.Exit(1)
		}
		os.Exit(0)
	}
	if mode := os.Getenv(wsRelayEnv); mode != "" {
		if err := wsRelayMain(mode); err != nil {
			os.Stderr.WriteString("ws relay: " + err.Error() + "\n")
			os.Exit(1)
		}
		os.Exit(0)
	}
	os.Exit(m.Run())
}

// serveEcho writes every line back on the connection it came from, and
// says "listening" on stdout once it accepts.
func serveEcho(path string) error {
	ln, err := net.Listen("unix", path)
	if err != nil {
		return err
	}
	os.Stdout.WriteString("listening\n")
	for {
		c, err := ln.Accept()
		if err != nil {
			return err
		}
		go func() {
			defer c.Close()
			r := bufio.NewReader(c)
			for {
				line, err := r.ReadSlice('\n')
				if err != nil {
					return
				}
				if _, err := c.Write(line); err != nil {
					return
				}
			}
		}()
	}
}

// echoServer is a running echo server process.
type echoServer struct {
	socket string
	cmd    *exec.Cmd
}

func (e *env) startEcho(t *testing.T) *echoServer {
	t.Helper()
	s := &echoServer{socket: filepath.Join(e.dir, "echo.sock")}
	s.cmd = exec.Command(os.Args[0])
	s.cmd.Env = append(os.Environ(), echoEnv+"="+s.socket)
	out, err := s.cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := s.cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.cmd.Process.Kill(); s.cmd.Wait() })
	line, _ := bufio.NewReader(out).ReadString('\n')
	if !strings.Contains(line, "listening") {
		t.Fatalf("echo server did not start: %q", line)
	}
	return s
}

// roundTrips times n request-response round trips of line over a new
// connection to the echo server, one at a time.
func (s *echoServer) roundTrips(t *testing.T, line string, n int) []time.Duration {
	t.Helper()
	call := s.caller(t, line)
	lat := make([]time.Duration, 0, n)
	for range n {
		start := time.Now()
		if err := call(); err != nil {
			t.Fatal(err)
		}
		lat = append(lat, time.Since(start))
	}
	return lat
}

// caller returns a function that makes one round trip of line over a
// connection of its own to the echo server.
func (s *echoServer) caller(t *testing.T, line string) func() error {
	t.Helper()
	var d net.Dialer
	c, err := d.DialContext(context.Background(), "unix", s.socket)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	r := bufio.NewReader(c)
	return func() error {
		if _, err := c.Write([]byte(line)); err != nil {
			return err
		}
		_, err := r.ReadSlice('\n')
		return err
	}
}
