package view

import (
	"bytes"
	"encoding/json"
	"strings"
	"testing"
	"time"

	"github.com/seed5ad92d46/sous/daemon/wire"
	"github.com/seed5ad92d46/sous/runtime/event"
)

// runState plays a run with a clock that moves one second per event:
// two processes (one fails with stderr), one left running on the
// embedded daemon, a session of two turns with a denial, a failure.
func runState(t *testing.T) *event.State {
	now := time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)
	b := event.New(func() time.Time { now = now.Add(time.Second); return now })
	msg := func(v map[string]any) json.RawMessage {
		m, err := json.Marshal(v)
		if err != nil {
			t.Fatal(err)
		}
		return m
	}
	for _, e := range []event.Event{
		&event.Start{Recipe: "/w/ci/fan.star"},
		&event.Spawn{ID: "build", Command: []string{"make"}, Host: "embedded"},
		&event.Spawn{ID: "test", Command: []string{"go", "test"}, Host: "embedded"},
		&event.Output{ID: "test", Stream: wire.Stderr, Data: []byte("--- FAIL: TestX\n\x1b[31mFAIL\x1b[m\tpkg 0.1s\n")},
		&event.Exit{ID: "build"},
		&event.Exit{ID: "test", ExitCode: 2},
		&event.Spawn{ID: "watch", Command: []string{"tail", "-f"}, Host: "embedded"},
		&event.Agent{Session: "1a2b3c4d5e6f", Dir: "in", Message: msg(map[string]any{"type": "result", "subtype": "success", "total_cost_usd": 0.0123, "duration_ms": 2500})},
		&event.Approval{Kind: "tool", Session: "1a2b3c4d5e6f", Tool: "Bash", Summary: "rm -rf | x", By: "default", Message: "no approver allowed this request"},
		&event.Agent{Session: "1a2b3c4d5e6f", Dir: "in", Message: msg(map[string]any{"type": "result", "subtype": "success", "total_cost_usd": 0.0423, "duration_ms": 500})},
		&event.End{Status: "failed", ExitCode: 1, Error: "run: go test: exit code 2", File: "/w/ci/fan.star", Line: 12, Col: 5, Source: `run(["go", "test"])`},
	} {
		b.Publish(e)
	}
	return b.State()
}

func TestRenderSummary(t *testing.T) {
	got := RenderSummary(runState(t), false, 0)
	want := `─ failed after 10.0s (exit code 1) · 3 processes · 1 session · $0.0423 · 1 denial
  [build]           ok       3.0s  exit 0
  [test]            failed   3.0s  exit 2
  [watch]           stopped  4.0s
  session 1a2b3c4d  ok       3.0s  2 turns  $0.0423  1 denial
─ failure at /w/ci/fan.star:12: run(["go", "test"])
  run: go test: exit code 2
  stderr of [test] (exit code 2):
  │ --- FAIL: TestX
  │ FAIL pkg 0.1s
`
	if got != want {
		t.Errorf("summary:\n%s\nwant:\n%s", got, want)
	}
	for _, l := range strings.Split(RenderSummary(runState(t), true, 30), "\n") {
		if w := len([]rune(stripSGR(l))); w > 30 {
			t.Errorf("a line of %d columns cut to 30: %q", w, l)
		}
	}
}

func stripSGR(s string) string {
	for {
		i := strings.Index(s, "\x1b[")
		if i < 0 {
			return s
		}
		j := strings.IndexByte(s[i:], 'm')
		s = s[:i] + s[i+j+1:]
	}
}

func TestMarkdown(t *testing.T) {
	md := Markdown(runState(t), func(p string) string { return strings.TrimPrefix(p, "/w/") })
	for _, want := range []string{
		"### ❌ sous run `ci/fan.star`: failed after 10.0s (exit code 1)\n\n",
		"| process | build | ok | 3.0s | 0 |  |  |\n",
		"| process | watch | stopped | 4.0s |  |  |  |\n",
		"| session | 1a2b3c4d5e6f | ok | 3.0s |  | $0.0423 | 1 |\n",
		"| **total** | | | 10.0s | | $0.0423 | 1 |\n",
		"- `deny Bash rm -rf | x (by default: no approver allowed this request) [session 1a2b3c4d]`\n",
		"**Failure** at `ci/fan.star:12`: `run([\"go\", \"test\"])`\n\n```\nrun: go test: exit code 2\n```\n",
		"```\n--- FAIL: TestX\nFAIL\tpkg 0.1s\n```\n",
	} {
		if !strings.Contains(md, want) {
			t.Errorf("the Markdown lacks %q:\n%s", want, md)
		}
	}
}

func TestWorkflowCommandEscapes(t *testing.T) {
	if got := escapeData("50% done\r\nnext"); got != "50%25 done%0D%0Anext" {
		t.Errorf("data: %q", got)
	}
	if got := escapeProperty("a:b,c%"); got != "a%3Ab%2Cc%25" {
		t.Errorf("property: %q", got)
	}
	if got := mdCode("a `b` c"); got != "``a `b` c``" {
		t.Errorf("code: %q", got)
	}
	if got := mdCell("a|b\nc"); got != `a\|b c` {
		t.Errorf("cell: %q", got)
	}
	if got := mdBlock("x\n```\ny"); !strings.HasPrefix(got, "````\n") {
		t.Errorf("block: %q", got)
	}
}

// TestSummaryOnlyWhenThereIsSomethingToSay: a recipe that ran no process
// and no session and finished gets no summary; one that failed does.
func TestSummaryOnlyWhenThereIsSomethingToSay(t *testing.T) {
	for _, end := range []*event.End{{Status: "ok"}, {Status: "failed", ExitCode: 1, Error: "fail: no"}} {
		b := event.New(nil)
		var screen bytes.Buffer
		b.Subscribe(&Summary{Screen: Plain{Stdout: &screen, Stderr: &screen}, State: b.State()})
		b.Publish(&event.Start{Recipe: "hello.star"})
		b.Publish(end)
		if got := screen.String(); (end.Status == "ok") != (got == "") {
			t.Errorf("%s: summary %q", end.Status, got)
		}
	}
}
