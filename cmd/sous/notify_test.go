package main

import (
	"encoding/json"
	"net"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/seed5ad92d46/sous/internal/testutil"
)

// newHookServer is a webhook for --notify; hold makes it never answer
// (until the test ends).
func newHookServer(t *testing.T, hold bool) *testutil.Webhook {
	t.Helper()
	if !hold {
		return testutil.NewWebhook(t, nil)
	}
	release := make(chan struct{})
	h := testutil.NewWebhook(t, func(w http.ResponseWriter, r *http.Request) bool {
		select {
		case <-release:
		case <-r.Context().Done():
		}
		return false
	})
	t.Cleanup(func() { close(release) }) // before the server closes: cleanups run last first
	return h
}

// TestRunNotifyEnd: a run that finishes POSTs one "end" notification to
// each --notify URL, by the time sous exits, with the run (its args), the
// recipe and how it ended.
func TestRunNotifyEnd(t *testing.T) {
	t.Parallel()
	a, b := newHookServer(t, false), newHookServer(t, false)
	o, dir := runStar(t, "print(\"hi\")\nrun(\"true\")\n", "--notify", a.URL+"/hook?k=1", "--notify", b.URL)
	o.expect(t, 0, "hi")
	for _, h := range []*testutil.Webhook{a, b} {
		got := h.Payloads()
		if len(got) != 1 {
			t.Fatalf("%s got %d notifications, want 1: %v", h.URL, len(got), got)
		}
		p := got[0]
		run, _ := p["run"].(map[string]any)
		end, _ := p["end"].(map[string]any)
		args, _ := run["args"].(map[string]any)
		if p["event"] != "end" || !strings.HasSuffix(p["recipe"].(string), "main.star") || args["dir"] != dir ||
			run["id"] == "" || end["status"] != "ok" || end["exit_code"] != 0.0 || end["processes"] != 1.0 ||
			!strings.Contains(p["text"].(string), "main.star finished") {
			t.Errorf("notification %v", p)
		}
	}
	if a.Payloads()[0]["run"].(map[string]any)["id"] != b.Payloads()[0]["run"].(map[string]any)["id"] {
		t.Error("the two URLs were told of different runs")
	}
}

// TestRunNotifyFailed: a failed run POSTs one "failed" notification (no
// "end" after it) with the error and the recipe line.
func TestRunNotifyFailed(t *testing.T) {
	t.Parallel()
	h := newHookServer(t, false)
	o, _ := runStar(t, "print(\"hi\")\nfail(\"boom\")\n", "--notify", h.URL)
	o.expect(t, 1, "boom")
	got := h.Payloads()
	if len(got) != 1 {
		t.Fatalf("got %d notifications, want 1: %v", len(got), got)
	}
	end, _ := got[0]["end"].(map[string]any)
	if got[0]["event"] != "failed" || end["status"] != "failed" || end["exit_code"] != 1.0 ||
		!strings.Contains(end["error"].(string), "boom") || end["line"] != 2.0 {
		t.Errorf("notification %v", got[0])
	}
	// A recipe that does not compile is refused: "failed" too, status
	// "error".
	h = newHookServer(t, false)
	o, _ = runStar(t, "x = (\n", "--notify", h.URL)
	o.expect(t, 2)
	if got := h.Payloads(); len(got) != 1 || got[0]["event"] != "failed" || got[0]["end"].(map[string]any)["status"] != "error" {
		t.Errorf("notifications of a refused recipe: %v", got)
	}
}

// TestRunNotifyRedacts: what the recipe redact()s is not in the
// notification, though the secret came in an arg (sent with the run) and
// is in the error.
func TestRunNotifyRedacts(t *testing.T) {
	t.Parallel()
	h := newHookServer(t, false)
	o, _ := runStar(t, "redact(args[\"token\"])\nfail(\"rejected \" + args[\"token\"])\n", "-a", "token=tok-77c1e0", "--notify", h.URL)
	o.expect(t, 1, "rejected ***")
	got := h.Payloads()
	if len(got) != 1 {
		t.Fatalf("got %d notifications, want 1", len(got))
	}
	b, _ := json.Marshal(got[0])
	if strings.Contains(string(b), "tok-77c1e0") || !strings.Contains(string(b), `"token":"***"`) {
		t.Errorf("the notification shows the secret or not its marker: %s", b)
	}
}

// TestRunNotifyNeverBlocks: a server that never answers holds the run up
// by no more than --notify-timeout at its end, and a URL where nothing
// listens not at all; neither fails the run (in --json mode too, where
// the note goes to stderr and stdout stays the events).
func TestRunNotifyNeverBlocks(t *testing.T) {
	t.Parallel()
	t.Run("no answer", func(t *testing.T) {
		t.Parallel()
		h := newHookServer(t, true)
		start := time.Now()
		o, _ := runStar(t, "run(\"true\")\n", "--notify", h.URL+"/secret", "--notify-timeout", "1")
		d := time.Since(start)
		o.expect(t, 0, "sous: --notify "+h.URL+": 1 of 1 notifications not delivered")
		if d > 2500*time.Millisecond {
			t.Errorf("the run took %s with a 1s --notify-timeout", d)
		}
		if strings.Contains(o.stderr, "secret") {
			t.Errorf("stderr shows the URL's path:\n%s", o.stderr)
		}
	})
	t.Run("unreachable", func(t *testing.T) {
		t.Parallel()
		l, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			t.Fatal(err)
		}
		url := "http://" + l.Addr().String()
		l.Close()
		start := time.Now()
		o, _ := runStar(t, "run(\"true\")\n", "--notify", url+"/hook", "--json")
		o.expect(t, 0, "sous: --notify "+url+": 1 of 1 notifications not delivered (last: ")
		if d := time.Since(start); d > 2500*time.Millisecond {
			t.Errorf("the run took %s", d)
		}
		ev := o.events(t)
		if last := ev[len(ev)-1]; last["event"] != "end" || last["status"] != "ok" {
			t.Errorf("the last event %v, want end ok", last)
		}
	})
}

// TestRunNotifyBadURL: a --notify URL that is not http or https is a
// usage error before anything runs.
func TestRunNotifyBadURL(t *testing.T) {
	t.Parallel()
	o, _ := runStar(t, "print(\"ran\")\n", "--notify", "ftp://example.com/x")
	o.expect(t, 2, `sous: --notify "ftp://example.com/x": want an http:// or https:// URL`)
	if strings.Contains(o.stderr, "ran") {
		t.Error("the recipe ran")
	}
	o, _ = runStar(t, "print(\"ran\")\n", "--notify-timeout", "0")
	o.expect(t, 2, "sous: --notify-timeout 0s: want more than 0")
}
