package runtime

import (
	"context"
	"fmt"
	"io"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/seed5ad92d46/sous/daemon/wire"
	"github.com/seed5ad92d46/sous/runtime/event"
)

// queued is what the approver's queue (one in sous: no daemon here) holds
// pending now.
func queued(a *approver) []wire.Ask {
	a.mu.Lock()
	q := a.queue
	a.mu.Unlock()
	if q == nil {
		return nil
	}
	return q.(localQueue).q.Pending()
}

// waitQueued waits until n requests are pending.
func waitQueued(t *testing.T, a *approver, n int) []wire.Ask {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for {
		if p := queued(a); len(p) >= n {
			return p
		}
		if time.Now().After(deadline) {
			t.Fatalf("%d pending, want %d", len(queued(a)), n)
		}
		time.Sleep(5 * time.Millisecond)
	}
}

// waitFor polls cond for up to 10 s.
func waitFor(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
		time.Sleep(5 * time.Millisecond)
	}
}

// startWaiting asks the approver about req as a session does: Approve,
// then Wait on a goroutine of its own. The answer arrives on the channel.
func startWaiting(t *testing.T, a *approver, req *ApprovalRequest) <-chan Answer {
	t.Helper()
	ans, w := a.Approve(req)
	out := make(chan Answer, 1)
	if w == nil {
		out <- ans
		return out
	}
	if w.ID() == "" || w.ID() != req.ID {
		t.Fatalf("waiting without an id: %q %q", w.ID(), req.ID)
	}
	go func() { out <- w.Wait(context.Background(), nil) }()
	return out
}

func recv(t *testing.T, ch <-chan Answer) Answer {
	t.Helper()
	select {
	case a := <-ch:
		return a
	case <-time.After(10 * time.Second):
		t.Fatal("no answer")
		return Answer{}
	}
}

// TestAsksWaitTogether: twenty requests wait for a person at once, each
// with an id of its own; answered in the reverse order through the queue
// (as the web page does), each gets its own answer, by "remote", and
// nothing stays pending.
func TestAsksWaitTogether(t *testing.T) {
	t.Parallel()
	a := &approver{ctx: context.Background(), ui: true}
	const n = 20
	answers := make([]<-chan Answer, n)
	for i := range answers {
		answers[i] = startWaiting(t, a, bashReq(fmt.Sprintf("make target-%d", i)))
	}
	asks := waitQueued(t, a, n)
	ids := map[string]bool{}
	for i := len(asks) - 1; i >= 0; i-- {
		ids[asks[i].ID] = true
		if len(asks[i].ID) != 8 || asks[i].Run == "" || asks[i].Tool != "Bash" {
			t.Errorf("published %+v", asks[i])
		}
		k := strings.TrimPrefix(asks[i].Input["command"].(string), "make target-")
		ans := wire.AskAnswer{ID: asks[i].ID, Decision: "deny", Message: "not " + k}
		if k == "7" {
			ans = wire.AskAnswer{ID: asks[i].ID, Decision: "allow"}
		}
		if err := a.answer(context.Background(), ans); err != nil {
			t.Fatal(err)
		}
	}
	if len(ids) != n {
		t.Errorf("%d distinct ids for %d requests", len(ids), n)
	}
	for i, ch := range answers {
		got := recv(t, ch)
		want := Answer{Message: fmt.Sprintf("not %d", i), By: ByRemote}
		if i == 7 {
			want = Answer{Allow: true, By: ByRemote}
		}
		if got.Allow != want.Allow || got.Message != want.Message || got.By != want.By {
			t.Errorf("request %d: %+v, want %+v", i, got, want)
		}
	}
	waitFor(t, "nothing pending", func() bool { return len(queued(a)) == 0 })
	if err := a.answer(context.Background(), wire.AskAnswer{ID: asks[0].ID, Decision: "allow"}); !isCode(err, wire.CodeApprovalDecided) {
		t.Errorf("an answer after the decision: %v", err)
	}
}

func isCode(err error, code int) bool {
	we, ok := err.(*wire.Error)
	return ok && we.Code == code
}

// TestAskTimeoutDenies: --ask-timeout denies by "default", saying so.
func TestAskTimeoutDenies(t *testing.T) {
	t.Parallel()
	a := &approver{ctx: context.Background(), ui: true, timeout: 50 * time.Millisecond}
	start := time.Now()
	got := recv(t, startWaiting(t, a, bashReq("make")))
	if got.Allow || got.By != ByDefault || got.Message != "no answer within 50ms (--ask-timeout): "+DefaultDenyMessage {
		t.Errorf("%+v", got)
	}
	if d := time.Since(start); d < 50*time.Millisecond {
		t.Errorf("denied after %s", d)
	}
}

// TestNobodyToAskDeniesAtOnce: no terminal, no --ask, no --ui: the
// default denies without waiting or publishing. Nor does --ask alone wait
// when the daemon holds no queue (here: there is no daemon), since nobody
// could answer.
func TestNobodyToAskDeniesAtOnce(t *testing.T) {
	t.Parallel()
	a := &approver{ctx: context.Background()}
	ans, w := a.Approve(bashReq("make"))
	if w != nil || ans.Allow || ans.By != ByDefault || ans.Message != DefaultDenyMessage {
		t.Errorf("%+v %v", ans, w)
	}
	a = &approver{ctx: context.Background(), ask: true}
	got := recv(t, startWaiting(t, a, bashReq("make")))
	if got.Allow || got.By != ByDefault || got.Message != DefaultDenyMessage+" (--ask: the default daemon has no approval queue, so nobody could answer)" {
		t.Errorf("--ask without a queue: %+v", got)
	}
	if p := queued(a); len(p) != 0 {
		t.Errorf("published: %+v", p)
	}
}

// pipePrompt is a terminal the test types into.
func pipePrompt(t *testing.T) (*promptBuffer, *io.PipeWriter, *prompter) {
	pr, pw := io.Pipe()
	t.Cleanup(func() { pw.Close() })
	out := &promptBuffer{}
	return out, pw, newPrompter(out, pr)
}

// TestPromptGivesUpWhenDecidedElsewhere: the prompt asks one question at
// a time, oldest first; a remote answer to the request it asks about ends
// the question ("decided elsewhere"), and the next request is asked.
func TestPromptGivesUpWhenDecidedElsewhere(t *testing.T) {
	t.Parallel()
	out, typed, p := pipePrompt(t)
	a := &approver{ctx: context.Background(), prompt: p}
	first := startWaiting(t, a, bashReq("make first"))
	waitQueued(t, a, 1)
	second := startWaiting(t, a, bashReq("make second"))
	asks := waitQueued(t, a, 2)
	waitFor(t, "the first question", func() bool { return strings.Contains(out.String(), "command: make first") })
	if strings.Contains(out.String(), "make second") {
		t.Fatalf("two questions at once:\n%s", out.String())
	}
	if err := a.answer(context.Background(), wire.AskAnswer{ID: asks[0].ID, Decision: "deny", Message: "from the page"}); err != nil {
		t.Fatal(err)
	}
	if got := recv(t, first); got.Allow || got.By != ByRemote || got.Message != "from the page" {
		t.Errorf("first: %+v", got)
	}
	waitFor(t, "the second question", func() bool { return strings.Contains(out.String(), "command: make second") })
	if !strings.Contains(out.String(), "\n  decided elsewhere: denied by remote\n") {
		t.Errorf("the prompt does not say the request was decided elsewhere:\n%s", out.String())
	}
	io.WriteString(typed, "y\n")
	if got := recv(t, second); !got.Allow || got.By != ByPrompt {
		t.Errorf("second: %+v", got)
	}
	waitFor(t, "two questions done", func() bool { return out.doneCount() == 2 })
}

// TestPromptAlwaysAnswersTheOthers: "always" also allows the other
// waiting requests its rule allows, without asking about them, and
// leaves the others to be asked.
func TestPromptAlwaysAnswersTheOthers(t *testing.T) {
	t.Parallel()
	out, typed, p := pipePrompt(t)
	a := &approver{ctx: context.Background(), prompt: p}
	reqs := []string{"go test ./a", "go test ./b", "curl https://x.example"}
	var answers []<-chan Answer
	for i, cmd := range reqs {
		answers = append(answers, startWaiting(t, a, bashReq(cmd)))
		waitQueued(t, a, i+1)
	}
	waitFor(t, "the first question", func() bool { return strings.Contains(out.String(), "[a]lways allow Bash(go test:*)") })
	io.WriteString(typed, "a\n")
	for i := range 2 {
		if got := recv(t, answers[i]); !got.Allow || got.By != ByPrompt {
			t.Errorf("%s: %+v", reqs[i], got)
		}
	}
	waitFor(t, "the curl question", func() bool { return strings.Contains(out.String(), "command: curl") })
	if strings.Contains(out.String(), "go test ./b") {
		t.Errorf("asked about a request always allowed:\n%s", out.String())
	}
	io.WriteString(typed, "n\n")
	if got := recv(t, answers[2]); got.Allow || got.By != ByPrompt {
		t.Errorf("curl: %+v", got)
	}
}

// TestCloseWithdrawsWhatWaits: the end of the run denies what still
// waits and withdraws it from the queue before close returns.
func TestCloseWithdrawsWhatWaits(t *testing.T) {
	t.Parallel()
	a := &approver{ctx: context.Background(), ui: true}
	var answers []<-chan Answer
	for i := range 3 {
		answers = append(answers, startWaiting(t, a, bashReq(fmt.Sprint("make ", i))))
	}
	waitQueued(t, a, 3)
	a.close()
	if p := queued(a); len(p) != 0 {
		t.Errorf("pending after close: %+v", p)
	}
	for _, ch := range answers {
		if got := recv(t, ch); got.Allow || got.Message != "the recipe is stopping" {
			t.Errorf("%+v", got)
		}
	}
	if ans, w := a.Approve(bashReq("make late")); w != nil {
		if got := w.Wait(context.Background(), nil); got.Allow || got.Message != "the recipe is stopping" {
			t.Errorf("after close: %+v", got)
		}
	} else {
		t.Errorf("after close: %+v", ans)
	}
}

// TestAgentWithdrawalEndsTheWait: the agent withdrawing its request (ctx)
// ends the wait and takes the request off the queue.
func TestAgentWithdrawalEndsTheWait(t *testing.T) {
	t.Parallel()
	a := &approver{ctx: context.Background(), ui: true}
	_, w := a.Approve(bashReq("make"))
	ctx, cancel := context.WithCancel(context.Background())
	var wg sync.WaitGroup
	wg.Add(1)
	var got Answer
	go func() { defer wg.Done(); got = w.Wait(ctx, nil) }()
	waitQueued(t, a, 1)
	cancel()
	wg.Wait()
	if got.Allow {
		t.Errorf("%+v", got)
	}
	if p := queued(a); len(p) != 0 {
		t.Errorf("pending after the withdrawal: %+v", p)
	}
}

// TestPublishedRequestsHaveNoSecrets: what the run publishes for anyone
// with the daemon's token to read has the run's secrets redacted, as its
// events have.
func TestPublishedRequestsHaveNoSecrets(t *testing.T) {
	t.Parallel()
	bus := event.New(nil)
	bus.Redact("hunter22")
	a := &approver{ctx: context.Background(), ui: true, bus: bus}
	req := bashReq("curl -u me:hunter22 https://x.example")
	req.Description, req.Summary = "log in with hunter22", "curl -u me:hunter22 https://x.example"
	req.Input["args"] = []any{"hunter22", 3}
	startWaiting(t, a, req)
	got := waitQueued(t, a, 1)[0]
	text := fmt.Sprint(got.Summary, got.Description, got.Input)
	if strings.Contains(text, "hunter22") || !strings.Contains(got.Summary, "me:***") || got.Input["args"].([]any)[1] != 3 {
		t.Errorf("published: %+v", got)
	}
	if req.Input["command"] != "curl -u me:hunter22 https://x.example" {
		t.Errorf("the request itself changed: %v", req.Input)
	}
	a.close()
}
