package approvals

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/seed5ad92d46/sous/daemon/wire"
)

func code(err error) int {
	var we *wire.Error
	if errors.As(err, &we) {
		return we.Code
	}
	return 0
}

func TestFirstAnswerWins(t *testing.T) {
	q := New(nil, 0)
	if err := q.Publish(wire.Ask{ID: "a1", Run: "r", Tool: "Bash", Summary: "ls"}); err != nil {
		t.Fatal(err)
	}
	if p := q.Pending(); len(p) != 1 || p[0].ID != "a1" || p[0].Since.IsZero() {
		t.Fatalf("pending = %+v", p)
	}
	if err := q.Answer(wire.AskAnswer{ID: "a1", Decision: "deny", Message: "no", By: "remote"}); err != nil {
		t.Fatal(err)
	}
	err := q.Answer(wire.AskAnswer{ID: "a1", Decision: "allow", By: "prompt"})
	if code(err) != wire.CodeApprovalDecided || err.Error() == "" {
		t.Fatalf("second answer: %v", err)
	}
	if want := "request a1 was decided already: denied by remote"; err.(*wire.Error).Message != want {
		t.Fatalf("message %q, want %q", err.(*wire.Error).Message, want)
	}
	got := q.Wait(context.Background(), []string{"a1"}, time.Second)
	if len(got) != 1 || got[0].Decision != "deny" || got[0].Message != "no" || got[0].By != "remote" {
		t.Fatalf("wait = %+v", got)
	}
	if len(q.Pending()) != 0 {
		t.Fatal("decided request still pending")
	}
	if err := q.Answer(wire.AskAnswer{ID: "nope", Decision: "deny"}); code(err) != wire.CodeApprovalUnknown {
		t.Fatalf("unknown id: %v", err)
	}
	if err := q.Answer(wire.AskAnswer{ID: "a1", Decision: "maybe"}); code(err) != wire.CodeInvalidParams {
		t.Fatalf("bad decision: %v", err)
	}
}

func TestPublishIDOfAnotherRun(t *testing.T) {
	q := New(nil, 0)
	if err := q.Publish(wire.Ask{ID: "x", Run: "r1"}); err != nil {
		t.Fatal(err)
	}
	if err := q.Publish(wire.Ask{ID: "x", Run: "r1"}); err != nil {
		t.Fatalf("republish by the same run: %v", err)
	}
	if err := q.Publish(wire.Ask{ID: "x", Run: "r2"}); code(err) != wire.CodeInvalidParams {
		t.Fatalf("publish of a taken id: %v", err)
	}
	if err := q.Publish(wire.Ask{ID: "", Run: "r2"}); code(err) != wire.CodeInvalidParams {
		t.Fatalf("publish without id: %v", err)
	}
}

// Many answerers race for many requests: each request is decided exactly
// once, and its waiter sees that one decision.
func TestConcurrentAnswersExactlyOnce(t *testing.T) {
	q := New(nil, 0)
	const n = 50
	for i := range n {
		if err := q.Publish(wire.Ask{ID: fmt.Sprint("a", i), Run: "r"}); err != nil {
			t.Fatal(err)
		}
	}
	var wins atomic.Int64
	winner := make([]atomic.Int64, n)
	var wg sync.WaitGroup
	for who := range 4 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range n {
				if q.Answer(wire.AskAnswer{ID: fmt.Sprint("a", i), Decision: "allow", By: fmt.Sprint(who)}) == nil {
					wins.Add(1)
					winner[i].Store(int64(who))
				}
			}
		}()
	}
	waited := make(chan []wire.AskAnswer, n)
	for i := range n {
		go func() { waited <- q.Wait(context.Background(), []string{fmt.Sprint("a", i)}, 5*time.Second) }()
	}
	wg.Wait()
	if wins.Load() != n {
		t.Fatalf("%d answers won for %d requests", wins.Load(), n)
	}
	for range n {
		got := <-waited
		if len(got) != 1 {
			t.Fatalf("wait = %+v", got)
		}
		var i int
		fmt.Sscanf(got[0].ID, "a%d", &i)
		if got[0].By != fmt.Sprint(winner[i].Load()) {
			t.Fatalf("%s: waiter saw %q, winner was %d", got[0].ID, got[0].By, winner[i].Load())
		}
	}
}

func TestWaitTimesOutAndWakesOnAnswer(t *testing.T) {
	q := New(nil, 0)
	q.Publish(wire.Ask{ID: "a", Run: "r"})
	start := time.Now()
	if got := q.Wait(context.Background(), []string{"a"}, 50*time.Millisecond); got != nil || time.Since(start) < 50*time.Millisecond {
		t.Fatalf("wait without answer: %+v after %v", got, time.Since(start))
	}
	go func() {
		time.Sleep(20 * time.Millisecond)
		q.Answer(wire.AskAnswer{ID: "a", Decision: "allow", By: "remote"})
	}()
	if got := q.Wait(context.Background(), []string{"a"}, 5*time.Second); len(got) != 1 || got[0].Decision != "allow" {
		t.Fatalf("wait = %+v", got)
	}
	start = time.Now()
	if got := q.Wait(context.Background(), nil, 5*time.Second); got != nil || time.Since(start) > time.Second {
		t.Fatalf("a wait for no ids: %+v after %v", got, time.Since(start))
	}
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	q.Publish(wire.Ask{ID: "b", Run: "r"})
	if got := q.Wait(ctx, []string{"b"}, time.Second); got != nil {
		t.Fatalf("cancelled wait = %+v", got)
	}
}

func TestWithdrawnAndForgotten(t *testing.T) {
	now := time.Unix(1000, 0)
	clock := func() time.Time { return now }
	q := New(clock, time.Minute)
	q.Publish(wire.Ask{ID: "w", Run: "r"})
	q.Publish(wire.Ask{ID: "gone", Run: "r"})
	q.Withdraw([]string{"w"})
	if err := q.Answer(wire.AskAnswer{ID: "w", Decision: "allow"}); code(err) != wire.CodeApprovalDecided || !contains(err.Error(), "withdrawn by its run") {
		t.Fatalf("answer after withdraw: %v", err)
	}
	now = now.Add(2 * time.Minute) // nobody waited for "gone"
	if p := q.Pending(); len(p) != 0 {
		t.Fatalf("pending after its run went: %+v", p)
	}
	if err := q.Answer(wire.AskAnswer{ID: "gone", Decision: "allow"}); code(err) != wire.CodeApprovalDecided || !contains(err.Error(), "its run is gone") {
		t.Fatalf("answer after the run went: %v", err)
	}
	now = now.Add(keepDecided + time.Second)
	if err := q.Answer(wire.AskAnswer{ID: "w", Decision: "allow"}); code(err) != wire.CodeApprovalUnknown {
		t.Fatalf("answer long after: %v", err)
	}
	if len(q.entries) != 0 {
		t.Fatalf("%d entries kept", len(q.entries))
	}
}

func TestWaitKeepsRequestAlive(t *testing.T) {
	now := time.Unix(1000, 0)
	q := New(func() time.Time { return now }, time.Minute)
	q.Publish(wire.Ask{ID: "a", Run: "r"})
	for range 5 {
		now = now.Add(40 * time.Second)
		q.Wait(context.Background(), []string{"a"}, time.Millisecond)
	}
	if p := q.Pending(); len(p) != 1 {
		t.Fatalf("a request its run waits for was dropped: %+v", p)
	}
}

func contains(s, sub string) bool { return strings.Contains(s, sub) }
