package daemon

import (
	"bytes"
	"encoding/base64"
	"io"
	"log/slog"
	"net"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/seed5ad92d46/sous/internal/testutil"
)

// hardChildren spawns, over nc, a set of children that make shutdown hard and
// returns the pids of every process they started (descendants included).
func hardChildren(t *testing.T, nc net.Conn, dir string) []int {
	t.Helper()
	scripts := map[string]string{
		"sleeper":  `echo $$ > DIR/sleeper; exec sleep 60`,
		"tree":     `sleep 60 & echo $! > DIR/tree-gc; echo $$ > DIR/tree; wait`,
		"stubborn": `trap '' TERM; echo $$ > DIR/stubborn; while :; do sleep 1; done`,
		"chatty":   `echo $$ > DIR/chatty; exec yes`, // nobody reads its frames
		"deaf":     `echo $$ > DIR/deaf; exec sleep 60`,
	}
	id := 0
	for name, script := range scripts {
		id++
		io.WriteString(nc, requestLine(id, "process.spawn", shParams(name, strings.ReplaceAll(script, "DIR", dir))))
	}
	var pids []int
	for _, f := range []string{"sleeper", "tree", "tree-gc", "stubborn", "chatty", "deaf"} {
		pids = append(pids, readPidFile(t, filepath.Join(dir, f)))
	}
	// Fill the stdin pipe of a child that never reads it, so the daemon's
	// stdin writer is blocked in write(2) at shutdown.
	data := base64.StdEncoding.EncodeToString(bytes.Repeat([]byte("z"), 256<<10))
	io.WriteString(nc, requestLine(100, "process.stdin", `{"id":"deaf","data":"`+data+`"}`))
	return pids
}

func TestCloseKillsChildrenNoLeaks(t *testing.T) {
	g0 := runtime.NumGoroutine()
	srv, err := New(Config{Token: testToken, ShutdownGrace: 300 * time.Millisecond, ReplayMemLimit: 256 << 10})
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	sock := filepath.Join(testutil.ShortTempDir(t), "s")
	ln, err := ListenUnix(sock)
	if err != nil {
		t.Fatal(err)
	}
	served := make(chan error, 1)
	go func() { served <- srv.Serve(ln) }()

	// One connection spawns and never reads; another is idle.
	nc, err := net.Dial("unix", sock)
	if err != nil {
		t.Fatal(err)
	}
	idle, err := net.Dial("unix", sock)
	if err != nil {
		t.Fatal(err)
	}
	pids := hardChildren(t, nc, dir)
	time.Sleep(200 * time.Millisecond) // let the chatty child fill every buffer

	start := time.Now()
	if err := srv.Close(); err != nil {
		t.Fatal(err)
	}
	t.Logf("Close took %v", time.Since(start))
	if err := <-served; err != nil {
		t.Fatalf("Serve: %v", err)
	}
	for _, pid := range pids {
		waitGone(t, pid, 2*time.Second)
	}
	for _, c := range []net.Conn{nc, idle} {
		c.SetReadDeadline(time.Now().Add(5 * time.Second))
		if _, err := io.Copy(io.Discard, c); err != nil {
			t.Fatalf("connection not closed by the daemon: %v", err)
		}
		c.Close()
	}
	if _, err := os.Stat(sock); !os.IsNotExist(err) {
		t.Errorf("socket file left behind: %v", err)
	}
	if g, err := settleGoroutines(g0, 5*time.Second); err != nil {
		t.Fatalf("%d goroutines left, had %d before:\n%s", g, g0, err)
	}
	// A closed server refuses to serve again.
	if err := srv.Serve(ln); err == nil {
		t.Error("Serve after Close succeeded")
	}
}

func TestCloseKeepChildren(t *testing.T) {
	var logs testutil.SyncBuffer
	srv, err := New(Config{Token: testToken, KeepChildren: true, Logger: slog.New(slog.NewTextHandler(&logs, nil))})
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	sock := filepath.Join(testutil.ShortTempDir(t), "s")
	ln, err := ListenUnix(sock)
	if err != nil {
		t.Fatal(err)
	}
	go srv.Serve(ln)
	nc, err := net.Dial("unix", sock)
	if err != nil {
		t.Fatal(err)
	}
	defer nc.Close()
	io.WriteString(nc, requestLine(1, "process.spawn", shParams("a", `echo $$ > `+dir+`/a; exec sleep 60`)))
	io.WriteString(nc, requestLine(2, "process.spawn", shParams("b", `sleep 60 & echo $! > `+dir+`/b-gc; echo $$ > `+dir+`/b; wait`)))
	io.WriteString(nc, requestLine(3, "process.spawn", `{"id":"c","command":"true"}`))
	pids := []int{readPidFile(t, dir+"/a"), readPidFile(t, dir+"/b"), readPidFile(t, dir+"/b-gc")}
	// Wait for c to be done so that it counts as exited, not running.
	deadline := time.Now().Add(5 * time.Second)
	for srv.Registry().Get("c") == nil || srv.Registry().Get("c").Running() {
		if time.Now().After(deadline) {
			t.Fatal("c did not exit")
		}
		time.Sleep(5 * time.Millisecond)
	}

	srv.Close()
	time.Sleep(100 * time.Millisecond)
	for _, pid := range pids {
		if !testutil.Alive(pid) {
			t.Errorf("pid %d did not survive the shutdown", pid)
		}
	}
	if want := "[Server] -keep-children: leaving 2 running child process(es) alive across shutdown"; !strings.Contains(logs.String(), want) {
		t.Errorf("log lacks %q:\n%s", want, logs.String())
	}
	for _, pid := range pids[:2] {
		syscall.Kill(-pid, syscall.SIGKILL)
	}
	for _, pid := range pids {
		waitGone(t, pid, 5*time.Second)
	}
}
