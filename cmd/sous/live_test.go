package main

import (
	"os"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"testing"

	"github.com/seed5ad92d46/sous/internal/claudecli"
	"github.com/seed5ad92d46/sous/internal/testutil"
	"github.com/seed5ad92d46/sous/runtime/agent/fakemodel"
)

// The live view tests run the sous binary on a real pseudo-terminal and
// read the screen through a terminal emulator: what a person sees, golden
// screens in testdata/ (durations, session ids and costs replaced by
// placeholders: see normalize).

// ptyEnv is the whole environment of sous on the test terminal.
func ptyEnv(extra ...string) []string {
	return append([]string{"PATH=" + os.Getenv("PATH"), "LANG=C.UTF-8", "TERM=xterm-256color", "HOME=" + os.Getenv("HOME")}, extra...)
}

// fanoutRecipe starts three processes one after the other (each once the
// one before said it started, so their lines come in one order) that
// each wait for a line on stdin; they get it once the test creates the
// file "go" in the recipe's directory.
const fanoutRecipe = `
def start(name):
    p = spawn(["sh", "-c", "echo %s started; read x; echo %s got $x" % (name, name)], id = name)
    for _ in range(1000):
        if "started" in p.output():
            break
        sleep(0.01)
    return p

ps = [start(n) for n in ["build", "test", "lint"]]
for _ in range(3000):
    if files.stat(args["dir"] + "/go").exists:
        break
    sleep(0.02)
for p in ps:
    p.write("go\n")
    p.close_stdin()
    p.wait()
print("all done")
`

// areaHeader finds the status area's first line on a screen.
func hasArea(screen string) bool {
	for _, l := range strings.Split(screen, "\n") {
		if strings.HasPrefix(l, "─ main.star") {
			return true
		}
	}
	return false
}

// TestLiveFanoutScreens: three processes run; under their lines the
// status area shows one line each (id, elapsed, last line) under a header
// (recipe, elapsed, how many run). When they end, the area is gone and
// the summary lists each with its status, duration and exit code.
func TestLiveFanoutScreens(t *testing.T) {
	t.Parallel()
	dir := testutil.WriteTree(t, map[string]string{"main.star": fanoutRecipe})
	p := startPTY(t, 100, 30, ptyEnv(), "run", filepath.Join(dir, "main.star"), "-a", "dir="+dir)
	running := p.waitScreen("the area with three processes", func(s string) bool {
		return hasArea(s) && strings.Contains(s, "3 running") && strings.Contains(s, "[lint]") && strings.Count(s, "started") == 6
	})
	golden(t, "live_fanout_running", normalize(running))

	if err := os.WriteFile(filepath.Join(dir, "go"), nil, 0o644); err != nil {
		t.Fatal(err)
	}
	if code := p.wait(); code != 0 {
		t.Fatalf("exit code %d\n%s", code, p.screen())
	}
	final := p.screen()
	if hasArea(final) {
		t.Errorf("the status area is still on the screen after the run:\n%s", final)
	}
	golden(t, "live_fanout_done", normalize(final))
}

// TestLiveAreaGoneAfterInterrupt: Ctrl-C typed on the terminal (a real
// SIGINT from the terminal's line discipline to sous's process group)
// stops the run with 130; the area is erased, the summary says what was
// interrupted, and the terminal is left as it was: cursor shown, no
// colour left on.
func TestLiveAreaGoneAfterInterrupt(t *testing.T) {
	t.Parallel()
	dir := testutil.WriteTree(t, map[string]string{"main.star": fanoutRecipe})
	p := startPTY(t, 100, 30, ptyEnv(), "run", filepath.Join(dir, "main.star"), "-a", "dir="+dir)
	p.waitScreen("the area", func(s string) bool { return hasArea(s) && strings.Contains(s, "3 running") })
	p.send("\x03")
	if code := p.wait(); code != 128+int(syscall.SIGINT) {
		t.Fatalf("exit code %d, want 130\n%s", code, p.screen())
	}
	final := p.screen()
	if hasArea(final) {
		t.Errorf("the status area is still on the screen after Ctrl-C:\n%s", final)
	}
	for _, want := range []string{"sous: interrupted", "─ interrupted after", "[build]  stopped", "─ interrupted at "} {
		if !strings.Contains(final, want) {
			t.Errorf("the screen lacks %q:\n%s", want, final)
		}
	}
	p.assertTerminalRestored()
}

// assertTerminalRestored checks that what sous leaves behind is an
// ordinary terminal: the cursor visible, at the start of a line, and
// text written next in the default colours.
func (p *ptyRun) assertTerminalRestored() {
	p.t.Helper()
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.emu.CursorHidden() {
		p.t.Error("the cursor is hidden")
	}
	pos := p.emu.CursorPosition()
	if pos.X != 0 {
		p.t.Errorf("the cursor is at column %d, want the start of a line", pos.X)
	}
	p.emu.Write([]byte("X"))
	if c := p.emu.CellAt(pos.X, pos.Y); c == nil || c.Content != "X" || !c.Style.IsZero() {
		p.t.Errorf("text after sous is drawn as %+v, want the default style", c)
	}
}

// TestLiveApprovalScreens drives a real Claude Code CLI (a scripted
// model) on the terminal. Its first Bash request waits in the session's
// policy until the test creates a file: the area shows the session, the
// tool it wants and the request waiting. Its second request is left to
// the person: the area hides while the prompt asks, and comes back after
// the answer. The summary at the end has the session with its turns and
// cost.
func TestLiveApprovalScreens(t *testing.T) {
	t.Parallel()
	var w *agentWorld
	w = newAgentWorld(t, claudecli.Latest, fakemodel.Options{Func: func(req *fakemodel.Request, n int) fakemodel.Reply {
		if results := req.ToolResults(); len(results) > 0 {
			return fakemodel.Text("did " + strings.TrimPrefix(results[0].ToolUseID, "toolu_"))
		}
		which := "first"
		if strings.Contains(req.UserText(), "second") {
			which = "second"
		}
		return fakemodel.Reply{Blocks: []fakemodel.Block{{Type: "tool_use", ID: "toolu_" + which, Name: "Write",
			Input: map[string]any{"file_path": filepath.Join(w.dir, which+".txt"), "content": which + "\n"}}}}
	}})
	recipe := filepath.Join(w.dir, "main.star")
	if err := os.WriteFile(recipe, []byte(`
def policy(req):
    if not req.input["file_path"].endswith("/first.txt"):
        return None  # the person at the terminal decides
    for _ in range(3000):
        if files.stat(args["dir"] + "/decide").exists:
            break
        sleep(0.02)
    return approve()

s = sdk.session(cwd = args["dir"], cli = json.decode(args["cli"]), policy = policy)
print("turn 1:", s.send("run the first command").text)
print("turn 2:", s.send("run the second command").text)
`), 0o644); err != nil {
		t.Fatal(err)
	}
	env := append(slices.Clone(w.env), "TERM=xterm-256color")
	p := startPTY(t, 200, 30, env, "run", recipe, "-a", "dir="+w.dir, "-a", "cli="+w.cliArg())
	waiting := p.waitScreen("a request waiting in the area", func(s string) bool {
		return hasArea(s) && strings.Contains(s, "waiting: Write") && strings.Contains(s, "Write: ")
	})
	norm := func(s string) string { return normalize(strings.ReplaceAll(s, w.dir, "$DIR")) }
	golden(t, "live_approval_waiting", norm(waiting))

	if err := os.WriteFile(filepath.Join(w.dir, "decide"), nil, 0o644); err != nil {
		t.Fatal(err)
	}
	prompt := p.waitScreen("the prompt", func(s string) bool { return strings.HasSuffix(s, "for this run:") })
	if hasArea(prompt) {
		t.Errorf("the status area shows while the prompt asks:\n%s", prompt)
	}
	golden(t, "live_approval_prompt", norm(prompt))

	p.send("y\r")
	if code := p.wait(); code != 0 {
		t.Fatalf("exit code %d\n%s", code, p.screen())
	}
	final := p.screen()
	if hasArea(final) {
		t.Errorf("the status area is still on the screen:\n%s", final)
	}
	golden(t, "live_approval_done", norm(final))
	p.assertTerminalRestored()
}

// TestLiveResize: when the terminal narrows, sous hears SIGWINCH and lays
// the area out again at the new width at once: each line cut to fit,
// none wrapped.
func TestLiveResize(t *testing.T) {
	t.Parallel()
	dir := testutil.WriteTree(t, map[string]string{"main.star": strings.Replace(fanoutRecipe, `"echo %s started;`, `"echo %s started with a line long enough to be cut;`, 1)})
	p := startPTY(t, 100, 30, ptyEnv(), "run", filepath.Join(dir, "main.star"), "-a", "dir="+dir)
	p.waitScreen("the area", func(s string) bool { return hasArea(s) && strings.Contains(s, "3 running") })
	p.resize(40, 30)
	narrow := p.waitScreen("the area cut to 40 columns", func(s string) bool {
		return strings.Contains(s, "[lint]") && strings.Contains(s, "…")
	})
	area := false
	for _, l := range strings.Split(narrow, "\n") {
		area = area || strings.HasPrefix(l, "─ main.star")
		if area && len([]rune(l)) >= 40 {
			t.Errorf("an area line of %d columns on a 40-column terminal: %q", len([]rune(l)), l)
		}
	}
	if err := os.WriteFile(filepath.Join(dir, "go"), nil, 0o644); err != nil {
		t.Fatal(err)
	}
	if code := p.wait(); code != 0 {
		t.Fatalf("exit code %d\n%s", code, p.screen())
	}
	if hasArea(p.screen()) {
		t.Errorf("the area is left on the screen:\n%s", p.screen())
	}
}
