package main

import (
	"bytes"
	"net"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/chromedp"

	"github.com/seed5ad92d46/sous/internal/browsertest"
	"github.com/seed5ad92d46/sous/internal/testutil"
)

// uiRecipe runs a process that prints markup and keeps running, and a
// session whose model asks to run Bash `touch got-0` (newAskWorld).
const uiRecipe = `
build = spawn(["sh", "-c", "echo building; echo '<script>alert(1)</script>'; sleep 60"], id = "build")
s = sdk.session(cwd = args["dir"], cli = json.decode(args["cli"]), env = json.decode(args["env"]))
t = s.send("ask 0")
print("turn 0: denials %d: %s" % (len(t.denials), t.text))
build.kill()
build.wait()
`

// TestRunUIBrowserDeny is the whole way: `sous run --ui 127.0.0.1:0 --json`
// of a recipe whose real Claude Code session (scripted model) asks to run
// Bash; no rule decides, so the request waits for a person; a real Chromium
// opens the printed URL, sees the request, the session and a process's
// output (its <script> as text), and clicks
// Deny with a message. The turn's denials hold it, the command never ran,
// the --json approval event says "remote", and the page ends saying how
// the run ended.
func TestRunUIBrowserDeny(t *testing.T) {
	w := newAskWorld(t)
	r := w.startRecipe(uiRecipe, "--ui", "127.0.0.1:0", "--json")
	var m []string
	deadline := time.Now().Add(60 * time.Second)
	for m = uiLine.FindStringSubmatch(r.stderr.String()); m == nil; m = uiLine.FindStringSubmatch(r.stderr.String()) {
		select {
		case <-r.done:
			t.Fatalf("the run ended before it printed its page\nstdout:\n%s\nstderr:\n%s", r.stdout, r.stderr)
		default:
		}
		if time.Now().After(deadline) {
			t.Fatalf("no ui line\nstderr:\n%s", r.stderr)
		}
		time.Sleep(20 * time.Millisecond)
	}
	tab := browsertest.New(t, 150*time.Second)
	card := chromedp.CSS(`#approvals .approval`)
	deny := chromedp.CSS(`#approvals .approval button.deny`)
	if err := chromedp.Do(tab, chromedp.Navigate(m[1]), chromedp.WaitVisible(deny),
		chromedp.WaitVisible(chromedp.CSS(`#sessions .msg.tool-use`))); err != nil {
		t.Fatalf("the page: %v\nstderr:\n%s", err, r.stderr)
	}
	text, err := chromedp.Run(tab, chromedp.Text(card))
	if err != nil || !strings.Contains(text, "touch got-0") || !strings.Contains(text, "Bash") {
		t.Errorf("the request shows %q (%v)", text, err)
	}
	if _, err := chromedp.Run(tab, chromedp.Poll[bool](`document.querySelector("#processes pre.output").textContent === "building\n<script>alert(1)</script>\n"`,
		chromedp.WithPollingTimeout(10*time.Second))); err != nil {
		t.Errorf("the process's output: %v", err)
	}
	browsertest.Screenshot(t, tab)
	if err := chromedp.Do(tab, chromedp.SendKeys(chromedp.CSS(`#approvals .approval input.message`), "no touching"),
		chromedp.Click(deny)); err != nil {
		t.Fatal(err)
	}
	o := r.wait(t)
	o.expect(t, 0)
	var approval, pending map[string]any
	for _, e := range o.events(t) {
		switch e["event"] {
		case "approval":
			approval = e
		case "pending":
			pending = e
		}
	}
	if approval == nil || approval["decision"] != "deny" || approval["by"] != "remote" || approval["tool"] != "Bash" ||
		approval["message"] != "no touching" {
		t.Errorf("the approval event: %v", approval)
	}
	if pending == nil || approval == nil || pending["id"] != approval["id"] {
		t.Errorf("the pending event %v and the decision %v do not name the same request", pending, approval)
	}
	if !strings.Contains(o.stdout, `"text":"turn 0: denials 1: done 0"`) {
		t.Errorf("the turn's denials:\n%s", o.stdout)
	}
	if _, err := os.Stat(filepath.Join(w.dir, "got-0")); err == nil {
		t.Error("the denied command ran")
	}
	status, err := chromedp.Run(tab, chromedp.Poll[string](
		`(() => { const s = document.querySelector("#status").textContent; return s.includes("sous has exited") ? s : false })()`,
		chromedp.WithPollingTimeout(20*time.Second)))
	if err != nil || !strings.HasPrefix(status, "run ended: ok (exit code 0)") {
		t.Errorf("the page's status %q (%v)", status, err)
	}
}

// TestRunUIAddress: an address --ui cannot use is a usage error before
// the recipe runs (in the --json stream too, between its start and end).
func TestRunUIAddress(t *testing.T) {
	dir := testutil.WriteTree(t, map[string]string{"r.star": `print("ran")`})
	busy, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer busy.Close()
	for _, c := range []struct{ ui, err string }{
		{"8080", `sous: --ui "8080": want HOST:PORT or :PORT (e.g. 127.0.0.1:0): address 8080: missing port in address`},
		{busy.Addr().String(), "sous: --ui " + busy.Addr().String() + ": listen tcp " + busy.Addr().String() + ": bind: address already in use"},
	} {
		var stdout, stderr bytes.Buffer
		code := execute(newTestFactory(strings.NewReader(""), &stdout, &stderr, nil), []string{"run", filepath.Join(dir, "r.star"), "--ui", c.ui})
		if code != 2 || stderr.String() != c.err+"\n" || strings.Contains(stdout.String()+stderr.String(), "ran") {
			t.Errorf("--ui %s: exit %d, stdout %q, stderr %q", c.ui, code, stdout.String(), stderr.String())
		}
		stdout.Reset()
		stderr.Reset()
		code = execute(newTestFactory(strings.NewReader(""), &stdout, &stderr, nil), []string{"run", filepath.Join(dir, "r.star"), "--ui", c.ui, "--json"})
		if code != 2 || !strings.HasPrefix(stdout.String(), `{"event":"start"`) || !strings.Contains(stdout.String(), `"event":"end"`) {
			t.Errorf("--ui %s --json: exit %d, stdout %q", c.ui, code, stdout.String())
		}
	}
}
