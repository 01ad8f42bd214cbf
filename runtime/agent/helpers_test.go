package agent

import (
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/coder/websocket"

	"github.com/seed5ad92d46/sous/daemon"
	"github.com/seed5ad92d46/sous/daemon/client"
	"github.com/seed5ad92d46/sous/internal/claudecli"
	"github.com/seed5ad92d46/sous/internal/daemontest"
	"github.com/seed5ad92d46/sous/runtime/agent/fakemodel"
)

// daemonEnv is the environment the test daemon gives its children: just
// enough to run node and the CLI, so the developer's own variables (an
// ANTHROPIC_API_KEY, CLAUDECODE when run inside Claude Code) never reach the
// CLI under test.
func daemonEnv() []string {
	return []string{"PATH=" + os.Getenv("PATH"), "LANG=C.UTF-8", "TERM=dumb"}
}

// embedded starts an in-process daemon and its client.
func embedded(t *testing.T) *client.Client {
	t.Helper()
	_, c := daemontest.Embedded(t, daemon.Config{Env: daemonEnv(), ShutdownGrace: time.Second, StateDir: t.TempDir()})
	return c
}

// cliCase is one CLI version over one transport.
type cliCase struct {
	name      string
	version   string
	transport string
}

var cliCases = []cliCase{
	{"2.1.81/stdio", claudecli.WebSocket, TransportStdio},
	{"2.1.81/websocket", claudecli.WebSocket, TransportWebSocket},
	{"latest/stdio", claudecli.Latest, TransportStdio},
}

// world is what one real-CLI session under test needs: a scripted model,
// an isolated home and a work dir.
type world struct {
	t    *testing.T
	api  *fakemodel.Server
	work string
	home string
	cli  []string
}

func newWorld(t *testing.T, version string, api fakemodel.Options) *world {
	t.Helper()
	cli := claudecli.Find(t, version)
	srv, err := fakemodel.Start(api)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { srv.Close() })
	w := &world{t: t, api: srv, work: t.TempDir(), home: t.TempDir(), cli: cli}
	// Symlinked temp dirs would make the CLI's paths differ from ours.
	w.work, _ = filepath.EvalSymlinks(w.work)
	return w
}

// options fills in what every test session needs.
func (w *world) options(transport string, opt Options) Options {
	if opt.CLI == nil {
		opt.CLI = w.cli
	}
	opt.Transport = transport
	if opt.Cwd == "" {
		opt.Cwd = w.work
	}
	env := claudecli.Env(w.home, w.api.URL())
	for k, v := range opt.Env {
		env[k] = v
	}
	opt.Env = env
	if opt.StartTimeout == 0 {
		opt.StartTimeout = 45 * time.Second
	}
	return opt
}

func (w *world) start(c *client.Client, transport string, opt Options) *Session {
	w.t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	s, err := Start(ctx, c, w.options(transport, opt))
	if err != nil {
		w.t.Fatalf("start: %v", err)
	}
	w.t.Cleanup(func() {
		if err := s.Close(); err != nil {
			w.t.Errorf("close: %v", err)
		}
	})
	return s
}

// send runs one turn with a generous deadline (the CLI is slow to start on
// a busy two-core machine).
func send(t *testing.T, s *Session, prompt string) *Turn {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
	defer cancel()
	turn, err := s.Send(ctx, prompt)
	if err != nil {
		t.Fatalf("send %q: %v", prompt, err)
	}
	return turn
}

// recorder is a permission callback that answers with decide and keeps
// every request.
type recorder struct {
	mu     sync.Mutex
	reqs   []Request
	decide func(Request) (Decision, error)
}

func (r *recorder) callback(ctx context.Context, req Request) (Decision, error) {
	r.mu.Lock()
	r.reqs = append(r.reqs, req)
	r.mu.Unlock()
	return r.decide(req)
}

func (r *recorder) requests() []Request {
	r.mu.Lock()
	defer r.mu.Unlock()
	return append([]Request(nil), r.reqs...)
}

func readFile(t *testing.T, path string) string {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatalf("the agent did not write %s: %v", path, err)
	}
	return string(b)
}

// lastType is the type of the last message of a turn (the result).
func lastType(t *Turn) string {
	if len(t.Messages) == 0 {
		return ""
	}
	var m struct {
		Type string `json:"type"`
	}
	json.Unmarshal(t.Messages[len(t.Messages)-1], &m)
	return m.Type
}

// hasMessage reports whether a turn holds a message of that type (and
// subtype, when given).
func hasMessage(t *Turn, typ, subtype string) bool {
	for _, raw := range t.Messages {
		var m struct {
			Type    string `json:"type"`
			Subtype string `json:"subtype"`
		}
		json.Unmarshal(raw, &m)
		if m.Type == typ && (subtype == "" || m.Subtype == subtype) {
			return true
		}
	}
	return false
}

// waitFor polls cond until it holds or the deadline passes.
func waitFor(t *testing.T, what string, d time.Duration, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(d)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out after %s waiting for %s", d, what)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

func contains(s, sub string) bool { return strings.Contains(s, sub) }

// dropConnection cuts the WebSocket transport's current connection, to
// exercise the CLI's reconnect.
func (t *wsTransport) dropConnection() bool {
	t.mu.Lock()
	wc := t.cur
	t.mu.Unlock()
	if wc == nil {
		return false
	}
	wc.c.Close(websocket.StatusGoingAway, "sous test: dropping the connection")
	t.drop(wc)
	return true
}
