package client_test

import (
	"context"
	"errors"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/seed5ad92d46/sous/daemon"
	"github.com/seed5ad92d46/sous/daemon/client"
	"github.com/seed5ad92d46/sous/daemon/wire"
	"github.com/seed5ad92d46/sous/internal/daemontest"
	"github.com/seed5ad92d46/sous/internal/faultproxy"
)

// SpawnSpec.StdinClosed over a socket daemon with the extension, one
// without it (the client sends the close itself), and the embedded
// daemon: the child reads end-of-file at once, a later Write is refused
// as for a closed stdin, and CloseStdin succeeds. Through a relay that
// counts the requests, the daemon with the extension gets no
// process.stdin for it, the one without gets one per spawn.
func TestSpawnStdinClosed(t *testing.T) {
	t.Parallel()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	_, emb := embeddedDaemon(t)
	dial := func(cfg daemon.Config) (*client.Client, *faultproxy.Proxy) {
		r := faultproxy.Start(t, startDaemon(t, cfg), faultproxy.Options{CountMethods: true})
		c, err := client.DialUnix(ctx, r.Path(), testToken, client.Options{ReconnectTimeout: -1})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { c.Close() })
		return c, r
	}
	sock, sockCount := dial(daemon.Config{})
	old, oldCount := dial(daemon.Config{DisableFeatures: []string{wire.FeatureSpawnStdinClosed}})
	for _, tc := range []struct {
		name   string
		c      *client.Client
		count  *faultproxy.Proxy
		closes int // the process.stdin requests the spawns cost
	}{
		{"socket", sock, sockCount, 0},
		{"old socket", old, oldCount, 3},
		{"embedded", emb, nil, 0},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var col collector
			p, err := tc.c.Spawn(ctx, client.SpawnSpec{ID: "cat", Command: "cat", StdinClosed: true}, col.frame)
			if err != nil {
				t.Fatal(err)
			}
			if code, err := p.Wait(ctx); err != nil || code != 0 || col.out() != "" {
				t.Fatalf("cat: exit %d, %v, stdout %q", code, err, col.out())
			}

			var read collector
			p, err = tc.c.Spawn(ctx, client.SpawnSpec{ID: "read", Command: "sh", Args: []string{"-c", "read x || echo eof; exec sleep 30"}, StdinClosed: true}, read.frame)
			if err != nil {
				t.Fatal(err)
			}
			defer p.KillAndWait(context.Background(), "KILL", time.Second, true)
			for read.out() != "eof\n" {
				if ctx.Err() != nil {
					t.Fatalf("stdout %q, want eof", read.out())
				}
				time.Sleep(5 * time.Millisecond)
			}
			var we *wire.Error
			if _, err := p.Write(ctx, []byte("late\n")); !errors.As(err, &we) || we.Code != wire.CodeInvalidParams || we.Message != "Process stdin closed" {
				t.Errorf("Write after the spawn closed stdin: %v", err)
			}
			if err := p.CloseStdin(ctx); err != nil {
				t.Errorf("CloseStdin: %v", err)
			}

			// A pipeline's first stage reads end-of-file.
			var pl collector
			p, err = tc.c.Spawn(ctx, client.SpawnSpec{ID: "pl", Pipeline: [][]string{{"sh", "-c", "cat; echo first"}, {"tr", "a-z", "A-Z"}}, StdinClosed: true}, pl.frame)
			if err != nil {
				t.Fatal(err)
			}
			if code, err := p.Wait(ctx); err != nil || code != 0 || pl.out() != "FIRST\n" {
				t.Fatalf("pipeline: exit %d, %v, stdout %q", code, err, pl.out())
			}
			if tc.count != nil {
				// Two process.stdin are the test's own Write and CloseStdin.
				if n := tc.count.Requests("process.stdin") - 2; n != tc.closes {
					t.Errorf("%d process.stdin requests for 3 spawns with StdinClosed, want %d", n, tc.closes)
				}
				if n := tc.count.Requests("process.spawn"); n != 3 {
					t.Errorf("%d process.spawn requests, want 3", n)
				}
			}
		})
	}
}

// What StdinClosed cannot be combined with is refused before anything is
// sent.
func TestSpawnStdinClosedRefused(t *testing.T) {
	t.Parallel()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	_, c := embeddedDaemon(t)
	r, w, err := os.Pipe()
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	defer w.Close()
	for _, spec := range []client.SpawnSpec{
		{ID: "tty", Command: "cat", TTY: true, StdinClosed: true},
		{ID: "passed", Command: "cat", StdinClosed: true},
	} {
		if spec.ID == "passed" {
			spec.Mirror.Stdin = r
		}
		if _, err := c.Spawn(ctx, spec, nil); err == nil || !strings.Contains(err.Error(), "StdinClosed cannot be combined") {
			t.Errorf("%s: %v", spec.ID, err)
		}
	}
}

// A daemon that can close no stdin at all (claustrum: neither extension):
// Spawn with StdinClosed fails naming process.stdin.close, before it
// starts anything (a command run and then stopped for want of a close
// would have done its work for nothing).
func TestSpawnStdinClosedWithoutAnyClose(t *testing.T) {
	t.Parallel()
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	sock, srv := daemontest.ServeUnix(t, daemon.Config{Token: testToken, DisableFeatures: []string{wire.FeatureSpawnStdinClosed, wire.FeatureStdinClose}})
	c, err := client.DialUnix(ctx, sock, testToken, client.Options{ReconnectTimeout: -1})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	_, err = c.Spawn(ctx, client.SpawnSpec{ID: "cat", Command: "cat", StdinClosed: true}, nil)
	if err == nil || !strings.Contains(err.Error(), wire.FeatureStdinClose) {
		t.Fatalf("Spawn: %v", err)
	}
	if pr := srv.Registry().Get("cat"); pr != nil {
		t.Errorf("the process was started (running: %v): a daemon that cannot close its stdin should start nothing", pr.Running())
	}
}
