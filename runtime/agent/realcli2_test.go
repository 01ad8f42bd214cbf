package agent

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/seed5ad92d46/sous/daemon"
	"github.com/seed5ad92d46/sous/daemon/client"
	"github.com/seed5ad92d46/sous/internal/claudecli"
	"github.com/seed5ad92d46/sous/internal/testutil"
	"github.com/seed5ad92d46/sous/runtime/agent/fakemodel"
)

// TestConcurrentSessions runs two sessions at once on one daemon, each
// writing two files from one model reply (two tool uses, so two permission
// requests in one turn).
func TestConcurrentSessions(t *testing.T) {
	t.Parallel()
	c := embedded(t)
	type run struct {
		w   *world
		s   *Session
		rec *recorder
	}
	var runs [2]*run
	for i := range runs {
		r := &run{}
		r.w = newWorld(t, claudecli.Latest, fakemodel.Options{Func: func(req *fakemodel.Request, n int) fakemodel.Reply {
			if n == 0 {
				return fakemodel.Blocks(
					fakemodel.ToolUseBlock("Write", map[string]any{"file_path": filepath.Join(r.w.work, "a.txt"), "content": fmt.Sprintf("a%d", i)}),
					fakemodel.ToolUseBlock("Write", map[string]any{"file_path": filepath.Join(r.w.work, "b.txt"), "content": fmt.Sprintf("b%d", i)}),
				)
			}
			return fakemodel.Text(fmt.Sprintf("session %d done", i))
		}})
		r.rec = &recorder{decide: func(Request) (Decision, error) { return Allow(nil), nil }}
		r.s = r.w.start(c, TransportStdio, Options{Permission: r.rec.callback})
		runs[i] = r
	}
	if runs[0].s.ID() == runs[1].s.ID() {
		t.Fatal("two sessions share an id")
	}
	var wg sync.WaitGroup
	turns := make([]*Turn, 2)
	errs := make([]error, 2)
	for i, r := range runs {
		wg.Add(1)
		go func() {
			defer wg.Done()
			ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
			defer cancel()
			turns[i], errs[i] = r.s.Send(ctx, "write a and b")
		}()
	}
	wg.Wait()
	for i, r := range runs {
		if errs[i] != nil {
			t.Fatalf("session %d: %v", i, errs[i])
		}
		if want := fmt.Sprintf("session %d done", i); turns[i].Text != want {
			t.Errorf("session %d text %q", i, turns[i].Text)
		}
		if turns[i].SessionID != r.s.ID() {
			t.Errorf("session %d: turn says %s, session %s", i, turns[i].SessionID, r.s.ID())
		}
		for _, f := range []string{"a", "b"} {
			if got := readFile(t, filepath.Join(r.w.work, f+".txt")); got != fmt.Sprintf("%s%d", f, i) {
				t.Errorf("session %d %s.txt = %q", i, f, got)
			}
		}
		if n := len(r.rec.requests()); n != 2 {
			t.Errorf("session %d: %d permission requests, want 2", i, n)
		}
	}
}

// TestResumeAndFork continues a finished session by id in a new CLI, then
// forks it: the resumed CLI keeps the id and the history, the fork gets a
// new id and the same history.
func TestResumeAndFork(t *testing.T) {
	t.Parallel()
	w := newWorld(t, claudecli.Latest, fakemodel.Options{Script: []fakemodel.Reply{
		fakemodel.Text("remembered: blue"),
		fakemodel.Text("it was blue"),
		fakemodel.Text("forked: blue"),
	}})
	c := embedded(t)
	s1 := w.start(c, TransportStdio, Options{})
	id := s1.ID()
	send(t, s1, "the colour is blue")
	if err := s1.Close(); err != nil {
		t.Fatal(err)
	}

	s2 := w.start(c, TransportStdio, Options{Resume: id})
	if s2.ID() != id {
		t.Errorf("resumed session id %q, want %q", s2.ID(), id)
	}
	t2 := send(t, s2, "what was the colour?")
	if t2.SessionID != id || t2.Text != "it was blue" {
		t.Errorf("resumed turn: session %q text %q", t2.SessionID, t2.Text)
	}
	if req := w.api.Scripted()[1]; !strings.Contains(string(req.Body), "the colour is blue") {
		t.Error("the resumed session's request lacks the first session's prompt")
	}
	s2.Close()

	s3 := w.start(c, TransportStdio, Options{Resume: id, Fork: true})
	t3 := send(t, s3, "fork it")
	if t3.SessionID == "" || t3.SessionID == id || s3.ID() != t3.SessionID {
		t.Errorf("fork: turn session %q, session %q, original %q", t3.SessionID, s3.ID(), id)
	}
	if req := w.api.Scripted()[2]; !strings.Contains(string(req.Body), "the colour is blue") {
		t.Error("the fork's request lacks the original history")
	}
}

// TestSessionSettings covers the options and control requests that shape
// what the model is sent: system prompts (through initialize), the model
// (flag, then set_model), allowed tools (no permission request), the
// permission mode (set_permission_mode to acceptEdits: writes stop asking)
// and max turns.
func TestSessionSettings(t *testing.T) {
	for _, tc := range []cliCase{cliCases[0], cliCases[2]} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			var w *world
			w = newWorld(t, tc.version, fakemodel.Options{Func: func(req *fakemodel.Request, n int) fakemodel.Reply {
				// With max turns 1 every turn is one model request.
				switch n {
				case 0:
					return fakemodel.ToolUse("Write", map[string]any{"file_path": filepath.Join(w.work, "one.txt"), "content": "1"})
				case 1:
					return fakemodel.ToolUse("Write", map[string]any{"file_path": filepath.Join(w.work, "two.txt"), "content": "2"})
				case 2:
					return fakemodel.ToolUse("Read", map[string]any{"file_path": filepath.Join(w.work, "one.txt")})
				}
				return fakemodel.Text("unexpected request")
			}})
			rec := &recorder{decide: func(Request) (Decision, error) { return Allow(nil), nil }}
			s := w.start(embedded(t), tc.transport, Options{
				Model:              "claude-first-model",
				SystemPrompt:       "SOUS-SYSTEM-PROMPT",
				AppendSystemPrompt: "SOUS-APPENDED",
				AllowedTools:       []string{"Read", "Bash(git status:*)"},
				MaxTurns:           1,
				Permission:         rec.callback,
			})
			ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
			defer cancel()

			// Max turns 1: the Write is approved and runs, then the turn
			// stops before the model sees the result.
			t1 := send(t, s, "one")
			if got := readFile(t, filepath.Join(w.work, "one.txt")); got != "1" {
				t.Errorf("one.txt = %q", got)
			}
			if t1.Subtype != "error_max_turns" {
				t.Errorf("turn 1 subtype %q, want error_max_turns", t1.Subtype)
			}
			req := w.api.Scripted()[0]
			if req.Parsed.Model != "claude-first-model" {
				t.Errorf("model %q", req.Parsed.Model)
			}
			if sys := req.SystemText(); !strings.Contains(sys, "SOUS-SYSTEM-PROMPT") || !strings.Contains(sys, "SOUS-APPENDED") {
				t.Errorf("system prompt lacks the session's prompts: %.300q", sys)
			}

			if err := s.SetModel(ctx, "claude-second-model"); err != nil {
				t.Fatal(err)
			}
			if err := s.SetPermissionMode(ctx, "acceptEdits"); err != nil {
				t.Fatal(err)
			}
			send(t, s, "two")
			if got := readFile(t, filepath.Join(w.work, "two.txt")); got != "2" {
				t.Errorf("two.txt = %q", got)
			}
			if m := w.api.Scripted()[1].Parsed.Model; m != "claude-second-model" {
				t.Errorf("after set_model the model is %q", m)
			}
			// Read is allowed by flag: no request for it.
			if t3 := send(t, s, "three"); len(t3.Denials) != 0 {
				t.Errorf("the allowed Read was denied: %+v", t3.Denials)
			}
			var tools []string
			for _, r := range rec.requests() {
				tools = append(tools, r.Tool)
			}
			if strings.Join(tools, ",") != "Write" {
				t.Errorf("permission requests for %v, want only the first Write (acceptEdits and the allowed Read ask nothing)", tools)
			}
			// 2.1.81 takes any mode name; later versions refuse unknown ones.
			if err := s.SetPermissionMode(ctx, "no-such-mode"); err == nil && tc.version != claudecli.WebSocket {
				t.Error("an unknown permission mode was accepted")
			}
		})
	}
}

// TestUnixSocketConnectionCut runs a session on a daemon reached through a
// Unix socket proxy that drops the connection once, mid-turn, while the
// permission callback runs. The client reconnects, the stdin write with the
// answer is applied exactly once, stdout is replayed from the last seq, and
// the turn completes.
func TestUnixSocketConnectionCut(t *testing.T) {
	t.Parallel()
	dir := testutil.ShortTempDir(t)
	srv, err := daemon.New(daemon.Config{Token: "tok", Env: daemonEnv(), ShutdownGrace: time.Second, StateDir: filepath.Join(dir, "state")})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { srv.Close() })
	ln, err := daemon.ListenUnix(filepath.Join(dir, "d.sock"))
	if err != nil {
		t.Fatal(err)
	}
	go srv.Serve(ln)
	proxy := newCutProxy(t, filepath.Join(dir, "p.sock"), filepath.Join(dir, "d.sock"))

	ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
	defer cancel()
	c, err := client.DialUnix(ctx, proxy.path, "tok", client.Options{ReconnectTimeout: 30 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })

	var w *world
	w = newWorld(t, claudecli.Latest, fakemodel.Options{Func: func(req *fakemodel.Request, n int) fakemodel.Reply {
		if n == 0 {
			return fakemodel.ToolUse("Write", map[string]any{"file_path": filepath.Join(w.work, "cut.txt"), "content": "survived\n"})
		}
		return fakemodel.Reply{Blocks: []fakemodel.Block{fakemodel.TextBlock("après la coupure: ✓ done")}, ChunkText: 3}
	}})
	s := w.start(c, TransportStdio, Options{Permission: func(ctx context.Context, r Request) (Decision, error) {
		if n := proxy.cutAll(); n == 0 {
			return Decision{}, errors.New("no connection to cut")
		}
		return Allow(nil), nil
	}})
	turn := send(t, s, "write through a flaky link")
	if got := readFile(t, filepath.Join(w.work, "cut.txt")); got != "survived\n" {
		t.Errorf("cut.txt = %q", got)
	}
	if turn.Text != "après la coupure: ✓ done" {
		t.Errorf("text %q", turn.Text)
	}
	if proxy.cuts.Load() != 1 || proxy.conns.Load() < 2 {
		t.Errorf("%d cuts over %d connections: the test did not exercise a reconnect", proxy.cuts.Load(), proxy.conns.Load())
	}
}

// cutProxy relays Unix socket connections and cuts them on demand.
type cutProxy struct {
	path  string
	mu    sync.Mutex
	live  map[net.Conn]net.Conn
	cuts  atomic.Int64
	conns atomic.Int64
}

func newCutProxy(t *testing.T, path, target string) *cutProxy {
	p := &cutProxy{path: path, live: map[net.Conn]net.Conn{}}
	ln, err := net.Listen("unix", path)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { ln.Close() })
	go func() {
		for {
			a, err := ln.Accept()
			if err != nil {
				return
			}
			b, err := net.Dial("unix", target)
			if err != nil {
				a.Close()
				continue
			}
			p.conns.Add(1)
			p.mu.Lock()
			p.live[a] = b
			p.mu.Unlock()
			go relay(a, b)
			go relay(b, a)
		}
	}()
	return p
}

func relay(dst, src net.Conn) {
	buf := make([]byte, 32<<10)
	for {
		n, err := src.Read(buf)
		if n > 0 {
			if _, werr := dst.Write(buf[:n]); werr != nil {
				break
			}
		}
		if err != nil {
			break
		}
	}
	dst.Close()
	src.Close()
}

// cutAll closes every live connection and returns how many it cut.
func (p *cutProxy) cutAll() int {
	p.mu.Lock()
	defer p.mu.Unlock()
	n := 0
	for a, b := range p.live {
		a.Close()
		b.Close()
		delete(p.live, a)
		n++
	}
	if n > 0 {
		p.cuts.Add(1)
	}
	return n
}

// TestWebSocketReconnect cuts the CLI's WebSocket while a permission request
// is being decided. The answer is held until the CLI reconnects, then sent
// with everything else it may have missed, and the turn completes.
func TestWebSocketReconnect(t *testing.T) {
	t.Parallel()
	var w *world
	w = newWorld(t, claudecli.WebSocket, fakemodel.Options{Func: func(req *fakemodel.Request, n int) fakemodel.Reply {
		if n == 0 {
			return fakemodel.ToolUse("Write", map[string]any{"file_path": filepath.Join(w.work, "ws.txt"), "content": "over a new socket\n"})
		}
		return fakemodel.Text("reconnected fine")
	}})
	var s *Session
	var dropped atomic.Bool
	s = w.start(embedded(t), TransportWebSocket, Options{Permission: func(ctx context.Context, r Request) (Decision, error) {
		dropped.Store(s.tr.(*wsTransport).dropConnection())
		return Allow(nil), nil
	}})
	ws := s.tr.(*wsTransport)
	turn := send(t, s, "write over websocket")
	if !dropped.Load() {
		t.Fatal("there was no connection to drop")
	}
	if got := readFile(t, filepath.Join(w.work, "ws.txt")); got != "over a new socket\n" {
		t.Errorf("ws.txt = %q", got)
	}
	if turn.Text != "reconnected fine" {
		t.Errorf("text %q", turn.Text)
	}
	ws.mu.Lock()
	conns, left := ws.conns, len(ws.unsettled)
	ws.mu.Unlock()
	if conns < 2 {
		t.Errorf("%d connections: the CLI did not reconnect", conns)
	}
	if left != 0 {
		t.Errorf("%d messages still unsettled after the turn", left)
	}
}

// TestWebSocketAuth: the endpoint refuses upgrades without the session's
// token with 401, before upgrading.
func TestWebSocketAuth(t *testing.T) {
	t.Parallel()
	w := newWorld(t, claudecli.WebSocket, fakemodel.Options{})
	s := w.start(embedded(t), TransportWebSocket, Options{})
	ws := s.tr.(*wsTransport)
	httpURL := "http" + strings.TrimPrefix(ws.url, "ws")
	for _, auth := range []string{"", "Bearer wrong", "Bearer " + ws.token + "x", ws.token} {
		req, _ := http.NewRequest("GET", httpURL, nil)
		req.Header.Set("Connection", "Upgrade")
		req.Header.Set("Upgrade", "websocket")
		req.Header.Set("Sec-WebSocket-Version", "13")
		req.Header.Set("Sec-WebSocket-Key", "dGhlIHNhbXBsZSBub25jZQ==")
		if auth != "" {
			req.Header.Set("Authorization", auth)
		}
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if resp.StatusCode != http.StatusUnauthorized {
			t.Errorf("Authorization %q: status %d, want 401", auth, resp.StatusCode)
		}
	}
	ws.mu.Lock()
	conns := ws.conns
	ws.mu.Unlock()
	if conns != 1 {
		t.Errorf("%d connections accepted, want only the CLI's", conns)
	}
}

// TestWebSocketRefusedByCurrentCLI: a CLI that refuses local --sdk-url hosts
// fails the session with an error that says so and names transport="stdio".
func TestWebSocketRefusedByCurrentCLI(t *testing.T) {
	t.Parallel()
	w := newWorld(t, claudecli.Latest, fakemodel.Options{})
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	_, err := Start(ctx, embedded(t), w.options(TransportWebSocket, Options{}))
	if !errors.Is(err, ErrSDKURLRejected) || !strings.Contains(err.Error(), `transport="stdio"`) {
		t.Fatalf("start: %v", err)
	}
	t.Logf("error: %v", err)
}

// TestWebSocketNeedsLocalDaemon: a remote daemon's CLI could not reach the
// loopback endpoint, so the session is refused before anything starts.
func TestWebSocketNeedsLocalDaemon(t *testing.T) {
	t.Parallel()
	dir := testutil.ShortTempDir(t)
	srv, err := daemon.New(daemon.Config{Token: "tok", Env: daemonEnv()})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { srv.Close() })
	ln, err := daemon.ListenUnix(filepath.Join(dir, "d.sock"))
	if err != nil {
		t.Fatal(err)
	}
	go srv.Serve(ln)
	ctx := context.Background()
	c, err := client.DialUnix(ctx, filepath.Join(dir, "d.sock"), "tok", client.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	_, err = Start(ctx, c, Options{Transport: TransportWebSocket, CLI: []string{"/nonexistent/claude"}})
	if err == nil || !strings.Contains(err.Error(), `use transport="stdio"`) || !strings.Contains(err.Error(), "remote") {
		t.Fatalf("start: %v", err)
	}
}
