package main

import (
	"bytes"
	"encoding/json"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/seed5ad92d46/sous/internal/claudecli"
	"github.com/seed5ad92d46/sous/runtime/agent/fakemodel"
)

// agentWorld is what a recipe with agent sessions needs in a test: the real
// CLI, a scripted model, an isolated home for the CLI and a work directory,
// and the runner environment that points the CLI at the model. The
// environment reaches the CLI the way a user's does: sous run's own
// environment, which the embedded daemon's processes inherit.
type agentWorld struct {
	t    *testing.T
	api  *fakemodel.Server
	cli  []string
	dir  string // the recipe's directory (args["dir"]), symlinks resolved
	env  []string
	mu   sync.Mutex
	seen map[string]time.Time // marks set by scripts (see mark)
}

func newAgentWorld(t *testing.T, version string, api fakemodel.Options) *agentWorld {
	t.Helper()
	cli := claudecli.Find(t, version)
	srv, err := fakemodel.Start(api)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { srv.Close() })
	dir, err := filepath.EvalSymlinks(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	w := &agentWorld{t: t, api: srv, cli: cli, dir: dir, seen: make(map[string]time.Time)}
	// Only what node and the CLI need: the developer's own variables (an
	// ANTHROPIC_API_KEY, CLAUDECODE when run inside Claude Code) must not
	// reach the CLI under test.
	w.env = []string{"PATH=" + os.Getenv("PATH"), "LANG=C.UTF-8", "TERM=dumb"}
	for k, v := range claudecli.Env(t.TempDir(), srv.URL()) {
		w.env = append(w.env, k+"="+v)
	}
	sort.Strings(w.env)
	return w
}

// cliArg is the CLI command for -a cli=: a JSON list, which recipes decode.
func (w *agentWorld) cliArg() string {
	b, _ := json.Marshal(w.cli)
	return string(b)
}

// sous runs the command line in process with the world's environment.
func (w *agentWorld) sous(args ...string) outcome {
	w.t.Helper()
	var stdout, stderr bytes.Buffer
	code := execute(newTestFactory(strings.NewReader(""), &stdout, &stderr, w.env), args)
	return outcome{code: code, stdout: stdout.String(), stderr: withoutRunLine(stderr.String())}
}

// run writes src as main.star in the world's directory and runs it with
// -a dir=DIR -a cli=CLI and extra flags.
func (w *agentWorld) run(src string, flags ...string) outcome {
	w.t.Helper()
	p := filepath.Join(w.dir, "main.star")
	if err := os.WriteFile(p, []byte(src), 0o644); err != nil {
		w.t.Fatal(err)
	}
	args := append([]string{"run", p, "-a", "dir=" + w.dir, "-a", "cli=" + w.cliArg()}, flags...)
	return w.sous(args...)
}

// mark records that something happened now (a script served a reply).
func (w *agentWorld) mark(name string) {
	w.mu.Lock()
	defer w.mu.Unlock()
	if _, ok := w.seen[name]; !ok {
		w.seen[name] = time.Now()
	}
}

func (w *agentWorld) marked(name string) (time.Time, bool) {
	w.mu.Lock()
	defer w.mu.Unlock()
	at, ok := w.seen[name]
	return at, ok
}

// readFile reads a file an agent should have written.
func (w *agentWorld) readFile(path string) string {
	w.t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		w.t.Errorf("the agent did not write %s: %v", path, err)
	}
	return string(b)
}

// toolResults finds the tool results the model got for a tool use id
// across every scripted request.
func (w *agentWorld) toolResult(toolUseID string) (fakemodel.ToolResult, bool) {
	for _, r := range w.api.Scripted() {
		for _, tr := range r.ToolResults() {
			if tr.ToolUseID == toolUseID {
				return tr, true
			}
		}
	}
	return fakemodel.ToolResult{}, false
}

// firstPrompt is the first user text of a request's conversation: which
// prompt (and so which session) the request belongs to.
func firstPrompt(r *fakemodel.Request) string {
	for _, m := range r.Parsed.Messages {
		if m.Role != "user" {
			continue
		}
		for _, b := range m.Blocks() {
			if b.Type == "text" && !strings.HasPrefix(strings.TrimSpace(b.Text), "<system-reminder>") {
				return b.Text
			}
		}
	}
	return ""
}

// toolTurn counts the tool results already in a request's conversation:
// 0 for the first request of a prompt, 1 after one tool ran, ...
func toolTurn(r *fakemodel.Request) int {
	n := 0
	for _, m := range r.Parsed.Messages {
		for _, b := range m.Blocks() {
			if b.Type == "tool_result" {
				n++
			}
		}
	}
	return n
}

// stderrLines returns the lines of stderr that contain sub.
func (o outcome) stderrLines(sub string) []string {
	var out []string
	for _, l := range strings.Split(o.stderr, "\n") {
		if strings.Contains(l, sub) {
			out = append(out, l)
		}
	}
	return out
}

// events parses --json stdout.
func (o outcome) events(t *testing.T) []map[string]any {
	t.Helper()
	var out []map[string]any
	for _, l := range o.stdoutLines() {
		if l == "" {
			continue
		}
		var m map[string]any
		if err := json.Unmarshal([]byte(l), &m); err != nil {
			t.Fatalf("stdout line is not JSON: %q: %v", l, err)
		}
		out = append(out, m)
	}
	return out
}

// shareGoCache gives the CLI's tools and the recipe the developer's Go
// build cache: the isolated home would start a cold one, and compiling the
// standard library's test dependencies there takes many seconds.
func (w *agentWorld) shareGoCache() {
	cache := os.Getenv("GOCACHE")
	if cache == "" {
		dir, err := os.UserCacheDir()
		if err != nil {
			return
		}
		cache = filepath.Join(dir, "go-build")
	}
	w.env = append(w.env, "GOCACHE="+cache)
}
