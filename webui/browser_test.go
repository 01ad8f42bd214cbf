package webui_test

import (
	"context"
	"encoding/json"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/chromedp"

	"github.com/seed5ad92d46/sous/daemon/approvals"
	"github.com/seed5ad92d46/sous/daemon/wire"
	"github.com/seed5ad92d46/sous/internal/browsertest"
	"github.com/seed5ad92d46/sous/runtime/event"
	"github.com/seed5ad92d46/sous/webui"
)

// TestBrowserDeny: a real Chromium opens a run's page; it shows a
// process's output (a <script> it printed as text, never run), an agent's
// messages and a pending request; a click on Deny, with a message, decides
// the request as "remote", and the request leaves the page once the run
// says so.
func TestBrowserDeny(t *testing.T) {
	ctx := browsertest.New(t, 90*time.Second)
	q := approvals.New(nil, 0)
	p := startRunPage(t, webui.QueueAnswer(q))
	p.bus.Publish(&event.Spawn{ID: "build", Command: []string{"sh", "-c", "make"}, Host: "embedded", Pid: 4242})
	p.bus.Publish(&event.Output{ID: "build", Stream: wire.Stdout, Data: []byte("compiling\n<script>alert(1)</script>\n<img src=x onerror=alert(2)>\n")})
	p.bus.Publish(&event.Output{ID: "build", Stream: wire.Stderr, Data: []byte("warning: <b>not bold</b>\n")})
	agent := func(dir, msg string) {
		p.bus.Publish(&event.Agent{Session: "sess-1", Dir: dir, Message: json.RawMessage(msg)})
	}
	agent("in", `{"type":"system","subtype":"init","model":"claude-test","session_id":"sess-1"}`)
	agent("out", `{"type":"user","message":{"role":"user","content":"make the tests pass"}}`)
	agent("in", `{"type":"assistant","message":{"content":[{"type":"text","text":"I will run <i>the</i> tests."},{"type":"tool_use","id":"tu1","name":"Bash","input":{"command":"rm -rf /"}}]}}`)
	q.Publish(wire.Ask{ID: "ask-7", Run: "r", Kind: "tool", Session: "sess-1", Tool: "Bash", Summary: "rm -rf /"})
	p.bus.Publish(&event.Pending{Approval: event.Approval{ID: "ask-7", Kind: "tool", Session: "sess-1", Tool: "Bash",
		ToolUseID: "tu1", Summary: "rm -rf /", Description: "Clean up <everything>", Input: map[string]any{"command": "rm -rf /"}}})

	deny := chromedp.CSS(`.approval[data-id="ask-7"] button.deny`)
	if err := chromedp.Do(ctx, chromedp.Navigate(p.base+"/#token="+p.token), chromedp.WaitVisible(deny)); err != nil {
		t.Fatal(err)
	}
	text := func(sel string) string {
		t.Helper()
		s, err := chromedp.Run(ctx, chromedp.Text(chromedp.CSS(sel)))
		if err != nil {
			t.Fatalf("%s: %v", sel, err)
		}
		return s
	}
	output, messages, card := text(`#processes pre.output`), text(`#sessions .msgs`), text(`.approval[data-id="ask-7"]`)
	scripts, err := chromedp.Run(ctx, chromedp.Evaluate[int](`document.querySelectorAll("script, img, b, i").length`))
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"<script>alert(1)</script>", "<img src=x onerror=alert(2)>", "warning: <b>not bold</b>"} {
		if !strings.Contains(output, want) {
			t.Errorf("the output shows %q, want %q in it", output, want)
		}
	}
	if !strings.Contains(messages, "I will run <i>the</i> tests.") || !strings.Contains(messages, "make the tests pass") {
		t.Errorf("the session shows %q", messages)
	}
	if !strings.Contains(card, "rm -rf /") || !strings.Contains(card, "Clean up <everything>") {
		t.Errorf("the request shows %q", card)
	}
	if scripts != 1 { // the page's own app.js
		t.Errorf("%d script, img, b or i elements: text became markup", scripts)
	}
	// Live: output after the page loaded shows too.
	p.bus.Publish(&event.Output{ID: "build", Stream: wire.Stdout, Data: []byte("live line\n")})
	if _, err := chromedp.Run(ctx, chromedp.Poll[bool](`document.querySelector("#processes pre.output").textContent.includes("live line")`,
		chromedp.WithPollingTimeout(10*time.Second))); err != nil {
		t.Fatalf("the live line never showed: %v", err)
	}
	browsertest.Screenshot(t, ctx)

	err = chromedp.Do(ctx,
		chromedp.SendKeys(chromedp.CSS(`.approval[data-id="ask-7"] input.message`), "run the tests instead"),
		chromedp.Click(deny),
	)
	if err != nil {
		t.Fatal(err)
	}
	wctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	got := q.Wait(wctx, []string{"ask-7"}, 10*time.Second)
	if len(got) != 1 || got[0].Decision != "deny" || got[0].By != "remote" || got[0].Message != "run the tests instead" {
		t.Fatalf("the queue has %+v", got)
	}
	p.bus.Publish(&event.Approval{ID: "ask-7", Kind: "tool", Session: "sess-1", Tool: "Bash", ToolUseID: "tu1",
		Summary: "rm -rf /", By: "remote", Message: "run the tests instead"})
	p.bus.Publish(&event.End{Status: "ok"})
	if err := chromedp.Do(ctx, chromedp.WaitNotPresent(chromedp.CSS(`.approval[data-id="ask-7"]`))); err != nil {
		t.Fatal(err)
	}
	if _, err := chromedp.Run(ctx, chromedp.Poll[bool](`document.querySelector("#status").textContent.startsWith("run ended")`,
		chromedp.WithPollingTimeout(10*time.Second))); err != nil {
		t.Fatal(err)
	}
	status := text(`#status`)
	messages = text(`#sessions .msgs`)
	if !strings.Contains(messages, "denied") || !strings.Contains(messages, "by remote") {
		t.Errorf("the session does not show the denial: %q", messages)
	}
	if !strings.Contains(status, "run ended: ok") {
		t.Errorf("status %q", status)
	}
}
