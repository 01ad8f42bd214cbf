package builtins

import (
	"context"
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/seed5ad92d46/sous/daemon/wire"
	"github.com/seed5ad92d46/sous/internal/daemontest"
	"github.com/seed5ad92d46/sous/internal/testutil"
	"github.com/seed5ad92d46/sous/runtime"
	"github.com/seed5ad92d46/sous/runtime/event"
)

// TestSteerAnswersPrivilegedRequests: with Options.UI (a page can answer)
// a privileged command nobody's rule decided waits for a person on the
// run's loop; Options.Steer sees the run's events from the first and
// answers through the run's queue (the embedded daemon's): the first
// request allowed, the second denied with the page's message. A second
// answer is refused as decided, an unknown id as unknown. The third
// request is answered only once those second answers came back: the run
// waits for it, so it cannot end (and close the queue) before them.
func TestSteerAnswersPrivilegedRequests(t *testing.T) {
	t.Parallel()
	if os.Geteuid() != 0 {
		t.Skip("an allowed privileged command runs under sudo -n unless sous is root")
	}
	dir := testutil.WriteTree(t, map[string]string{"main.star": `
r = run("id", ["-u"], privileged=True, reason="check", check=False, echo=False)
print("first:", r.status, r.stdout.strip())
r = run("id", ["-u"], privileged=True, check=False, echo=False)
print("second:", r.status)
r = run("id", ["-u"], privileged=True, check=False, echo=False)
print("third:", r.status)
`})
	var (
		mu      sync.Mutex
		first   event.Event
		pending []string
		errs    = make(chan error, 4)
		twice   sync.WaitGroup // the first two requests answered twice
	)
	twice.Add(2)
	steer := func(bus *event.Bus, answer func(context.Context, wire.AskAnswer) error) error {
		bus.Subscribe(event.SinkFunc(func(_ time.Time, e event.Event) {
			mu.Lock()
			defer mu.Unlock()
			if first == nil {
				first = e
			}
			p, ok := e.(*event.Pending)
			if !ok || p.ID == "" {
				return
			}
			pending = append(pending, p.ID)
			ans := wire.AskAnswer{ID: p.ID, Decision: wire.DecisionAllow}
			switch len(pending) {
			case 2:
				ans = wire.AskAnswer{ID: p.ID, Decision: wire.DecisionDeny, Message: "not twice"}
			case 3:
				go func() {
					twice.Wait()
					errs <- answer(context.Background(), ans)
				}()
				return
			}
			// Not in Handle: the answer's decision is published on this bus.
			go func() {
				ctx := context.Background()
				err := answer(ctx, ans)
				if err == nil {
					if err = answer(ctx, ans); !isCode(err, wire.CodeApprovalDecided) {
						err = errors.New("a second answer was not refused as decided: " + errString(err))
					} else {
						err = nil
					}
				}
				errs <- err
				twice.Done()
			}()
		}))
		ctx := context.Background()
		if err := answer(ctx, wire.AskAnswer{ID: "nosuchid", Decision: wire.DecisionAllow}); !isCode(err, wire.CodeApprovalUnknown) {
			t.Errorf("an unknown id: %v", err)
		}
		return nil
	}
	var stdout, stderr testutil.SyncBuffer
	err := runtime.Run(context.Background(), runtime.Options{
		Recipe: filepath.Join(dir, "main.star"), Stdout: &stdout, Stderr: &stderr, JSON: true,
		Table: DefaultTable(), Host: daemontest.EmbeddedTarget(), UI: true, Steer: steer,
	})
	if err != nil {
		t.Fatalf("%v\n%s", err, stderr.String())
	}
	for range 3 {
		if err := <-errs; err != nil {
			t.Error(err)
		}
	}
	if _, ok := first.(*event.Start); !ok {
		t.Errorf("Steer's sink saw %T first, want the start event", first)
	}
	var logs, approvals []string
	for _, l := range strings.Split(strings.TrimSpace(stdout.String()), "\n") {
		var m map[string]any
		if err := json.Unmarshal([]byte(l), &m); err != nil {
			t.Fatal(err)
		}
		switch m["event"] {
		case "log":
			logs = append(logs, m["text"].(string))
		case "approval":
			approvals = append(approvals, m["decision"].(string)+" "+m["by"].(string)+" "+m["id"].(string)+" "+textOf(m["message"]))
		}
	}
	if want := "first: ok 0|second: denied|third: ok"; strings.Join(logs, "|") != want {
		t.Errorf("logs %q, want %q", logs, want)
	}
	if len(pending) != 3 {
		t.Fatalf("pending ids %v", pending)
	}
	if want := "allow remote " + pending[0] + " |deny remote " + pending[1] + " not twice|allow remote " + pending[2] + " "; strings.Join(approvals, "|") != want {
		t.Errorf("approvals %q, want %q", approvals, want)
	}
}

func isCode(err error, code int) bool {
	var we *wire.Error
	return errors.As(err, &we) && we.Code == code
}

func errString(err error) string {
	if err == nil {
		return "nil"
	}
	return err.Error()
}

func textOf(v any) string {
	s, _ := v.(string)
	return s
}
