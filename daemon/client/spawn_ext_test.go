package client_test

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/seed5ad92d46/sous/daemon"
	"github.com/seed5ad92d46/sous/daemon/client"
	"github.com/seed5ad92d46/sous/daemon/wire"
	"github.com/seed5ad92d46/sous/internal/testutil"
)

// allExtensions are the spawn extensions a daemon can pretend not to have.
var allExtensions = []string{wire.FeatureSpawnPipeline, wire.FeatureSpawnTimeout, wire.FeatureSpawnEnvUnset, wire.FeatureSpawnTTY}

// extClients returns a client of a daemon with the extensions (embedded)
// and one of a daemon without them (a socket daemon that hides them, as a
// daemon from before them would).
func extClients(t *testing.T) map[string]*client.Client {
	t.Helper()
	_, emb := embeddedDaemon(t)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	old, err := client.DialUnix(ctx, startDaemon(t, daemon.Config{DisableFeatures: allExtensions}), testToken, client.Options{ReconnectTimeout: -1})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { old.Close() })
	return map[string]*client.Client{"new": emb, "old": old}
}

// collector gathers a process's output by stream and stage.
type collector struct {
	mu     sync.Mutex
	stdout []byte
	stages map[int][]byte // stderr by stage (-1: not a pipeline's)
}

func (c *collector) frame(f *wire.Frame) {
	c.mu.Lock()
	defer c.mu.Unlock()
	switch f.Stream {
	case wire.Stdout:
		c.stdout = append(c.stdout, f.Data...)
	case wire.Stderr:
		if c.stages == nil {
			c.stages = map[int][]byte{}
		}
		c.stages[f.StageIndex()] = append(c.stages[f.StageIndex()], f.Data...)
	}
}

func (c *collector) out() string {
	c.mu.Lock()
	defer c.mu.Unlock()
	return string(c.stdout)
}

func TestClientPipeline(t *testing.T) {
	t.Parallel()
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	cs := extClients(t)
	var col collector
	p, err := cs["new"].Spawn(ctx, client.SpawnSpec{ID: "pl", Pipeline: [][]string{
		{"sh", "-c", "echo a; echo b; echo e0 >&2; exit 2"}, {"sort", "-r"}, {"sh", "-c", "cat; echo e2 >&2"},
	}}, col.frame)
	if err != nil {
		t.Fatal(err)
	}
	p.CloseStdin(ctx)
	code, err := p.Wait(ctx)
	if err != nil || code != 0 || !slices.Equal(p.StageExitCodes(), []int{2, 0, 0}) {
		t.Fatalf("exit %d %v, stages %v", code, err, p.StageExitCodes())
	}
	if col.out() != "b\na\n" || string(col.stages[0]) != "e0\n" || string(col.stages[2]) != "e2\n" || len(col.stages[1]) != 0 {
		t.Fatalf("stdout %q, stderr by stage %s", col.out(), fmt.Sprintf("%q", [][]byte{col.stages[0], col.stages[1], col.stages[2]}))
	}

	_, err = cs["old"].Spawn(ctx, client.SpawnSpec{ID: "pl", Pipeline: [][]string{{"true"}}}, nil)
	if err == nil || !strings.Contains(err.Error(), `spawning a pipeline needs the daemon extension "process.spawn.pipeline"`) {
		t.Fatalf("old daemon: %v", err)
	}
}

func TestClientTimeout(t *testing.T) {
	t.Parallel()
	for name, c := range extClients(t) {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
			defer cancel()
			pidFile := filepath.Join(t.TempDir(), "bg")
			start := time.Now()
			p, err := c.Spawn(ctx, client.SpawnSpec{ID: "slow", Command: "sh", Timeout: 200 * time.Millisecond,
				Args: []string{"-c", "sleep 30 & echo $! > " + pidFile + "; wait"}}, nil)
			if err != nil {
				t.Fatal(err)
			}
			code, err := p.Wait(ctx)
			if err != nil || code != -1 || !p.TimedOut() {
				t.Fatalf("exit %d %v, timed out %v", code, err, p.TimedOut())
			}
			if took := time.Since(start); took < 200*time.Millisecond || took > 5*time.Second {
				t.Errorf("took %s", took)
			}
			b, _ := os.ReadFile(pidFile)
			bg, _ := strconv.Atoi(strings.TrimSpace(string(b)))
			deadline := time.Now().Add(3 * time.Second)
			for testutil.Alive(bg) {
				if time.Now().After(deadline) {
					t.Fatalf("background child %d survived the timeout", bg)
				}
				time.Sleep(10 * time.Millisecond)
			}
			// In time: no timeout.
			p, err = c.Spawn(ctx, client.SpawnSpec{ID: "quick", Command: "true", Timeout: 10 * time.Second}, nil)
			if err != nil {
				t.Fatal(err)
			}
			if code, err := p.Wait(ctx); code != 0 || err != nil || p.TimedOut() {
				t.Fatalf("quick: %d %v %v", code, err, p.TimedOut())
			}
		})
	}
}

func TestClientEnvUnset(t *testing.T) {
	t.Parallel()
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	keep := "kept"
	for name, c := range extClients(t) {
		var col collector
		p, err := c.Spawn(ctx, client.SpawnSpec{ID: "env", Command: "sh", Args: []string{"-c", `echo "${HOME-unset}|${USER-unset}|$KEEP"`},
			Env: map[string]*string{"HOME": nil, "USER": nil, "KEEP": &keep}}, col.frame)
		if err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		if code, err := p.Wait(ctx); code != 0 || err != nil {
			t.Fatalf("%s: %d %v", name, code, err)
		}
		if col.out() != "unset|unset|kept\n" {
			t.Errorf("%s daemon: %q", name, col.out())
		}
	}
}

func TestClientTTY(t *testing.T) {
	t.Parallel()
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	cs := extClients(t)
	var col collector
	p, err := cs["new"].Spawn(ctx, client.SpawnSpec{ID: "tty", Command: "sh", TTY: true, Size: wire.TermSize{Rows: 12, Cols: 34},
		Args: []string{"-c", "stty size; read x; stty size"}}, col.frame)
	if err != nil {
		t.Fatal(err)
	}
	waitFor(t, func() bool { return strings.Contains(col.out(), "12 34\r\n") })
	if err := p.Resize(ctx, 56, 78); err != nil {
		t.Fatal(err)
	}
	if _, err := p.Write(ctx, []byte("\n")); err != nil {
		t.Fatal(err)
	}
	if code, err := p.Wait(ctx); code != 0 || err != nil || !p.TTY() {
		t.Fatalf("%d %v", code, err)
	}
	if !strings.HasSuffix(col.out(), "56 78\r\n") {
		t.Fatalf("output %q", col.out())
	}
	if err := p.Resize(ctx, 1, 1); err == nil || !strings.Contains(err.Error(), "Process not running") {
		t.Fatalf("resize after exit: %v", err)
	}

	_, err = cs["old"].Spawn(ctx, client.SpawnSpec{ID: "tty", Command: "true", TTY: true}, nil)
	if err == nil || !strings.Contains(err.Error(), `a process with a terminal (tty) needs the daemon extension "process.spawn.tty"`) {
		t.Fatalf("old daemon: %v", err)
	}
	q, err := cs["old"].Spawn(ctx, client.SpawnSpec{ID: "plain", Command: "true"}, nil)
	if err != nil {
		t.Fatal(err)
	}
	if err := q.Resize(ctx, 1, 1); err == nil || !strings.Contains(err.Error(), `resizing a terminal needs the daemon extension "process.spawn.tty"`) {
		t.Fatalf("resize on an old daemon: %v", err)
	}
}

func waitFor(t *testing.T, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatal("timed out")
		}
		time.Sleep(time.Millisecond)
	}
}
