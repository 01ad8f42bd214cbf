package notify

import (
	"encoding/json"
	"net"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/seed5ad92d46/sous/internal/testutil"
	"github.com/seed5ad92d46/sous/runtime/event"
)

// TestSinkNotifies: on a real bus, a request decided without asking (no
// id) is not notified; one that waits for a person is, with its id,
// session, tool and summary; the end of the run is one "end" (ok) or one
// "failed" notification, with the run, the recipe and how it ended. Every
// URL gets every notification, in order, as JSON.
func TestSinkNotifies(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		end       *event.End
		wantEvent string
	}{
		{&event.End{Status: "ok"}, "end"},
		{&event.End{Status: "failed", ExitCode: 1, Error: "boom", File: "/w/r.star", Line: 7}, "failed"},
		{&event.End{Status: "interrupted", ExitCode: 130, Error: "interrupted"}, "failed"},
	} {
		t.Run(tc.end.Status, func(t *testing.T) {
			t.Parallel()
			a, b := testutil.NewWebhook(t, nil), testutil.NewWebhook(t, nil)
			n, err := New(Options{URLs: []string{a.URL + "/hook", b.URL}, Timeout: 5 * time.Second, UserAgent: "sous/test"})
			if err != nil {
				t.Fatal(err)
			}
			bus := event.New(nil)
			bus.Subscribe(NewSink(n, Run{ID: "run-1", Host: "box", PID: 42}, bus))
			bus.Publish(&event.Start{Recipe: "/w/r.star", Args: map[string]string{"k": "v"}})
			bus.Publish(&event.Pending{Approval: event.Approval{Kind: "tool", Session: "s1", Tool: "Read", ToolUseID: "t0", Summary: "/etc/hosts"}})
			bus.Publish(&event.Approval{Kind: "tool", Session: "s1", Tool: "Read", ToolUseID: "t0", Allow: true, By: "flag"})
			bus.Publish(&event.Pending{Approval: event.Approval{ID: "req-7", Kind: "tool", Session: "s1", Tool: "Bash", ToolUseID: "t1",
				Summary: "rm -rf build"}})
			bus.Publish(tc.end)
			if reports := n.Close(); len(reports) != 2 || !reports[0].OK() || !reports[1].OK() || reports[0].Sent != 2 {
				t.Fatalf("reports %+v, want 2 sent to each", reports)
			}
			for _, rc := range []*testutil.Webhook{a, b} {
				got := rc.Payloads()
				if len(got) != 2 {
					t.Fatalf("%s got %d notifications, want 2: %v", rc.URL, len(got), got)
				}
				ap, end := got[0], got[1]
				run, _ := ap["run"].(map[string]any)
				appr, _ := ap["approval"].(map[string]any)
				if ap["event"] != "approval" || ap["recipe"] != "/w/r.star" || run["id"] != "run-1" || run["host"] != "box" ||
					run["pid"] != 42.0 || run["args"].(map[string]any)["k"] != "v" || appr["id"] != "req-7" || appr["session"] != "s1" ||
					appr["tool"] != "Bash" || appr["summary"] != "rm -rf build" || !strings.Contains(ap["text"].(string), "req-7") {
					t.Errorf("approval notification %v", ap)
				}
				e, _ := end["end"].(map[string]any)
				if end["event"] != tc.wantEvent || e["status"] != tc.end.Status || e["exit_code"] != float64(tc.end.ExitCode) ||
					end["run"].(map[string]any)["id"] != "run-1" {
					t.Errorf("end notification %v, want %s", end, tc.wantEvent)
				}
				if tc.end.Error != "" && (e["error"] != tc.end.Error || !strings.Contains(end["text"].(string), tc.end.Error)) {
					t.Errorf("end notification %v lacks the error %q", end, tc.end.Error)
				}
				if h := rc.Headers()[0]; h.Get("Content-Type") != "application/json" || h.Get("User-Agent") != "sous/test" {
					t.Errorf("headers %v", h)
				}
			}
		})
	}
}

// TestSinkRedacts: a secret registered after the start event (as a
// recipe's redact(args["token"]) does) is in no notification: not in the
// run's args, which came with the start event, nor in the request's
// summary, the error or the text.
func TestSinkRedacts(t *testing.T) {
	t.Parallel()
	rc := testutil.NewWebhook(t, nil)
	n, err := New(Options{URLs: []string{rc.URL}})
	if err != nil {
		t.Fatal(err)
	}
	const secret = "tok-3f9a1c"
	bus := event.New(nil)
	bus.Subscribe(NewSink(n, Run{ID: "r"}, bus))
	bus.Publish(&event.Start{Recipe: "/w/r.star", Args: map[string]string{"token": secret, "repo": "."}})
	bus.Redact(secret)
	bus.Publish(&event.Pending{Approval: event.Approval{ID: "req-1", Kind: "tool", Tool: "Bash", Summary: "curl -H " + secret}})
	bus.Publish(&event.End{Status: "failed", ExitCode: 1, Error: "bad token " + secret})
	n.Close()
	got := rc.Payloads()
	if len(got) != 2 {
		t.Fatalf("got %d notifications, want 2", len(got))
	}
	for _, p := range got {
		b, _ := json.Marshal(p)
		if strings.Contains(string(b), secret) || !strings.Contains(string(b), "***") {
			t.Errorf("notification with the secret or without its marker: %s", b)
		}
		if p["run"].(map[string]any)["args"].(map[string]any)["repo"] != "." {
			t.Errorf("an arg that is no secret changed: %s", b)
		}
	}
}

// TestSendNeverBlocks: against a server that never answers, Send returns
// at once however many are sent, those past the queue are dropped and
// counted, and Close gives up after the timeout, counting what was not
// sent; the report does not show the URL's path (a webhook's secret).
func TestSendNeverBlocks(t *testing.T) {
	t.Parallel()
	release := make(chan struct{})
	defer close(release)
	rc := testutil.NewWebhook(t, func(w http.ResponseWriter, r *http.Request) bool {
		select {
		case <-release:
		case <-r.Context().Done():
		}
		return false
	})
	n, err := New(Options{URLs: []string{rc.URL + "/secret-token"}, Timeout: 300 * time.Millisecond, Queue: 2})
	if err != nil {
		t.Fatal(err)
	}
	start := time.Now()
	for range 10 {
		n.Send([]byte(`{"event":"end"}`))
	}
	if d := time.Since(start); d > 100*time.Millisecond {
		t.Errorf("10 sends took %s", d)
	}
	reports := n.Close()
	if d := time.Since(start); d > 2*time.Second {
		t.Errorf("Close returned after %s, want about the 300ms timeout", d)
	}
	r := reports[0]
	if r.Sent != 0 || r.Failed+r.Dropped != 10 || r.Dropped < 7 || r.LastErr == nil || strings.Contains(r.URL, "secret") {
		t.Errorf("report %+v (%v), want nothing sent, 7 or more dropped, the rest failed, no path", r, r.LastErr)
	}
}

// TestUnreachable: a URL where nothing listens fails at once; the report
// says so without the URL's path.
func TestUnreachable(t *testing.T) {
	t.Parallel()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := l.Addr().String()
	l.Close()
	n, err := New(Options{URLs: []string{"http://" + addr + "/token"}, Timeout: 5 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	n.Send([]byte(`{}`))
	start := time.Now()
	r := n.Close()[0]
	if time.Since(start) > 2*time.Second || r.Failed != 1 || r.LastErr == nil || strings.Contains(r.LastErr.Error(), "/token") {
		t.Errorf("report %+v (%v) after %s", r, r.LastErr, time.Since(start))
	}
}

// TestRedirects: a 307 to the same host is followed with the payload; a
// 307 to another host and a 302 are not (the other host gets nothing),
// and count as failures saying why.
func TestRedirects(t *testing.T) {
	t.Parallel()
	other := testutil.NewWebhook(t, nil)
	rc := testutil.NewWebhook(t, func(w http.ResponseWriter, r *http.Request) bool {
		switch r.URL.Path {
		case "/same":
			http.Redirect(w, r, "/final", http.StatusTemporaryRedirect)
			return false
		case "/away":
			http.Redirect(w, r, other.URL+"/stolen", http.StatusTemporaryRedirect)
			return false
		case "/found":
			http.Redirect(w, r, "/final", http.StatusFound)
			return false
		}
		return true
	})
	n, err := New(Options{URLs: []string{rc.URL + "/same", rc.URL + "/away", rc.URL + "/found"}, Timeout: 5 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	n.Send([]byte(`{"event":"end"}`))
	reports := n.Close()
	if r := reports[0]; !r.OK() || r.Sent != 1 {
		t.Errorf("same-host 307: %+v", r)
	}
	if got := rc.Payloads(); len(got) != 1 || got[0]["event"] != "end" {
		t.Errorf("the final URL got %v, want the payload once", got)
	}
	if r := reports[1]; r.Failed != 1 || r.LastErr == nil || !strings.Contains(r.LastErr.Error(), "another host") {
		t.Errorf("307 elsewhere: %+v (%v)", r, r.LastErr)
	}
	if r := reports[2]; r.Failed != 1 || r.LastErr == nil || !strings.Contains(r.LastErr.Error(), "HTTP 302") {
		t.Errorf("302: %+v (%v)", r, r.LastErr)
	}
	if got := other.Payloads(); len(got) != 0 {
		t.Errorf("the other host got %v", got)
	}
}

// TestParseURL: only absolute http and https URLs.
func TestParseURL(t *testing.T) {
	for _, ok := range []string{"http://127.0.0.1:8080/hook", "https://hooks.example.com/services/T/B/x"} {
		if _, err := ParseURL(ok); err != nil {
			t.Errorf("%s: %v", ok, err)
		}
	}
	for _, bad := range []string{"ftp://x/y", "hooks.example.com/x", "http://", "/path", "http://[::1"} {
		if _, err := ParseURL(bad); err == nil {
			t.Errorf("%s: accepted", bad)
		}
	}
}
