package bench

import (
	"context"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/coder/websocket"

	"github.com/seed5ad92d46/sous/internal/testutil"
)

// The rows of this file are the remote transports: `sous exec --remote`
// over ssh (the exec bridge: `ssh host sous daemon bridge`) and over
// WebSocket, each reading a child's output as binary frames (a JSON header
// line, then the raw bytes: connection.binaryFrames, which the client asks
// for; base64 in JSON lines before it) and writing it to /dev/null, against a raw relay of the same bytes
// through the same transport: `ssh host head -c N /dev/zero`, and a bare
// WebSocket relay (wsRelayEnv) using the daemon's WebSocket library.

// wsRelayEnv, when set, makes the test binary one end of the WebSocket
// baseline instead of running tests: "serve ADDR" serves `head -c N
// /dev/zero` for ws://ADDR/?n=N as binary messages of at most 32 KiB (a
// frame's data), and says "listening" on stdout; "read URL" reads such a
// stream into stdout.
const wsRelayEnv = "SOUS_BENCH_WS_RELAY"

func wsRelayMain(mode string) error {
	verb, arg, _ := strings.Cut(mode, " ")
	switch verb {
	case "serve":
		ln, err := net.Listen("tcp", arg)
		if err != nil {
			return err
		}
		os.Stdout.WriteString("listening\n")
		return http.Serve(ln, http.HandlerFunc(serveRelay))
	case "read":
		return readRelay(arg)
	}
	return fmt.Errorf("%s=%q: want serve ADDR or read URL", wsRelayEnv, mode)
}

func serveRelay(w http.ResponseWriter, r *http.Request) {
	ws, err := websocket.Accept(w, r, &websocket.AcceptOptions{CompressionMode: websocket.CompressionDisabled})
	if err != nil {
		return
	}
	defer ws.CloseNow()
	cmd := exec.Command("head", "-c", r.URL.Query().Get("n"), "/dev/zero")
	out, err := cmd.StdoutPipe()
	if err != nil || cmd.Start() != nil {
		ws.Close(websocket.StatusInternalError, "spawn")
		return
	}
	buf := make([]byte, 32<<10)
	ctx := context.Background()
	for {
		n, rerr := out.Read(buf)
		if n > 0 {
			if err := ws.Write(ctx, websocket.MessageBinary, buf[:n]); err != nil {
				cmd.Process.Kill()
				cmd.Wait()
				return
			}
		}
		if rerr != nil {
			break
		}
	}
	cmd.Wait()
	ws.Close(websocket.StatusNormalClosure, "")
}

func readRelay(url string) error {
	ctx := context.Background()
	ws, _, err := websocket.Dial(ctx, url, &websocket.DialOptions{CompressionMode: websocket.CompressionDisabled})
	if err != nil {
		return err
	}
	defer ws.CloseNow()
	buf := make([]byte, 64<<10)
	for {
		_, r, err := ws.Reader(ctx)
		if websocket.CloseStatus(err) == websocket.StatusNormalClosure {
			return nil
		}
		if err != nil {
			return err
		}
		if _, err := io.CopyBuffer(os.Stdout, r, buf); err != nil {
			return err
		}
	}
}

// remoteSize is the remote rows' stream: a quarter of the others', since
// both transports move a few hundred MB/s here.
func (e *env) remoteSize() string { return strconv.FormatInt(e.bytes/4, 10) }

// wsStream times `sous exec --remote ws://` of `head -c N /dev/zero` into
// /dev/null against the bare WebSocket relay of the same bytes, both over
// loopback TCP, alternated.
func (e *env) wsStream(t *testing.T) row {
	size := e.remoteSize()
	addr := freeAddr(t)
	d := e.startDaemon(t, "--listen", "ws://"+addr)
	relayAddr := freeAddr(t)
	exe, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	relay := exec.Command(exe)
	relay.Env = append(os.Environ(), wsRelayEnv+"=serve "+relayAddr)
	relayOut, err := relay.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := relay.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { relay.Process.Kill(); relay.Wait() })
	if line, _ := readLine(relayOut); line != "listening" {
		t.Fatalf("ws relay did not start: %q", line)
	}
	raw := exe + " > /dev/null"
	rawEnv := wsRelayEnv + "=read ws://" + relayAddr + "/?n=" + size
	via := e.bin + " exec --remote ws://" + addr + " -- head -c " + size + " /dev/zero > /dev/null"
	var ratios []float64
	var times, rawTimes []time.Duration
	for range e.repeats {
		tr := timeShell(t, raw, rawEnv)
		tv := timeShell(t, via, "SOUS_TOKEN="+d.token)
		ratios, times, rawTimes = append(ratios, tr.Seconds()/tv.Seconds()), append(times, tv), append(rawTimes, tr)
	}
	ratio := medianFloat(ratios)
	return row{
		figure:   "`sous exec --remote ws://` (loopback TCP) streaming " + human(e.bytes/4) + " into /dev/null: binary frames over WebSocket (one binary message each: a JSON header line, then the raw bytes), exec writes them",
		baseline: "a bare Go relay of the same bytes as binary WebSocket messages (coder/websocket, as the daemon; a second process reading them into /dev/null)",
		target:   ">= 0.7 of the relay",
		result:   fmt.Sprintf("%.2fx (%.0f MB/s; the relay %.0f MB/s)", ratio, rate(e.bytes/4, times), rate(e.bytes/4, rawTimes)),
		ok:       ratio >= 0.7,
	}
}

// sshStream times `sous exec --remote ssh://` (the exec bridge through a
// real sshd on loopback) of `head -c N /dev/zero` into /dev/null against
// `ssh host head -c N /dev/zero` into /dev/null through the same sshd,
// alternated.
func (e *env) sshStream(t *testing.T) row {
	figure := "`sous exec --remote ssh://` (OpenSSH on loopback, the exec bridge) streaming " + human(e.bytes/4) + " into /dev/null: binary frames (a JSON header line, then the raw bytes) through ssh, exec writes them"
	baseline := "`ssh host head -c N /dev/zero` into /dev/null through the same sshd"
	target := ">= 0.7 of ssh"
	if _, err := os.Stat("/usr/sbin/sshd"); err != nil || os.Geteuid() != 0 {
		return row{figure: figure, baseline: baseline, target: target, result: "not measured: needs /usr/sbin/sshd and root"}
	}
	size := e.remoteSize()
	d := e.startDaemon(t)
	sshd := testutil.StartSSHD(t)
	ssh, port := sshd.Command, sshd.Port
	raw := fmt.Sprintf("%s -p %d root@127.0.0.1 head -c %s /dev/zero > /dev/null", ssh, port, size)
	via := fmt.Sprintf("%s exec --remote ssh://root@127.0.0.1:%d%s -- head -c %s /dev/zero > /dev/null", e.bin, port, d.socket, size)
	env := []string{"SOUS_SSH_COMMAND=" + ssh, "SOUS_BRIDGE_CMD=" + e.bin + " daemon bridge --socket", "SOUS_TOKEN=" + d.token}
	var ratios []float64
	var times, rawTimes []time.Duration
	for range e.repeats {
		tr := timeShell(t, raw)
		tv := timeShell(t, via, env...)
		ratios, times, rawTimes = append(ratios, tr.Seconds()/tv.Seconds()), append(times, tv), append(rawTimes, tr)
	}
	ratio := medianFloat(ratios)
	return row{figure: figure, baseline: baseline, target: target,
		result: fmt.Sprintf("%.2fx (%.0f MB/s; ssh itself %.0f MB/s)", ratio, rate(e.bytes/4, times), rate(e.bytes/4, rawTimes)),
		ok:     ratio >= 0.7}
}

func freeAddr(t *testing.T) string {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	return ln.Addr().String()
}

func readLine(r io.Reader) (string, error) {
	var b []byte
	one := make([]byte, 1)
	for {
		n, err := r.Read(one)
		if n == 1 {
			if one[0] == '\n' {
				return string(b), nil
			}
			b = append(b, one[0])
		}
		if err != nil {
			return string(b), err
		}
	}
}
