package client_test

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"io"
	"net"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/seed5ad92d46/sous/daemon"
	"github.com/seed5ad92d46/sous/daemon/client"
	"github.com/seed5ad92d46/sous/daemon/wire"
)

// lateSpawn dials a daemon through relays that make a spawn's first request
// arrive late: the first connection takes the client's process.spawn line
// and breaks at once on the client's side, as a cut does, while its side
// at the daemon stays open with the line held. The client reconnects on a
// second connection, finds no such process there, and sends the spawn
// again; the held line is delivered to the daemon (on the first
// connection, as a request read before a cut is still handled) at the
// moment the test chose:
//   - beforeResend: when the resend comes, before it goes on; it goes on
//     once the daemon has answered the held line and its child has run;
//   - afterResend: when the daemon's answer to the resend comes back, before
//     the client gets it.
type lateSpawn struct {
	sock         string
	afterResend  bool
	ranOnce      func() bool // the first request's child has done its visible work
	mu           sync.Mutex
	dials        int
	held         []byte   // the first connection's spawn line
	first        net.Conn // the first connection's daemon side
	answered     chan struct{}
	firstAnswer  wire.SpawnResult // the daemon's answer to the held line
	releasedOnce sync.Once
	t            *testing.T
}

func (ls *lateSpawn) dial(ctx context.Context) (io.ReadWriteCloser, error) {
	var d net.Dialer
	dc, err := d.DialContext(ctx, "unix", ls.sock)
	if err != nil {
		return nil, err
	}
	cc, pc := net.Pipe() // cc: the client's end; pc: the relay's
	ls.mu.Lock()
	ls.dials++
	n := ls.dials
	if n == 1 {
		ls.first = dc
	}
	ls.mu.Unlock()
	go ls.up(n, pc, dc)
	go ls.down(n, pc, dc)
	return cc, nil
}

func isSpawn(line []byte) bool { return bytes.Contains(line, []byte(`"method":"process.spawn"`)) }

func isSpawnAnswer(line []byte) bool {
	return bytes.Contains(line, []byte(`"result":{"success":true,"pid":`))
}

// up relays the client's lines to the daemon.
func (ls *lateSpawn) up(n int, pc, dc net.Conn) {
	br := bufio.NewReader(pc)
	for {
		line, err := br.ReadBytes('\n')
		if err != nil {
			dc.Close()
			return
		}
		switch {
		case n == 1 && isSpawn(line):
			ls.mu.Lock()
			ls.held = line
			ls.mu.Unlock()
			pc.Close() // the client sees the connection break; the daemon does not yet
			return
		case n == 2 && isSpawn(line) && !ls.afterResend:
			ls.release()
		}
		if _, err := dc.Write(line); err != nil {
			return
		}
	}
}

// down relays the daemon's lines to the client. On the first connection,
// whose client side is gone, it reads the answer to the held line.
func (ls *lateSpawn) down(n int, pc, dc net.Conn) {
	br := bufio.NewReader(dc)
	for {
		line, err := br.ReadBytes('\n')
		if err != nil {
			pc.Close()
			return
		}
		if n == 1 && isSpawnAnswer(line) {
			var resp struct {
				Result wire.SpawnResult `json:"result"`
			}
			if err := json.Unmarshal(line, &resp); err != nil {
				ls.t.Errorf("the first spawn's answer %q: %v", line, err)
			}
			ls.firstAnswer = resp.Result
			close(ls.answered)
			continue
		}
		if n == 2 && isSpawnAnswer(line) && ls.afterResend {
			ls.release()
		}
		pc.Write(line) // fails on the first connection: nobody reads it
	}
}

// release delivers the held spawn line to the daemon on the first
// connection and waits for the daemon's answer, and for its child's work.
func (ls *lateSpawn) release() {
	ls.releasedOnce.Do(func() {
		ls.mu.Lock()
		held, first := ls.held, ls.first
		ls.mu.Unlock()
		if held == nil {
			ls.t.Error("the resend came before the first spawn request")
			return
		}
		if _, err := first.Write(held); err != nil {
			ls.t.Errorf("delivering the held spawn: %v", err)
			return
		}
		select {
		case <-ls.answered:
		case <-time.After(10 * time.Second):
			ls.t.Error("the daemon never answered the held spawn")
			return
		}
		if !ls.afterResend {
			deadline := time.Now().Add(10 * time.Second)
			for !ls.ranOnce() && time.Now().Before(deadline) {
				time.Sleep(5 * time.Millisecond)
			}
		}
	})
}

// TestSpawnResentAfterLateFirstRequest: a spawn whose connection broke
// with its request in flight is sent again by Spawn on the new connection,
// and the daemon may handle the first request after the reconnect looked
// for the process, before or after the resend. Whichever comes first, one
// process runs: the other request answers with it (process.spawn.key), and
// the client's Proc gets all its output and its exit. Without the key the
// resend replaced the first process (it ran twice), or the late first
// request replaced the resend's, whose Proc then failed with "was replaced
// on the daemon by a new process with the same id before it exited".
func TestSpawnResentAfterLateFirstRequest(t *testing.T) {
	for _, tc := range []struct {
		name        string
		afterResend bool
	}{
		{"first handled before the resend", false},
		{"first handled after the resend", true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			runs := filepath.Join(t.TempDir(), "runs")
			ls := &lateSpawn{
				sock:        startDaemon(t, daemon.Config{}),
				afterResend: tc.afterResend,
				answered:    make(chan struct{}),
				t:           t,
				ranOnce: func() bool {
					b, _ := os.ReadFile(runs)
					return len(b) > 0
				},
			}
			ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
			defer cancel()
			c, err := client.Dial(ctx, ls.dial, testToken, client.Options{ReconnectTimeout: 10 * time.Second})
			if err != nil {
				t.Fatal(err)
			}
			defer c.Close()
			var (
				mu  sync.Mutex
				out bytes.Buffer
			)
			p, err := c.Spawn(ctx, client.SpawnSpec{
				ID: "late", Command: "sh",
				Args: []string{"-c", `echo run >> "$1"; read x; echo "got $x"`, "sh", runs},
			}, func(f *wire.Frame) {
				if f.Stream == wire.Stdout {
					mu.Lock()
					out.Write(f.Data)
					mu.Unlock()
				}
			})
			if err != nil {
				t.Fatalf("spawn: %v", err)
			}
			if _, err := p.Write(ctx, []byte("hello\n")); err != nil {
				t.Fatalf("write: %v", err)
			}
			code, err := p.Wait(ctx)
			if err != nil || code != 0 {
				t.Fatalf("wait: code %d, %v", code, err)
			}
			mu.Lock()
			got := out.String()
			mu.Unlock()
			if got != "got hello\n" {
				t.Errorf("output %q, want %q", got, "got hello\n")
			}
			select {
			case <-ls.answered:
			default:
				t.Fatal("the held spawn was never handled: the race was not set up")
			}
			if ls.firstAnswer.Pid != p.Pid || ls.firstAnswer.StartTime != p.StartTime {
				t.Errorf("the two requests answered different processes: pid %d (%f) and pid %d (%f)",
					ls.firstAnswer.Pid, ls.firstAnswer.StartTime, p.Pid, p.StartTime)
			}
			b, _ := os.ReadFile(runs)
			if n := strings.Count(string(b), "run\n"); n != 1 {
				t.Errorf("the command ran %d times, want once", n)
			}
		})
	}
}

// cutRelay dials a daemon through relays the test can cut on the
// client's side; with loseSpawnAnswer, the first connection is cut as the
// daemon's answer to a process.spawn comes, which the client never gets.
// Dials after the first wait for gate to close.
type cutRelay struct {
	sock            string
	loseSpawnAnswer bool
	dropSpawn       int // the first connection breaks as this spawn request (counted from 1) comes, which never reaches the daemon
	gate            chan struct{}
	lost            chan wire.SpawnResult // the answer the client never got
	mu              sync.Mutex
	dials           int
	cur             net.Conn // the current connection's client-side relay end
}

func (cr *cutRelay) dial(ctx context.Context) (io.ReadWriteCloser, error) {
	cr.mu.Lock()
	cr.dials++
	n := cr.dials
	cr.mu.Unlock()
	if n > 1 {
		select {
		case <-cr.gate:
		case <-ctx.Done():
			return nil, ctx.Err()
		}
	}
	var d net.Dialer
	dc, err := d.DialContext(ctx, "unix", cr.sock)
	if err != nil {
		return nil, err
	}
	cc, pc := net.Pipe()
	cr.mu.Lock()
	cr.cur = pc
	cr.mu.Unlock()
	go func() {
		defer dc.Close()
		br := bufio.NewReader(pc)
		spawns := 0
		for {
			line, err := br.ReadBytes('\n')
			if err != nil {
				return
			}
			if n == 1 && isSpawn(line) {
				if spawns++; spawns == cr.dropSpawn {
					pc.Close()
					return
				}
			}
			if _, err := dc.Write(line); err != nil {
				return
			}
		}
	}()
	go func() {
		defer pc.Close()
		br := bufio.NewReader(dc)
		for {
			line, err := br.ReadBytes('\n')
			if err != nil {
				return
			}
			if n == 1 && cr.loseSpawnAnswer && isSpawnAnswer(line) {
				var resp struct {
					Result wire.SpawnResult `json:"result"`
				}
				json.Unmarshal(line, &resp)
				cr.lost <- resp.Result
				return
			}
			if _, err := pc.Write(line); err != nil {
				return
			}
		}
	}()
	return cc, nil
}

// cut breaks the current connection on the client's side.
func (cr *cutRelay) cut() {
	cr.mu.Lock()
	defer cr.mu.Unlock()
	cr.cur.Close()
}

// TestSpawnAnswerLostStillIdentifies: a spawn whose answer a cut lost
// returns the process the reconnect found, identified as that answer would
// have: its pid and start time, and a later replacement by another client
// fails its Wait (it used to wait forever, the gone notice held for an
// identity that never came).
func TestSpawnAnswerLostStillIdentifies(t *testing.T) {
	t.Run("resent with its key", func(t *testing.T) { spawnAnswerLost(t, daemon.Config{}) })
	t.Run("found by the reconnect", func(t *testing.T) {
		spawnAnswerLost(t, daemon.Config{DisableFeatures: []string{wire.FeatureSpawnKey}})
	})
}

func spawnAnswerLost(t *testing.T, cfg daemon.Config) {
	sock := startDaemon(t, cfg)
	cr := &cutRelay{sock: sock, loseSpawnAnswer: true, gate: make(chan struct{}), lost: make(chan wire.SpawnResult, 1)}
	close(cr.gate)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	c, err := client.Dial(ctx, cr.dial, testToken, client.Options{ReconnectTimeout: 10 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	p, err := c.Spawn(ctx, client.SpawnSpec{ID: "lost", Command: "cat"}, nil)
	if err != nil {
		t.Fatalf("spawn: %v", err)
	}
	lost := <-cr.lost
	if p.Pid != lost.Pid || p.StartTime != lost.StartTime {
		t.Fatalf("the Proc is pid %d (%f), the daemon's answer was pid %d (%f)", p.Pid, p.StartTime, lost.Pid, lost.StartTime)
	}
	other, err := client.DialUnix(ctx, sock, testToken, client.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer other.Close()
	if _, err := other.Spawn(ctx, client.SpawnSpec{ID: "lost", Command: "true"}, nil); err != nil {
		t.Fatal(err)
	}
	wctx, wcancel := context.WithTimeout(ctx, 10*time.Second)
	defer wcancel()
	if _, err := p.Wait(wctx); err == nil || !strings.Contains(err.Error(), "replaced") {
		t.Fatalf("wait after the replacement: %v, want it replaced", err)
	}
}

// TestSpawnResendNotAnOlderProcess: a spawn whose request a cut lost
// before it reached the daemon starts its process, although the daemon
// still has an exited process under the id. The reconnect used to find
// that one and take it for the spawn's (its output and exit, "first").
func TestSpawnResendNotAnOlderProcess(t *testing.T) {
	sock := startDaemon(t, daemon.Config{})
	cr := &cutRelay{sock: sock, dropSpawn: 2, gate: make(chan struct{})}
	close(cr.gate)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	c, err := client.Dial(ctx, cr.dial, testToken, client.Options{ReconnectTimeout: 10 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	run := func(word string) string {
		var (
			mu  sync.Mutex
			out bytes.Buffer
		)
		p, err := c.Spawn(ctx, client.SpawnSpec{ID: "again", Command: "echo", Args: []string{word}}, func(f *wire.Frame) {
			mu.Lock()
			out.Write(f.Data)
			mu.Unlock()
		})
		if err != nil {
			t.Fatalf("spawn %s: %v", word, err)
		}
		if code, err := p.Wait(ctx); err != nil || code != 0 {
			t.Fatalf("wait %s: %d %v", word, code, err)
		}
		mu.Lock()
		defer mu.Unlock()
		return out.String()
	}
	if out := run("first"); out != "first\n" {
		t.Fatalf("first: %q", out)
	}
	if out := run("second"); out != "second\n" {
		t.Fatalf("the second spawn, resent after a cut, gave %q, want %q", out, "second\n")
	}
}
