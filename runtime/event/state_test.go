package event

import (
	"bytes"
	"encoding/json"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/seed5ad92d46/sous/daemon/wire"
)

// clockBus is a bus whose clock moves one second per event.
func clockBus() *Bus {
	now := time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)
	return New(func() time.Time { now = now.Add(time.Second); return now })
}

func agentMsg(t *testing.T, v map[string]any) json.RawMessage {
	t.Helper()
	b, err := json.Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// TestStateFollowsSessions: a session shows from its first message with
// an id, is in a turn until its result, says which tool it uses, and adds
// up the turns' cost (per session and for the run: a result's
// total_cost_usd is the CLI's running total, which starts again at 0 in a
// new CLI process); a decision ends
// the request it answers, and a denial counts for its session.
func TestStateFollowsSessions(t *testing.T) {
	b := clockBus()
	s := b.State()
	b.Publish(&Agent{Session: "", Dir: "out", Message: agentMsg(t, map[string]any{"type": "user"})})
	if len(s.Sessions) != 0 {
		t.Fatal("a message without a session id made a session")
	}
	b.Publish(&Agent{Session: "s1", Dir: "in", Message: agentMsg(t, map[string]any{"type": "system", "subtype": "init", "model": "m"})})
	b.Publish(&Agent{Session: "s1", Dir: "in", Message: agentMsg(t, map[string]any{"type": "assistant", "message": map[string]any{
		"content": []any{map[string]any{"type": "text", "text": "Let me run the tests.\nThen fix."},
			map[string]any{"type": "tool_use", "name": "Bash", "input": map[string]any{"command": "go test ./..."}}}}})})
	ss := s.Session("s1")
	if ss == nil || !ss.InTurn || ss.Activity != "Bash: go test ./..." || ss.LastText != "Let me run the tests." || ss.Model != "m" {
		t.Fatalf("session after a tool use: %+v", ss)
	}
	b.Publish(&Pending{Approval{Kind: "tool", Session: "s1", Tool: "Bash", ToolUseID: "t1", Summary: "go test ./..."}})
	b.Publish(&Pending{Approval{Kind: "privileged", Tool: "Sudo", Summary: "apt-get install x"}})
	if len(s.Pending) != 2 {
		t.Fatalf("pending: %v", s.Pending)
	}
	b.Publish(&Approval{Kind: "tool", Session: "s1", Tool: "Bash", ToolUseID: "t1", By: "default", Message: "no"})
	if len(s.Pending) != 1 || s.Pending[0].Tool != "Sudo" || len(s.Denials) != 1 || ss.Denials != 1 {
		t.Fatalf("after the decision: pending %v, denials %v, session's %d", s.Pending, s.Denials, ss.Denials)
	}
	b.Publish(&Agent{Session: "s1", Dir: "in", Message: agentMsg(t, map[string]any{"type": "user"})})
	if ss.Activity != "thinking" {
		t.Errorf("after the tool result: %q", ss.Activity)
	}
	b.Publish(&Agent{Session: "s1", Dir: "in", Message: agentMsg(t, map[string]any{"type": "result", "subtype": "success",
		"total_cost_usd": 0.25, "duration_ms": 1500})})
	b.Publish(&Agent{Session: "s2", Dir: "in", Message: agentMsg(t, map[string]any{"type": "result", "subtype": "error_max_budget_usd",
		"is_error": false, "total_cost_usd": 0.5})})
	b.Publish(&Agent{Session: "s1", Dir: "in", Message: agentMsg(t, map[string]any{"type": "result", "subtype": "success",
		"total_cost_usd": 0.125, "duration_ms": 500})})
	if ss.InTurn || ss.Turns != 2 || ss.Cost != 0.375 || ss.Duration != 2*time.Second || !ss.OK {
		t.Errorf("s1 after two turns: %+v", ss)
	}
	if s2 := s.Session("s2"); s2.OK || s2.Subtype != "error_max_budget_usd" {
		t.Errorf("an error_* subtype is not ok: %+v", s2)
	}
	if s.Cost() != 0.875 {
		t.Errorf("the run's cost %v, want 0.875", s.Cost())
	}
	// A third turn in the same CLI: its total includes the 0.125 before.
	b.Publish(&Agent{Session: "s1", Dir: "in", Message: agentMsg(t, map[string]any{"type": "result", "subtype": "success",
		"total_cost_usd": 0.375})})
	if ss.Cost != 0.625 || s.Cost() != 1.125 {
		t.Errorf("after a turn whose total was 0.375 (0.25 of it its own): session %v, run %v; want 0.625 and 1.125", ss.Cost, s.Cost())
	}
}

// TestStateFollowsProcesses: the last line (after a progress bar's last
// \r), a bounded stderr tail, the exit, the last process that failed; a
// reused id is a new process; prefixes turn on for good once two echo.
func TestStateFollowsProcesses(t *testing.T) {
	b := clockBus()
	s := b.State()
	b.Publish(&Spawn{ID: "a", Command: []string{"make"}, Host: "embedded"})
	b.Publish(&EchoStart{ID: "a"})
	b.Publish(&Output{ID: "a", Stream: wire.Stdout, Data: []byte("one\ntwo\n")})
	b.Publish(&Output{ID: "a", Stream: wire.Stdout, Data: []byte("10%\r50%\r100%\n\n")})
	p := s.Proc("a")
	if string(p.LastLine) != "100%" || s.Prefixed {
		t.Errorf("last line %q, prefixed %v", p.LastLine, s.Prefixed)
	}
	big := bytes.Repeat([]byte("e"), 3*MaxStderrTail)
	b.Publish(&Output{ID: "a", Stream: wire.Stderr, Data: big})
	b.Publish(&Output{ID: "a", Stream: wire.Stderr, Data: []byte("\nthe end\n")})
	if len(p.StderrTail) != MaxStderrTail || !strings.HasSuffix(string(p.StderrTail), "e\nthe end\n") {
		t.Errorf("stderr tail of %d bytes ending %q", len(p.StderrTail), p.StderrTail[len(p.StderrTail)-12:])
	}
	if len(p.LastLine) != len("the end") {
		t.Errorf("last line %q", p.LastLine)
	}
	b.Publish(&EchoStart{ID: "b"})
	b.Publish(&EchoEnd{ID: "b"})
	if !s.Prefixed || s.Echoing != 1 {
		t.Errorf("prefixed %v echoing %d after a second echo came and went", s.Prefixed, s.Echoing)
	}
	b.Publish(&Exit{ID: "a", ExitCode: 2})
	if !p.Exited || p.ExitCode != 2 || s.LastFailed != p || p.Ended.Sub(p.Started) <= 0 {
		t.Errorf("after the exit: %+v", p)
	}
	b.Publish(&Spawn{ID: "a", Command: []string{"make", "again"}})
	if len(s.Procs) != 2 || s.Proc("a") == p || !s.Proc("a").Running() {
		t.Errorf("a reused id: %d processes", len(s.Procs))
	}
	v := s.Version
	b.Publish(&Output{ID: "a", Stream: wire.Stdout, Data: []byte("x\n")})
	if s.Version != v {
		t.Error("output moved the version")
	}
	b.Publish(&Exit{ID: "a"})
	if s.Version == v {
		t.Error("an exit did not move the version")
	}
}

// TestBusAfterEnd: once the run ended only errors and prompts go on.
func TestBusAfterEnd(t *testing.T) {
	b := clockBus()
	var seen []string
	b.Subscribe(SinkFunc(func(_ time.Time, e Event) {
		switch e := e.(type) {
		case *Log:
			seen = append(seen, "log "+e.Text)
		case *Error:
			seen = append(seen, "error "+e.Text)
		case *End:
			seen = append(seen, "end")
		}
	}))
	b.Publish(&Log{Text: "before"})
	b.Publish(&End{Status: "ok"})
	b.Publish(&Log{Text: "after"})
	b.Publish(&Error{Text: "after"})
	if got := strings.Join(seen, ", "); got != "log before, end, error after" {
		t.Errorf("sinks saw %s", got)
	}
}

// TestStateColours: an id keeps its own colour run after run, unless a
// running process has it; then it takes the next free one.
func TestStateColours(t *testing.T) {
	b := clockBus()
	s := b.State()
	// Find two ids that hash to the same slot.
	first, second := "p0", ""
	for i := 1; second == ""; i++ {
		if id := "p" + string(rune('0'+i%10)) + strings.Repeat("x", i/10); ColorOf(id) == ColorOf(first) {
			second = id
		}
	}
	b.Publish(&Spawn{ID: first})
	b.Publish(&Spawn{ID: second})
	c1, c2 := s.Proc(first).Color, s.Proc(second).Color
	if c1 != ColorOf(first) || c2 == c1 {
		t.Errorf("colours %d and %d for two running ids that prefer %d", c1, c2, ColorOf(first))
	}
	b.Publish(&Exit{ID: first})
	b.Publish(&Exit{ID: second})
	b.Publish(&Spawn{ID: second})
	if c := s.Proc(second).Color; c != ColorOf(second) {
		t.Errorf("alone, %s got colour %d, want its own %d", second, c, ColorOf(second))
	}
}

// TestStatePendingForAPerson: a request pending while the policies run
// (no id) and again once it waits for a person (with its id) is one
// pending request, updated; the decision with the id ends it, and a
// request of another tool use stays.
func TestStatePendingForAPerson(t *testing.T) {
	b := clockBus()
	s := b.State()
	b.Publish(&Pending{Approval{Kind: "tool", Session: "s1", Tool: "Bash", ToolUseID: "t1", Summary: "make"}})
	b.Publish(&Pending{Approval{Kind: "tool", Session: "s1", Tool: "Bash", ToolUseID: "t2", Summary: "make x"}})
	since := s.Pending[0].Since
	b.Publish(&Pending{Approval{ID: "a1b2c3d4", Kind: "tool", Session: "s1", Tool: "Bash", ToolUseID: "t1", Summary: "make",
		Input: map[string]any{"command": "make"}}})
	if len(s.Pending) != 2 || s.Pending[0].ID != "a1b2c3d4" || s.Pending[0].Input["command"] != "make" || !s.Pending[0].Since.Equal(since) {
		t.Fatalf("pending after the id came: %+v", s.Pending)
	}
	b.Publish(&Approval{ID: "a1b2c3d4", Kind: "tool", Session: "s1", Tool: "Bash", ToolUseID: "t1", By: "remote", Message: "no"})
	if len(s.Pending) != 1 || s.Pending[0].ToolUseID != "t2" || len(s.Denials) != 1 || s.Denials[0].ID != "a1b2c3d4" {
		t.Fatalf("after the decision: pending %+v, denials %+v", s.Pending, s.Denials)
	}
}

// TestStateSettle: a held process whose echo ended before the next was
// spawned still counts at the settle, which turns the prefixes on; once
// settled it counts no more, and a settle without a hold changes nothing.
func TestStateSettle(t *testing.T) {
	b := New(nil)
	s := b.State()
	b.Publish(&Settle{})
	b.Publish(&EchoStart{ID: "a", Held: true})
	b.Publish(&EchoEnd{ID: "a"})
	if !s.Holding || !s.Held("a") || s.Echoing != 1 {
		t.Fatalf("holding %v held %v echoing %d after a's echo ended in the hold", s.Holding, s.Held("a"), s.Echoing)
	}
	b.Publish(&EchoStart{ID: "b", Held: true})
	b.Publish(&Settle{})
	if !s.Prefixed || s.Holding || s.Held("a") || s.Echoing != 1 {
		t.Errorf("after the settle: prefixed %v holding %v echoing %d", s.Prefixed, s.Holding, s.Echoing)
	}
	b.Publish(&EchoEnd{ID: "b"})
	if s.Echoing != 0 {
		t.Errorf("echoing %d once b ended", s.Echoing)
	}
}

// TestBusSettlesBeforeEnd: an End with a hold open is preceded by a
// Settle, so that every sink writes what it held before the end.
func TestBusSettlesBeforeEnd(t *testing.T) {
	b := New(nil)
	var seen []string
	b.Subscribe(SinkFunc(func(_ time.Time, e Event) { seen = append(seen, fmt.Sprintf("%T", e)) }))
	b.Publish(&EchoStart{ID: "a", Held: true})
	b.Publish(&End{Status: "ok"})
	if got := strings.Join(seen, " "); got != "*event.EchoStart *event.Settle *event.End" {
		t.Errorf("events %s", got)
	}
}

// A spawn's colour slot is free of the processes running then, however
// many the run had: the count of running processes per slot follows the
// spawns and exits.
func TestFreeColorAfterManyProcesses(t *testing.T) {
	b := New(nil)
	for i := range 5000 {
		id := fmt.Sprintf("p%d", i)
		b.Publish(&Spawn{ID: id})
		b.Publish(&Exit{ID: id})
	}
	running := make(map[int]bool)
	for i := range ColorSlots {
		id := fmt.Sprintf("live%d", i)
		b.Publish(&Spawn{ID: id})
		p := b.State().Proc(id)
		if running[p.Color] {
			t.Fatalf("%s got slot %d, which a running process has", id, p.Color)
		}
		running[p.Color] = true
	}
}
