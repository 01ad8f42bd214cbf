package agent

import (
	"context"
	"errors"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/seed5ad92d46/sous/runtime/agent/fakemodel"
)

// TestToolPermissions drives one real CLI session per version and transport
// through three turns: a Write that is approved lands on disk; a Bash that
// is denied reaches the model as an error tool_result carrying the deny
// message; an approval that rewrites the input changes what is written. The
// three turns share one session id.
func TestToolPermissions(t *testing.T) {
	for _, tc := range cliCases {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			var w *world
			hello := func() string { return filepath.Join(w.work, "hello.txt") }
			secret := func() string { return filepath.Join(w.work, "secret.txt") }
			w = newWorld(t, tc.version, fakemodel.Options{Func: func(req *fakemodel.Request, n int) fakemodel.Reply {
				switch n {
				case 0:
					return fakemodel.ToolUse("Write", map[string]any{"file_path": hello(), "content": "hello from the model\n"})
				case 1:
					return fakemodel.Text("I wrote hello.txt")
				case 2:
					return fakemodel.ToolUse("Bash", map[string]any{"command": "rm -rf " + filepath.Join(w.work, "precious"), "description": "delete precious"})
				case 3:
					return fakemodel.Text("understood, nothing deleted")
				case 4:
					return fakemodel.ToolUse("Write", map[string]any{"file_path": secret(), "content": "the model's version\n"})
				case 5:
					return fakemodel.Text("saved")
				}
				return fakemodel.Text("unexpected request")
			}})
			rec := &recorder{decide: func(r Request) (Decision, error) {
				switch r.Tool {
				case "Bash":
					return Deny("sous test: deleting is not allowed here", false), nil
				case "Write":
					if r.Input["file_path"] == secret() {
						in := map[string]any{}
						for k, v := range r.Input {
							in[k] = v
						}
						in["content"] = "rewritten by the approver\n"
						return Allow(in), nil
					}
				}
				return Allow(nil), nil
			}}
			c := embedded(t)
			s := w.start(c, tc.transport, Options{Permission: rec.callback})
			id := s.ID()
			if id == "" {
				t.Fatal("a fresh session has no id before its first turn")
			}

			t1 := send(t, s, "write hello.txt")
			if got := readFile(t, hello()); got != "hello from the model\n" {
				t.Errorf("hello.txt = %q", got)
			}
			if t1.Text != "I wrote hello.txt" || t1.Subtype != "success" || t1.IsError {
				t.Errorf("turn 1: text %q subtype %q is_error %v", t1.Text, t1.Subtype, t1.IsError)
			}
			if lastType(t1) != "result" || !hasMessage(t1, "assistant", "") || !hasMessage(t1, "control_request", "") {
				t.Errorf("turn 1 messages lack the assistant, the permission request or the final result: %d messages", len(t1.Messages))
			}
			if t1.SessionID != id || t1.NumTurns < 2 || t1.CostUSD <= 0 || len(t1.Usage) == 0 {
				t.Errorf("turn 1: session %q (want %q) num_turns %d cost %v usage %v", t1.SessionID, id, t1.NumTurns, t1.CostUSD, t1.Usage)
			}

			t2 := send(t, s, "clean up precious")
			if t2.Text != "understood, nothing deleted" {
				t.Errorf("turn 2 text %q", t2.Text)
			}
			if len(t2.Denials) != 1 || t2.Denials[0].Tool != "Bash" || !strings.Contains(t2.Denials[0].Input["command"].(string), "rm -rf") {
				t.Errorf("turn 2 denials = %+v", t2.Denials)
			}
			reqs := w.api.Scripted()
			if len(reqs) < 4 {
				t.Fatalf("the model got %d requests, want at least 4", len(reqs))
			}
			trs := reqs[3].ToolResults()
			if len(trs) != 1 || !trs[0].IsError || !strings.Contains(trs[0].Content, "sous test: deleting is not allowed here") {
				t.Errorf("the model got tool results %+v, want one error carrying the deny message", trs)
			}

			t3 := send(t, s, "save the secret")
			if got := readFile(t, secret()); got != "rewritten by the approver\n" {
				t.Errorf("secret.txt = %q: the approver's updated input was not used", got)
			}
			if t3.SessionID != id || t2.SessionID != id || s.ID() != id {
				t.Errorf("session ids across turns: %q %q %q, want %q", t1.SessionID, t2.SessionID, t3.SessionID, id)
			}
			// The third turn's first request carries the whole conversation.
			if n := len(w.api.Scripted()[4].Parsed.Messages); n < 5 {
				t.Errorf("turn 3's request holds %d messages: the history was lost", n)
			}

			var tools []string
			for _, r := range rec.requests() {
				tools = append(tools, r.Tool)
				if r.Kind != "tool" || r.ToolUseID == "" || r.SessionID != id || r.RequestID == "" {
					t.Errorf("permission request %+v lacks kind, tool_use_id, session or request id", r)
				}
			}
			if strings.Join(tools, ",") != "Write,Bash,Write" {
				t.Errorf("permission requests for %v, want Write,Bash,Write", tools)
			}
			if ex := w.api.Exhausted(); len(ex) > 0 {
				t.Errorf("script exhausted: %v", ex)
			}
		})
	}
}

// TestInterrupt stops a turn while the model is still answering: the turn
// ends with error_during_execution and is not an error, and the session
// keeps working.
func TestInterrupt(t *testing.T) {
	for _, tc := range []cliCase{cliCases[0], cliCases[2]} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			hold := make(chan struct{})
			defer close(hold)
			w := newWorld(t, tc.version, fakemodel.Options{Script: []fakemodel.Reply{
				{Blocks: []fakemodel.Block{fakemodel.TextBlock("never finished")}, Hold: hold},
				fakemodel.Text("second turn"),
			}})
			s := w.start(embedded(t), tc.transport, Options{})
			p := s.Start("think for a long time")
			waitFor(t, "the model request", 60*time.Second, func() bool { return len(w.api.Scripted()) == 1 })
			ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
			defer cancel()
			if err := s.Interrupt(ctx); err != nil {
				t.Fatalf("interrupt: %v", err)
			}
			turn, err := p.Wait(ctx)
			if err != nil {
				t.Fatalf("an interrupted turn failed: %v", err)
			}
			if turn.Subtype != "error_during_execution" {
				t.Errorf("interrupted turn subtype %q", turn.Subtype)
			}
			if next := send(t, s, "again"); next.Text != "second turn" {
				t.Errorf("after the interrupt: %q", next.Text)
			}
		})
	}
}

// TestTurnTimeout: a turn that runs past TurnTimeout is interrupted and Send
// says it timed out; a turn's own timeout (StartWith) replaces the
// session's.
func TestTurnTimeout(t *testing.T) {
	t.Parallel()
	hold := make(chan struct{})
	defer close(hold)
	w := newWorld(t, "latest", fakemodel.Options{Script: []fakemodel.Reply{
		{Blocks: []fakemodel.Block{fakemodel.TextBlock("slow")}, Hold: hold},
		fakemodel.Text("fast"),
		{Blocks: []fakemodel.Block{fakemodel.TextBlock("slow again")}, Hold: hold},
	}})
	s := w.start(embedded(t), TransportStdio, Options{TurnTimeout: 3 * time.Second})
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	start := time.Now()
	turn, err := s.Send(ctx, "take forever")
	if !errors.Is(err, ErrTurnTimeout) || !strings.Contains(err.Error(), "timed out") {
		t.Fatalf("send: %v, want a timeout", err)
	}
	if turn == nil || turn.Subtype != "error_during_execution" {
		t.Errorf("timed-out turn %+v", turn)
	}
	if d := time.Since(start); d > 30*time.Second {
		t.Errorf("the timeout took %s", d)
	}
	// The session's 3 s would be tight on a loaded machine: this turn's own
	// limit replaces it.
	next, err := s.StartWith("quick one", TurnOptions{Timeout: 60 * time.Second}).Wait(ctx)
	if err != nil || next.Text != "fast" {
		t.Errorf("after the timeout: %+v, %v", next, err)
	}
	start = time.Now()
	turn, err = s.StartWith("a shorter limit", TurnOptions{Timeout: time.Second}).Wait(ctx)
	if !errors.Is(err, ErrTurnTimeout) || !strings.Contains(err.Error(), "after 1s") {
		t.Fatalf("a turn with its own 1 s timeout: %v", err)
	}
	if turn == nil || turn.Subtype != "error_during_execution" {
		t.Errorf("timed-out turn %+v", turn)
	}
	if d := time.Since(start); d > 3*time.Second+interruptGrace {
		t.Errorf("the per-turn timeout took %s", d)
	}
}

// TestPermissionCallbackError: a failing approver denies the tool (the
// model sees why), stops the turn, and the error reaches Send's caller.
func TestPermissionCallbackError(t *testing.T) {
	t.Parallel()
	var w *world
	w = newWorld(t, "latest", fakemodel.Options{Func: func(req *fakemodel.Request, n int) fakemodel.Reply {
		if n == 0 {
			return fakemodel.ToolUse("Write", map[string]any{"file_path": filepath.Join(w.work, "x.txt"), "content": "x"})
		}
		return fakemodel.Text("gave up")
	}})
	boom := errors.New("policy exploded")
	s := w.start(embedded(t), TransportStdio, Options{Permission: func(ctx context.Context, r Request) (Decision, error) {
		return Decision{}, boom
	}})
	ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
	defer cancel()
	turn, err := s.Send(ctx, "write x")
	if !errors.Is(err, boom) || !strings.Contains(err.Error(), "Write") {
		t.Fatalf("send error %v, want the callback's error naming the tool", err)
	}
	if turn == nil {
		t.Fatal("no turn with the error")
	}
	// The deny message, naming the error, is in the transcript as the
	// tool's error result.
	found := false
	for _, m := range turn.Messages {
		if strings.Contains(string(m), `"tool_result"`) && strings.Contains(string(m), "policy exploded") && strings.Contains(string(m), `"is_error":true`) {
			found = true
		}
	}
	if !found {
		for _, m := range turn.Messages {
			t.Logf("%.600s", m)
		}
		t.Errorf("no error tool_result carrying the callback's error among the turn's %d messages", len(turn.Messages))
	}
	// The interrupt follows the deny; the scripted model may answer first.
	if len(turn.Denials) != 1 || turn.Denials[0].Tool != "Write" {
		t.Errorf("turn subtype %q denials %+v: want the Write denied", turn.Subtype, turn.Denials)
	}
}
