package daemon

import (
	"bytes"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/seed5ad92d46/sous/internal/testutil"
)

func TestSocketMode0600(t *testing.T) {
	t.Parallel()
	d := startDaemon(t, Config{})
	fi, err := os.Stat(d.sock)
	if err != nil {
		t.Fatal(err)
	}
	if fi.Mode()&os.ModeSocket == 0 || fi.Mode().Perm() != 0o600 {
		t.Fatalf("socket mode %v, want a 0600 socket", fi.Mode())
	}
	// No helper directory is left next to the socket.
	ents, _ := os.ReadDir(strings.TrimSuffix(d.sock, "/s"))
	if len(ents) != 1 {
		t.Fatalf("socket dir holds %d entries", len(ents))
	}
	// A second daemon on a live socket is refused.
	if _, err := ListenUnix(d.sock); err == nil {
		t.Fatal("ListenUnix on a live socket succeeded")
	}
	// A path that is not a socket is never replaced (nor deleted at close).
	file := filepath.Join(t.TempDir(), "precious.txt")
	os.WriteFile(file, []byte("data"), 0o644)
	if ln, err := ListenUnix(file); err == nil || !strings.Contains(err.Error(), "the path exists and is not a socket") {
		if ln != nil {
			ln.Close()
		}
		t.Fatalf("ListenUnix on a regular file: %v", err)
	}
	if b, err := os.ReadFile(file); err != nil || string(b) != "data" {
		t.Fatalf("the file is now %q, %v", b, err)
	}
	// A stale socket (nobody accepts) is replaced.
	stale := filepath.Join(testutil.ShortTempDir(t), "stale.sock")
	old, err := net.Listen("unix", stale)
	if err != nil {
		t.Fatal(err)
	}
	old.(*net.UnixListener).SetUnlinkOnClose(false)
	old.Close()
	ln, err := ListenUnix(stale)
	if err != nil {
		t.Fatalf("ListenUnix on a stale socket: %v", err)
	}
	ln.Close()
}

func TestPersistentConnection(t *testing.T) {
	t.Parallel()
	d := startDaemon(t, Config{})
	c := d.dial()
	for i := 0; i < 20; i++ {
		c.wantResult("server.ping", "", `{"pong":true}`)
	}
	// String and odd ids are echoed exactly.
	c.send(`{"jsonrpc":"2.0","id":"a\"b","method":"server.ping","auth":"` + testToken + `"}` + "\n")
	if got := string(c.respFor(`"a\"b"`)); got != `{"jsonrpc":"2.0","id":"a\"b","result":{"pong":true}}`+"\n" {
		t.Errorf("string id: %s", got)
	}
	// A request without id is answered with id null.
	c.send(`{"jsonrpc":"2.0","method":"server.ping","auth":"` + testToken + `"}` + "\n")
	if got := string(c.respFor("null")); got != `{"jsonrpc":"2.0","id":null,"result":{"pong":true}}`+"\n" {
		t.Errorf("no id: %s", got)
	}
}

// A slow killAndWait does not hold up a ping on the same connection.
func TestConcurrentDispatch(t *testing.T) {
	t.Parallel()
	d := startDaemon(t, Config{})
	c := d.dial()
	c.result("process.spawn", shParams("stubborn", `trap '' TERM; echo ready; sleep 30`))
	c.waitFrames("stubborn", 1)
	start := time.Now()
	slow := c.sendRequest("process.killAndWait", `{"id":"stubborn","timeoutMs":1500,"escalate":false}`)
	time.Sleep(50 * time.Millisecond) // let the killAndWait start
	c.wantResult("server.ping", "", `{"pong":true}`)
	if el := time.Since(start); el > time.Second {
		t.Fatalf("ping answered after %v: blocked behind killAndWait", el)
	}
	got := string(c.respFor(fmt.Sprint(slow)))
	if want := fmt.Sprintf(`{"jsonrpc":"2.0","id":%d,"result":{"found":true,"died":false}}`+"\n", slow); got != want {
		t.Fatalf("killAndWait: %s", got)
	}
	c.result("process.kill", `{"id":"stubborn","signal":"KILL"}`)
	c.waitExit("stubborn")
}

// paddedPing is a valid server.ping line of exactly n bytes before its newline.
func paddedPing(n int) string {
	head := `{"jsonrpc":"2.0","id":7,"method":"server.ping","auth":"` + testToken + `","pad":"`
	tail := `"}`
	return head + strings.Repeat("x", n-len(head)-len(tail)) + tail + "\n"
}

func TestLineLimit(t *testing.T) {
	t.Parallel()
	d := startDaemon(t, Config{})

	t.Run("1048575 served", func(t *testing.T) {
		c := d.dial()
		c.send(paddedPing(1048575))
		if got := string(c.respFor("7")); got != `{"jsonrpc":"2.0","id":7,"result":{"pong":true}}`+"\n" {
			t.Fatalf("got %s", got)
		}
		// A big process.stdin payload just under the cap is decoded and applied.
		c.result("process.spawn", `{"id":"big","command":"cat"}`)
		prefix := `{"jsonrpc":"2.0","id":8,"method":"process.stdin","auth":"` + testToken + `","params":{"id":"big","data":"`
		suffix := `"}}`
		n := (1048575 - len(prefix) - len(suffix)) / 4 * 4
		pad := strings.Repeat(" ", 1048575-len(prefix)-len(suffix)-n) // whitespace is valid JSON
		line := prefix + strings.Repeat("QUJD", n/4) + suffix + pad + "\n"
		if len(line) != 1048576 {
			t.Fatalf("built %d bytes", len(line))
		}
		c.send(line)
		want := fmt.Sprintf(`{"jsonrpc":"2.0","id":8,"result":{"success":true,"applied":%d}}`+"\n", n/4*3)
		if got := string(c.respFor("8")); got != want {
			t.Fatalf("got %s want %s", got, want)
		}
		c.result("process.stdin", `{"id":"big","data":"","close":true}`)
		frames := c.waitExit("big")
		if out := output(frames, 1); len(out) != n/4*3 || !bytes.Equal(out[:6], []byte("ABCABC")) {
			t.Fatalf("cat echoed %d bytes", len(out))
		}
	})

	t.Run("1048576 closes", func(t *testing.T) {
		c := d.dial()
		c.wantResult("server.ping", "", `{"pong":true}`)
		c.send(paddedPing(1048576))
		c.waitClosed(10 * time.Second)
		c.mu.Lock()
		defer c.mu.Unlock()
		if len(c.all) != 1 {
			t.Fatalf("got %d lines, want only the first ping's reply: %q", len(c.all), c.all)
		}
	})

	t.Run("oversized without newline closes", func(t *testing.T) {
		c := d.dial()
		c.send(strings.Repeat("y", 1048576+10))
		c.waitClosed(10 * time.Second)
		c.mu.Lock()
		defer c.mu.Unlock()
		if len(c.all) != 0 {
			t.Fatalf("got a reply: %q", c.all)
		}
	})
}

func TestBlankLinesIgnored(t *testing.T) {
	t.Parallel()
	d := startDaemon(t, Config{})
	c := d.dial()
	c.send("\n\n   \n\t\r\n\r\n")
	c.wantResult("server.ping", "", `{"pong":true}`)
	c.send("\n")
	c.wantResult("server.ping", "", `{"pong":true}`)
	c.mu.Lock()
	defer c.mu.Unlock()
	if len(c.all) != 2 {
		t.Fatalf("blank lines were answered: %q", c.all)
	}
}

// A last request without a trailing newline is still served before EOF.
func TestFinalLineWithoutNewline(t *testing.T) {
	t.Parallel()
	d := startDaemon(t, Config{})
	c := d.dial()
	c.send(`{"jsonrpc":"2.0","id":1,"method":"server.ping","auth":"` + testToken + `"}`)
	c.nc.(interface{ CloseWrite() error }).CloseWrite()
	if got := string(c.respFor("1")); got != `{"jsonrpc":"2.0","id":1,"result":{"pong":true}}`+"\n" {
		t.Fatalf("got %s", got)
	}
	c.waitClosed(5 * time.Second)
}
