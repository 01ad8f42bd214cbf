package runtime

import (
	"fmt"
	"os"
	"strings"

	"github.com/google/uuid"

	"github.com/seed5ad92d46/sous/runtime/notify"
)

// startNotify subscribes the run's notifications (sous run --notify) to
// out's bus, before the start event. The function it returns, called once
// the end event went out, waits a bounded time for the last notifications
// and reports on stderr those that did not get through: a notification
// never fails the run.
func startNotify(opt Options, out *output) (finish func()) {
	if len(opt.Notify.URLs) == 0 {
		return func() {}
	}
	n, err := notify.New(opt.Notify)
	if err != nil {
		out.Error("sous: --notify " + err.Error())
		return func() {}
	}
	id := opt.RunID
	if id == "" {
		id = uuid.NewString()
	}
	host, _ := os.Hostname()
	out.bus.Subscribe(notify.NewSink(n, notify.Run{ID: id, Host: host, PID: os.Getpid()}, out.bus))
	return func() {
		for _, r := range n.Close() {
			if !r.OK() {
				out.Error("sous: --notify " + r.URL + ": " + notifyProblem(r))
			}
		}
	}
}

// notifyProblem says in one line what did not reach a URL.
func notifyProblem(r notify.Report) string {
	var parts []string
	if r.Failed > 0 {
		parts = append(parts, fmt.Sprintf("%d of %d notifications not delivered (last: %v)", r.Failed, r.Sent+r.Failed+r.Dropped, r.LastErr))
	}
	if r.Dropped > 0 {
		parts = append(parts, fmt.Sprintf("%d dropped: the queue was full", r.Dropped))
	}
	return strings.Join(parts, "; ")
}
