package agent

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"
)

// The test binary doubles as a fake CLI (SOUS_FAKE_CLI names the scenario)
// for protocol corners the real CLI cannot be made to hit on demand: frames
// that split lines and characters, unknown messages, a crash mid-turn,
// withdrawn and concurrent permission requests.
func TestMain(m *testing.M) {
	if sc := os.Getenv("SOUS_FAKE_CLI"); sc != "" {
		os.Exit(fakeCLI(sc))
	}
	os.Exit(m.Run())
}

// fakeCLI speaks just enough stream-json for one scenario.
func fakeCLI(scenario string) int {
	if slices.Contains(os.Args[1:], "--version") {
		fmt.Println("0.9.1 (Claude Code)")
		return 0
	}
	in := bufio.NewScanner(os.Stdin)
	in.Buffer(make([]byte, 1<<20), 64<<20)
	out := bufio.NewWriter(os.Stdout)
	var outMu sync.Mutex
	emit := func(v any) {
		b, _ := json.Marshal(v)
		outMu.Lock()
		out.Write(append(b, '\n'))
		out.Flush()
		outMu.Unlock()
	}
	next := func() map[string]any {
		if !in.Scan() {
			return nil
		}
		var m map[string]any
		json.Unmarshal(in.Bytes(), &m)
		return m
	}
	if scenario == "garbage" {
		// Some other program: it prints, and never speaks the protocol.
		fmt.Fprintln(out, "Welcome to not-claude 1.0")
		out.Flush()
		for next() != nil {
		}
		return 0
	}
	if scenario == "exit-early" {
		fmt.Fprintln(os.Stderr, "error: unknown option '--frobnicate'")
		return 2
	}
	if scenario == "old" {
		return fakeOldCLI(emit, next) // fakecli_control_test.go
	}
	// initialize
	m := next()
	if m == nil {
		return 1
	}
	emit(map[string]any{"type": "control_response", "response": map[string]any{"subtype": "success", "request_id": m["request_id"], "response": map[string]any{}}})
	result := func(text string) {
		emit(map[string]any{"type": "result", "subtype": "success", "is_error": false, "result": text, "session_id": "fake-session",
			"num_turns": 1, "total_cost_usd": 0.25, "duration_ms": 7, "usage": map[string]any{"input_tokens": 3}, "future_field": []int{1, 2}})
	}
	for {
		m = next()
		if m == nil {
			return 0
		}
		if m["type"] != "user" {
			continue
		}
		switch scenario {
		case "chatty":
			emit(map[string]any{"type": "system", "subtype": "init", "session_id": "fake-session"})
			fmt.Fprintln(out, "a stray line that is not JSON")
			emit(map[string]any{"type": "keep_alive"})
			emit(map[string]any{"type": "mystery_type", "payload": map[string]any{"x": 1}, "session_id": "fake-session"})
			// One message written in many small pieces, each flushed
			// (and so its own frame), splitting multi-byte characters.
			b, _ := json.Marshal(map[string]any{"type": "assistant", "message": map[string]any{"content": []any{map[string]any{"type": "text", "text": "héllo ✓ wörld 🎉"}}}})
			b = append(b, '\n')
			for i := 0; i < len(b); i += 3 {
				out.Write(b[i:min(i+3, len(b))])
				out.Flush()
				time.Sleep(time.Millisecond)
			}
			big := strings.Repeat("x", 3<<20)
			emit(map[string]any{"type": "assistant", "message": map[string]any{"content": []any{map[string]any{"type": "text", "text": big}}}})
			result("héllo ✓ wörld 🎉")
		case "stuck":
			// Starts the turn, then neither finishes it nor answers the
			// interrupt: only the session's end stops it.
			emit(map[string]any{"type": "system", "subtype": "init", "session_id": "fake-session"})
			for r := next(); r != nil; r = next() {
			}
			return 0
		case "die":
			emit(map[string]any{"type": "system", "subtype": "init", "session_id": "fake-session"})
			fmt.Fprintln(os.Stderr, "fatal: the model exploded")
			return 3
		case "cancel":
			emit(map[string]any{"type": "control_request", "request_id": "p1", "request": map[string]any{"subtype": "can_use_tool", "tool_name": "Bash", "input": map[string]any{"command": "ls"}, "tool_use_id": "t1"}})
			time.Sleep(300 * time.Millisecond)
			emit(map[string]any{"type": "control_cancel_request", "request_id": "p1"})
			// Anything sous answers to p1 after the cancel would show here.
			time.Sleep(500 * time.Millisecond)
			emit(map[string]any{"type": "control_request", "request_id": "p2", "request": map[string]any{"subtype": "can_use_tool", "tool_name": "Read", "input": map[string]any{}, "tool_use_id": "t2"}})
			var got []string
			for r := next(); r != nil; r = next() {
				if r["type"] == "control_response" {
					resp := r["response"].(map[string]any)
					got = append(got, fmt.Sprint(resp["request_id"]))
					if resp["request_id"] == "p2" {
						break
					}
				}
			}
			result("answered " + strings.Join(got, ","))
		case "mcp":
			result(fakeMCP(emit, next)) // tools_test.go
		case "concurrent":
			emit(map[string]any{"type": "control_request", "request_id": "p1", "request": map[string]any{"subtype": "can_use_tool", "tool_name": "Write", "input": map[string]any{"file_path": "/a"}, "tool_use_id": "t1"}})
			emit(map[string]any{"type": "control_request", "request_id": "p2", "request": map[string]any{"subtype": "can_use_tool", "tool_name": "Bash", "input": map[string]any{"command": "rm x"}, "tool_use_id": "t2"}})
			emit(map[string]any{"type": "control_request", "request_id": "h1", "request": map[string]any{"subtype": "hook_callback", "callback_id": "nope"}})
			answers := map[string]string{}
			for len(answers) < 3 {
				r := next()
				if r == nil {
					return 1
				}
				if r["type"] != "control_response" {
					continue
				}
				resp := r["response"].(map[string]any)
				id := fmt.Sprint(resp["request_id"])
				if resp["subtype"] == "error" {
					answers[id] = "error"
					continue
				}
				body := resp["response"].(map[string]any)
				answers[id] = fmt.Sprint(body["behavior"], ":", body["message"], ":", body["toolUseID"])
			}
			result(fmt.Sprintf("p1=%s p2=%s h1=%s", answers["p1"], answers["p2"], answers["h1"]))
		}
	}
}

func fakeOptions(scenario string) Options {
	exe, _ := os.Executable()
	return Options{CLI: []string{exe}, Env: map[string]string{"SOUS_FAKE_CLI": scenario}, StartTimeout: 20 * time.Second}
}

// fakeTurn starts a session on the fake CLI with opt and sends it one
// message, "hi", failing the test if either goes wrong. The session stays
// open until the test ends, so that nothing the test checks afterwards
// (a callback's cancellation, say) can come from closing it.
func fakeTurn(t *testing.T, opt Options) *Turn {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	t.Cleanup(cancel)
	s, err := Start(ctx, embedded(t), opt)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Close() })
	turn, err := s.Send(ctx, "hi")
	if err != nil {
		t.Fatal(err)
	}
	return turn
}

func TestFakeUnknownMessagesAndSplitFrames(t *testing.T) {
	t.Parallel()
	var mu sync.Mutex
	var types []string
	opt := fakeOptions("chatty")
	opt.Observer = func(e Event) {
		mu.Lock()
		types = append(types, e.Dir+":"+e.Type)
		mu.Unlock()
	}
	turn := fakeTurn(t, opt)
	if turn.Text != "héllo ✓ wörld 🎉" || turn.CostUSD != 0.25 || turn.NumTurns != 1 || turn.DurationMs != 7 || turn.Usage["input_tokens"] != float64(3) {
		t.Errorf("turn %+v", turn)
	}
	var kinds []string
	for _, m := range turn.Messages {
		var v struct {
			Type    string `json:"type"`
			Message struct {
				Content []struct {
					Text string `json:"text"`
				} `json:"content"`
			} `json:"message"`
		}
		if err := json.Unmarshal(m, &v); err != nil {
			t.Fatalf("message %.100q is not JSON: %v", m, err)
		}
		kinds = append(kinds, v.Type)
		if v.Type == "assistant" && len(v.Message.Content) == 1 {
			if tx := v.Message.Content[0].Text; tx != "héllo ✓ wörld 🎉" && len(tx) != 3<<20 {
				t.Errorf("assistant text mangled: %.60q (%d bytes)", tx, len(tx))
			}
		}
	}
	if got := strings.Join(kinds, ","); got != "system,mystery_type,assistant,assistant,result" {
		t.Errorf("turn messages %s", got)
	}
	if !strings.Contains(string(turn.Messages[len(turn.Messages)-1]), `"future_field":[1,2]`) {
		t.Error("the result's unknown field was not kept")
	}
	mu.Lock()
	defer mu.Unlock()
	seen := strings.Join(types, " ")
	for _, want := range []string{"out:control_request", "in:control_response", "out:user", "in:keep_alive", "in:mystery_type", "in:result", "in:"} {
		if !strings.Contains(seen+" ", want+" ") {
			t.Errorf("observer did not see %s: %s", want, seen)
		}
	}
}

func TestFakeCLIExitsMidTurn(t *testing.T) {
	t.Parallel()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	s, err := Start(ctx, embedded(t), fakeOptions("die"))
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	turn, err := s.Send(ctx, "hi")
	if !errors.Is(err, ErrCLIExited) || !strings.Contains(err.Error(), "code 3") || !strings.Contains(err.Error(), "the model exploded") || turn != nil {
		t.Fatalf("send: %v (turn %v)", err, turn)
	}
	if _, err2 := s.Send(ctx, "again"); !errors.Is(err2, ErrCLIExited) {
		t.Errorf("a send after the exit: %v", err2)
	}
	if err := s.Close(); err != nil {
		t.Errorf("close after exit: %v", err)
	}
}

// A program that never answers initialize fails the start after
// StartTimeout, and the error quotes what it printed instead.
func TestFakeCLIThatNeverAnswers(t *testing.T) {
	t.Parallel()
	opt := fakeOptions("garbage")
	opt.StartTimeout = time.Second
	_, err := Start(context.Background(), embedded(t), opt)
	if err == nil || !strings.Contains(err.Error(), "no answer from the CLI") || !strings.Contains(err.Error(), "Welcome to not-claude 1.0") {
		t.Fatalf("start: %v", err)
	}
}

// A CLI that ignores the interrupt of a timed-out turn is stuck: the turn
// fails saying so (ErrCLIStuck, not only ErrTurnTimeout) and the session
// ends, interruptGrace after the timeout.
func TestFakeStuckCLIEndsTheSession(t *testing.T) {
	t.Parallel()
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	opt := fakeOptions("stuck")
	opt.TurnTimeout = 500 * time.Millisecond
	s, err := Start(ctx, embedded(t), opt)
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	start := time.Now()
	_, err = s.Send(ctx, "hi")
	if !errors.Is(err, ErrTurnTimeout) || !errors.Is(err, ErrCLIStuck) || !strings.Contains(err.Error(), "the session was ended") {
		t.Fatalf("send: %v", err)
	}
	if d := time.Since(start); d < interruptGrace || d > interruptGrace+10*time.Second {
		t.Errorf("failed after %v, want the timeout and interruptGrace (%v)", d, interruptGrace)
	}
	if _, err := s.Send(ctx, "again"); err == nil {
		t.Error("a send after the session ended succeeded")
	}
}

func TestFakeCLIFailsToStart(t *testing.T) {
	t.Parallel()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	_, err := Start(ctx, embedded(t), fakeOptions("exit-early"))
	if !errors.Is(err, ErrCLIExited) || !strings.Contains(err.Error(), "code 2") || !strings.Contains(err.Error(), "--frobnicate") {
		t.Fatalf("start: %v", err)
	}
	_, err = Start(ctx, embedded(t), Options{CLI: []string{"/nonexistent/claude"}})
	if err == nil || !strings.Contains(err.Error(), "agent: cli: ") || !strings.Contains(err.Error(), "/nonexistent/claude") {
		t.Fatalf("start of a missing program: %v", err)
	}
	// A missing directory is cwd's fault, not cli's.
	exe, _ := os.Executable()
	_, err = Start(ctx, embedded(t), Options{CLI: []string{exe}, Cwd: "/nonexistent/dir"})
	if err == nil || !strings.HasPrefix(err.Error(), "agent: cwd: ") || !strings.Contains(err.Error(), "/nonexistent/dir") {
		t.Fatalf("start in a missing directory: %v", err)
	}
}

func TestFakePermissionCancelled(t *testing.T) {
	t.Parallel()
	cancelled := make(chan error, 1)
	opt := fakeOptions("cancel")
	opt.Permission = func(ctx context.Context, r Request) (Decision, error) {
		if r.Tool == "Read" {
			return Allow(nil), nil
		}
		select {
		case <-ctx.Done():
			cancelled <- ctx.Err()
			return Allow(nil), nil // too late: must not be sent
		case <-time.After(10 * time.Second):
			cancelled <- errors.New("never cancelled")
			return Allow(nil), nil
		}
	}
	turn := fakeTurn(t, opt)
	if cerr := <-cancelled; !errors.Is(cerr, context.Canceled) {
		t.Errorf("callback ctx: %v", cerr)
	}
	if turn.Text != "answered p2" {
		t.Errorf("the fake CLI got answers %q, want only p2's", turn.Text)
	}
}

// A callback that gives up with an error once its request is withdrawn (as
// the recipe layer does when its policy has not run yet) does not fail the
// turn: the request is dropped, the turn goes on.
func TestFakePermissionCancelledCallbackFails(t *testing.T) {
	t.Parallel()
	opt := fakeOptions("cancel")
	opt.Permission = func(ctx context.Context, r Request) (Decision, error) {
		if r.Tool == "Read" {
			return Allow(nil), nil
		}
		<-ctx.Done()
		return Deny("the request was withdrawn", false), ctx.Err()
	}
	turn := fakeTurn(t, opt)
	if turn.Text != "answered p2" || turn.IsError {
		t.Errorf("turn %q (error %v), want only p2 answered and the turn to succeed", turn.Text, turn.IsError)
	}
}

func TestFakeConcurrentPermissions(t *testing.T) {
	t.Parallel()
	// Both callbacks must be running at once to get past the barrier.
	var arrived sync.WaitGroup
	arrived.Add(2)
	opt := fakeOptions("concurrent")
	var seqs sync.Map // tool use id -> Seq
	opt.Permission = func(ctx context.Context, r Request) (Decision, error) {
		seqs.Store(r.ToolUseID, r.Seq)
		arrived.Done()
		done := make(chan struct{})
		go func() { arrived.Wait(); close(done) }()
		select {
		case <-done:
		case <-time.After(10 * time.Second):
			return Decision{}, errors.New("the other request never ran concurrently")
		}
		if r.Tool == "Bash" {
			return Deny("no rm", false), nil
		}
		return Allow(nil), nil
	}
	turn := fakeTurn(t, opt)
	if want := "p1=allow:<nil>:t1 p2=deny:no rm:t2 h1=error"; turn.Text != want {
		t.Errorf("answers %q, want %q", turn.Text, want)
	}
	// Numbered in the order the CLI sent them, for callers that queue them.
	for id, want := range map[string]uint64{"t1": 1, "t2": 2} {
		if got, _ := seqs.Load(id); got != want {
			t.Errorf("request %s has Seq %v, want %d", id, got, want)
		}
	}
}

func TestLineSplitter(t *testing.T) {
	var got []string
	var ls lineSplitter
	in := "{\"a\":\"é\"}\n\n{\"b\":2}\r\n{\"c\""
	for i := 0; i < len(in); i++ { // one byte per frame, splitting the é
		ls.feed([]byte{in[i]}, func(l []byte) { got = append(got, string(l)) })
	}
	ls.feed([]byte(":3}"), func(l []byte) { got = append(got, string(l)) })
	if last := ls.flush(); last != nil {
		got = append(got, string(last))
	}
	if strings.Join(got, "|") != `{"a":"é"}|{"b":2}|{"c":3}` {
		t.Errorf("lines %q", got)
	}
}

func TestParseRule(t *testing.T) {
	for _, tc := range []struct {
		in, tool, content, err string
	}{
		{"Read", "Read", "", ""},
		{"Bash(git:*)", "Bash", "git:*", ""},
		{"Bash(go test ./...)", "Bash", "go test ./...", ""},
		{"", "", "", `rule "": want Tool or Tool(content)`},
		{"(x)", "", "", `rule "(x)": want Tool or Tool(content)`},
		{"Bash(x", "", "", `rule "Bash(x": want Tool or Tool(content)`},
	} {
		r, err := ParseRule(tc.in)
		if tc.err != "" {
			if err == nil || err.Error() != tc.err {
				t.Errorf("%q: err %v, want %s", tc.in, err, tc.err)
			}
			continue
		}
		if err != nil || r.ToolName != tc.tool || r.RuleContent != tc.content {
			t.Errorf("%q: %+v %v", tc.in, r, err)
		}
	}
	u, err := SessionRule("Bash(git:*)")
	if err != nil || u.Type != "addRules" || u.Destination != "session" || u.Behavior != "allow" || u.Rules[0].ToolName != "Bash" {
		t.Errorf("SessionRule: %+v %v", u, err)
	}
}
