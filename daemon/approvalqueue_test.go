package daemon

import (
	"encoding/json"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/seed5ad92d46/sous/daemon/wire"
)

// One connection publishes and waits, as a run does; another lists and
// answers, as `sous approvals` does. The first answer wins, a second is
// refused saying who decided, and the waiter hears the first.
func TestApprovalQueueOverSocket(t *testing.T) {
	t.Parallel()
	d := startDaemon(t, Config{})
	run, other := d.dial(), d.dial()
	if caps := run.result("server.capabilities", ""); !strings.Contains(caps, `"approval.queue"`) || !strings.Contains(caps, `"approval.answer"`) {
		t.Fatalf("capabilities do not advertise the queue: %s", caps)
	}
	run.wantResult("approval.publish", `{"id":"a1","run":"r1","kind":"tool","session":"s1","tool":"Bash","summary":"rm -rf x","input":{"command":"rm -rf x"},"since":"2026-11-26T10:00:00Z"}`, `{"success":true}`)
	run.wantResult("approval.publish", `{"id":"a1","run":"r1","kind":"tool","tool":"Bash"}`, `{"success":true}`) // a resend
	other.wantError("approval.publish", `{"id":"a1","run":"r2","tool":"Bash"}`, wire.CodeInvalidParams, `approval.publish: id "a1" is taken by another run`)
	other.wantResult("approval.list", "", `{"approvals":[{"id":"a1","run":"r1","kind":"tool","session":"s1","tool":"Bash","summary":"rm -rf x","input":{"command":"rm -rf x"},"since":"2026-11-26T10:00:00Z"}]}`)

	waitID := run.sendRequest("approval.wait", `{"ids":["a1"],"timeout_ms":10000}`)
	time.Sleep(50 * time.Millisecond) // the wait is parked
	other.wantResult("approval.answer", `{"id":"a1","decision":"deny","message":"not here"}`, `{"success":true}`)
	other.wantError("approval.answer", `{"id":"a1","decision":"allow"}`, wire.CodeApprovalDecided, "request a1 was decided already: denied by remote")
	var got struct {
		Result wire.AskWaitResult
	}
	if err := json.Unmarshal(run.respFor(strconv.Itoa(waitID)), &got); err != nil {
		t.Fatal(err)
	}
	if want := (wire.AskAnswer{ID: "a1", Decision: "deny", Message: "not here", By: "remote"}); len(got.Result.Decided) != 1 || got.Result.Decided[0] != want {
		t.Fatalf("wait = %+v, want %+v", got.Result.Decided, want)
	}
	other.wantResult("approval.list", "", `{"approvals":[]}`)
	run.wantResult("approval.withdraw", `{"ids":["a1"]}`, `{"success":true}`)
	other.wantError("approval.answer", `{"id":"zz","decision":"deny"}`, wire.CodeApprovalUnknown, `no pending request "zz" (answered and gone, or never asked)`)
	other.wantError("approval.answer", `{"id":"a1","decision":"perhaps"}`, wire.CodeInvalidParams, `approval.answer: decision must be "allow" or "deny"`)
	run.wantResult("approval.wait", `{"ids":["nothing"],"timeout_ms":1}`, `{"decided":[]}`)
}

func TestApprovalQueueDisabled(t *testing.T) {
	t.Parallel()
	d := startDaemon(t, Config{DisableFeatures: []string{wire.FeatureApprovalQueue}})
	c := d.dial()
	caps := c.result("server.capabilities", "")
	for _, m := range wire.ApprovalMethods {
		if strings.Contains(caps, `"`+m+`"`) {
			t.Errorf("capabilities list %s: %s", m, caps)
		}
		c.wantError(m, `{"ids":[]}`, wire.CodeMethodNotFound, "Unknown method: "+m)
	}
}
