package webui_test

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/seed5ad92d46/sous/daemon/approvals"
	"github.com/seed5ad92d46/sous/daemon/wire"
	"github.com/seed5ad92d46/sous/runtime"
	"github.com/seed5ad92d46/sous/runtime/event"
	"github.com/seed5ad92d46/sous/webui"
)

func body(t *testing.T, resp *http.Response) string {
	t.Helper()
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

func str(s string) *string { return &s }

// TestAPIToken: every API route wants the token (401 without it or with
// a wrong one, even one that shares its prefix); the page itself does not,
// and every answer carries the security headers.
func TestAPIToken(t *testing.T) {
	p := startRunPage(t, webui.QueueAnswer(approvals.New(nil, 0)))
	for _, auth := range []*string{str(""), str("Bearer wrong"), str("Bearer " + p.token[:len(p.token)-1]),
		str("Basic " + p.token), str(p.token)} {
		for _, r := range [][2]string{{"GET", "/api/state"}, {"GET", "/api/events"}, {"POST", "/api/approvals/x"}, {"GET", "/api/nothing"}} {
			resp := p.request(t, r[0], r[1], `{"decision":"deny"}`, auth)
			b := body(t, resp)
			if resp.StatusCode != 401 || !strings.Contains(b, "token") {
				t.Errorf("%s %s with Authorization %q: %s %s", r[0], r[1], *auth, resp.Status, b)
			}
		}
	}
	resp := p.request(t, "GET", "/api/state", "", nil)
	if b := body(t, resp); resp.StatusCode != 200 || !strings.Contains(b, `"processes":[`) ||
		!strings.Contains(b, `"sessions":[`) || !strings.Contains(b, `"approvals":[`) {
		t.Errorf("with the token: %s %s", resp.Status, b)
	}
	for _, path := range []string{"/", "/app.js", "/app.css"} {
		resp := p.request(t, "GET", path, "", str(""))
		b := body(t, resp)
		h := resp.Header
		if resp.StatusCode != 200 || len(b) == 0 {
			t.Errorf("GET %s without a token: %s", path, resp.Status)
		}
		if csp := h.Get("Content-Security-Policy"); !strings.Contains(csp, "default-src 'self'") || strings.Contains(csp, "unsafe") {
			t.Errorf("GET %s: Content-Security-Policy %q", path, csp)
		}
		if h.Get("X-Content-Type-Options") != "nosniff" || h.Get("Referrer-Policy") != "no-referrer" {
			t.Errorf("GET %s: headers %v", path, h)
		}
	}
	if b := body(t, p.request(t, "GET", "/", "", str(""))); strings.Contains(b, "<script>") || strings.Contains(b, "style=") {
		t.Errorf("the page has inline script or style:\n%s", b)
	}
}

// TestAPICrossOrigin: a request from another origin is refused (403) with
// the right token too, and no answer carries CORS headers; a Host header
// that is not the loopback address (DNS rebinding) is refused.
func TestAPICrossOrigin(t *testing.T) {
	q := approvals.New(nil, 0)
	p := startRunPage(t, webui.QueueAnswer(q))
	q.Publish(wire.Ask{ID: "a1", Run: "r", Tool: "Bash"})
	for _, h := range [][]string{{"Origin", "http://evil.example"}, {"Origin", "null"},
		{"Origin", "http://127.0.0.1:1"}, {"Sec-Fetch-Site", "cross-site"}, {"Sec-Fetch-Site", "same-site"}} {
		for _, r := range [][2]string{{"GET", "/api/state"}, {"GET", "/api/events"}, {"POST", "/api/approvals/a1"}, {"OPTIONS", "/api/state"}} {
			resp := p.request(t, r[0], r[1], `{"decision":"allow"}`, nil, h...)
			b := body(t, resp)
			if resp.StatusCode != 403 {
				t.Errorf("%s %s with %s: %s %s", r[0], r[1], h, resp.Status, b)
			}
			for k := range resp.Header {
				if strings.HasPrefix(k, "Access-Control-") {
					t.Errorf("%s %s with %s: CORS header %s", r[0], r[1], h, k)
				}
			}
		}
	}
	if got := q.Pending(); len(got) != 1 {
		t.Fatalf("a cross-origin POST decided the request: %+v", got)
	}
	resp := p.request(t, "GET", "/api/state", "", nil, "Origin", p.base, "Sec-Fetch-Site", "same-origin")
	if b := body(t, resp); resp.StatusCode != 200 {
		t.Errorf("same origin: %s %s", resp.Status, b)
	}
	_, port, _ := net.SplitHostPort(p.srv.Addr().String())
	for _, host := range []string{"evil.example:" + port, "127.0.0.1.nip.io:" + port} {
		resp := p.request(t, "GET", "/api/state", "", nil, "Host", host)
		if b := body(t, resp); resp.StatusCode != http.StatusMisdirectedRequest {
			t.Errorf("Host %s: %s %s", host, resp.Status, b)
		}
	}
	resp = p.request(t, "GET", "/api/state", "", nil, "Host", "localhost:"+port, "Origin", "http://localhost:"+port)
	if b := body(t, resp); resp.StatusCode != 200 {
		t.Errorf("localhost: %s %s", resp.Status, b)
	}
}

// TestAnswerOnce: the first answer decides (by "remote"); a later one is
// refused with 409 saying who decided; an unknown id is 404; a bad body
// is 400.
func TestAnswerOnce(t *testing.T) {
	q := approvals.New(nil, 0)
	p := startRunPage(t, webui.QueueAnswer(q))
	q.Publish(wire.Ask{ID: "a1", Run: "r", Tool: "Bash"})
	q.Publish(wire.Ask{ID: "a2", Run: "r", Tool: "Bash"})
	resp := p.request(t, "POST", "/api/approvals/a1", `{"decision":"deny","message":"not today"}`, nil)
	if b := body(t, resp); resp.StatusCode != 200 {
		t.Fatalf("first answer: %s %s", resp.Status, b)
	}
	got := q.Wait(context.Background(), []string{"a1"}, time.Second)
	if len(got) != 1 || got[0].Decision != "deny" || got[0].By != "remote" || got[0].Message != "not today" {
		t.Fatalf("the queue has %+v", got)
	}
	resp = p.request(t, "POST", "/api/approvals/a1", `{"decision":"allow"}`, nil)
	if b := body(t, resp); resp.StatusCode != 409 || !strings.Contains(b, "denied by remote") {
		t.Errorf("second answer: %s %s", resp.Status, b)
	}
	q.Answer(wire.AskAnswer{ID: "a2", Decision: "allow", By: "prompt"})
	resp = p.request(t, "POST", "/api/approvals/a2", `{"decision":"deny"}`, nil)
	if b := body(t, resp); resp.StatusCode != 409 || !strings.Contains(b, "allowed at the run's terminal prompt") {
		t.Errorf("after the prompt answered: %s %s", resp.Status, b)
	}
	resp = p.request(t, "POST", "/api/approvals/nope", `{"decision":"deny"}`, nil)
	if b := body(t, resp); resp.StatusCode != 404 {
		t.Errorf("unknown id: %s %s", resp.Status, b)
	}
	for _, bad := range []string{``, `{`, `{"decision":"maybe"}`, `{"decision":"deny","extra":1}`} {
		resp = p.request(t, "POST", "/api/approvals/a1", bad, nil)
		if b := body(t, resp); resp.StatusCode != 400 {
			t.Errorf("body %q: %s %s", bad, resp.Status, b)
		}
	}
}

// TestConcurrentAnswers: 50 requests of 10 sessions wait; two answerers
// per request post at once, with opposite decisions. Each request is
// decided exactly once, by the answer that got 200; the other got 409.
// The page's approvals follow the run's events.
func TestConcurrentAnswers(t *testing.T) {
	q := approvals.New(nil, 0)
	p := startRunPage(t, webui.QueueAnswer(q))
	const n = 50
	var ids []string
	for i := range n {
		id := fmt.Sprintf("req-%02d", i)
		ids = append(ids, id)
		a := event.Approval{ID: id, Kind: "tool", Session: fmt.Sprintf("s%d", i%10), Tool: "Bash",
			ToolUseID: "tu-" + id, Summary: "echo " + id, Input: map[string]any{"command": "echo " + id}}
		if err := q.Publish(wire.Ask{ID: id, Run: "r", Kind: a.Kind, Session: a.Session, Tool: a.Tool, Summary: a.Summary}); err != nil {
			t.Fatal(err)
		}
		p.bus.Publish(&event.Pending{Approval: a})
		if i%10 == 0 {
			p.bus.Publish(&event.Pending{Approval: a}) // published again: still one request
		}
	}
	st := p.state(t)
	if len(st.Approvals) != n || st.Approvals[7].Session != "s7" || st.Approvals[7].Input["command"] != "echo req-07" {
		t.Fatalf("state has %d approvals: %+v", len(st.Approvals), st.Approvals)
	}
	type result struct {
		id, decision string
		code         int
		body         string
	}
	results := make(chan result, 2*n)
	var wg sync.WaitGroup
	for _, id := range ids {
		for _, decision := range []string{"allow", "deny"} {
			wg.Add(1)
			go func() {
				defer wg.Done()
				resp := p.request(t, "POST", "/api/approvals/"+id, `{"decision":"`+decision+`"}`, nil)
				results <- result{id, decision, resp.StatusCode, body(t, resp)}
			}()
		}
	}
	wg.Wait()
	close(results)
	won := map[string]string{}
	for r := range results {
		switch r.code {
		case 200:
			if prev, ok := won[r.id]; ok {
				t.Errorf("%s decided twice: %s and %s", r.id, prev, r.decision)
			}
			won[r.id] = r.decision
		case 409:
			if !strings.Contains(r.body, "by remote") {
				t.Errorf("%s: 409 %s", r.id, r.body)
			}
		default:
			t.Errorf("%s %s: %d %s", r.id, r.decision, r.code, r.body)
		}
	}
	decided := q.Wait(context.Background(), ids, time.Second)
	if len(won) != n || len(decided) != n {
		t.Fatalf("%d answers won, the queue decided %d", len(won), len(decided))
	}
	for _, d := range decided {
		if d.Decision != won[d.ID] || d.By != "remote" {
			t.Errorf("%s: the queue has %s by %s, the API said %s won", d.ID, d.Decision, d.By, won[d.ID])
		}
	}
	// The run hears the decisions and says so: the requests leave the page.
	for _, d := range decided {
		n := strings.TrimPrefix(d.ID, "req-")
		var i int
		fmt.Sscan(n, &i)
		p.bus.Publish(&event.Approval{ID: d.ID, Kind: "tool", Session: fmt.Sprintf("s%d", i%10), Tool: "Bash",
			Allow: d.Decision == "allow", By: "remote"})
	}
	if st := p.state(t); len(st.Approvals) != 0 {
		t.Errorf("after the decisions the page still shows %d requests", len(st.Approvals))
	}
}

// TestEventStream: a page's stream starts with the state, then carries
// each event as the very line the --json stream writes, and the pending
// requests as an approvals event whenever they change.
func TestEventStream(t *testing.T) {
	p := startRunPage(t, webui.QueueAnswer(approvals.New(nil, 0)))
	var jsonl bytes.Buffer
	p.bus.Subscribe(runtime.JSONEvents(&jsonl))
	p.bus.Publish(&event.Spawn{ID: "early", Command: []string{"make"}})
	p.bus.Publish(&event.Output{ID: "early", Stream: wire.Stdout, Data: []byte("before the page\n")})
	s := p.events(t)
	var first struct {
		Event string `json:"event"`
		State struct {
			Processes []struct {
				ID     string                  `json:"id"`
				Output []struct{ Data string } `json:"output"`
			} `json:"processes"`
		} `json:"state"`
	}
	if err := json.Unmarshal([]byte(s.next(t, 5*time.Second)), &first); err != nil || first.Event != "state" ||
		len(first.State.Processes) != 1 || first.State.Processes[0].Output[0].Data != "before the page\n" {
		t.Fatalf("first event %+v (%v)", first, err)
	}
	jsonl.Reset()
	p.bus.Publish(&event.Spawn{ID: "p1", Command: []string{"sh", "-c", "echo"}, Host: "embedded", Pid: 42})
	p.bus.Publish(&event.Output{ID: "p1", Stream: wire.Stdout, Data: []byte("one\n<script>alert(1)</script>\n")})
	p.bus.Publish(&event.Output{ID: "p1", Stream: wire.Stderr, Data: []byte("bad \xff byte")})
	p.bus.Publish(&event.Exit{ID: "p1", ExitCode: 3})
	p.bus.Publish(&event.Agent{Session: "s1", Dir: "in", Message: json.RawMessage(`{"type":"result","subtype":"success","total_cost_usd":0.5}`)})
	p.bus.Publish(&event.Log{Text: "hello"})
	want := strings.Split(strings.TrimSuffix(jsonl.String(), "\n"), "\n")
	if len(want) != 7 {
		t.Fatalf("the --json stream wrote %d lines:\n%s", len(want), jsonl.String())
	}
	for i, w := range want {
		if got := s.next(t, 5*time.Second); got != w {
			t.Errorf("event %d:\n got %s\nwant %s", i, got, w)
		}
	}
	p.bus.Publish(&event.Pending{Approval: event.Approval{ID: "a1", Kind: "tool", Session: "s1", Tool: "Bash",
		Summary: "rm -rf /", Input: map[string]any{"command": "rm -rf /"}}})
	if got := s.next(t, 5*time.Second); !strings.HasPrefix(got, `{"event":"pending"`) || !strings.Contains(got, `"id":"a1"`) {
		t.Errorf("the --json stream's pending event: %s", got)
	}
	var ev struct {
		Event     string           `json:"event"`
		Approvals []webui.Approval `json:"approvals"`
	}
	if err := json.Unmarshal([]byte(s.next(t, 5*time.Second)), &ev); err != nil || ev.Event != "approvals" ||
		len(ev.Approvals) != 1 || ev.Approvals[0].ID != "a1" || ev.Approvals[0].Input["command"] != "rm -rf /" {
		t.Fatalf("after a request: %+v (%v)", ev, err)
	}
	p.bus.Publish(&event.Approval{ID: "a1", Kind: "tool", Session: "s1", Tool: "Bash", By: "remote"})
	if got := s.next(t, 5*time.Second); !strings.Contains(got, `"event":"approval"`) || !strings.Contains(got, `"by":"remote"`) ||
		!strings.Contains(got, `"id":"a1"`) {
		t.Errorf("the decision: %s", got)
	}
	if got := s.next(t, 5*time.Second); got != `{"approvals":[],"event":"approvals","time":`+got[strings.Index(got, `"time":`)+7:] {
		t.Errorf("after the decision: %s", got)
	}
	st := p.state(t)
	if len(st.Sessions) != 1 || st.Sessions[0].Turns != 1 || st.Sessions[0].CostUSD != 0.5 || len(st.Sessions[0].Messages) != 1 {
		t.Errorf("sessions %+v", st.Sessions)
	}
}

// TestStateBounds: a late page gets the tail of a process's output, not
// all of it, and a bounded number of processes.
func TestStateBounds(t *testing.T) {
	p := startRunPage(t, webui.QueueAnswer(approvals.New(nil, 0)))
	p.bus.Publish(&event.Spawn{ID: "big"})
	chunk := bytes.Repeat([]byte("0123456789abcde\n"), 2048) // 32 KiB
	for range 64 {
		p.bus.Publish(&event.Output{ID: "big", Stream: wire.Stdout, Data: chunk})
	}
	p.bus.Publish(&event.Output{ID: "big", Stream: wire.Stderr, Data: []byte("the end\n")})
	for i := range webui.MaxProcesses + 10 {
		id := fmt.Sprint("p", i)
		p.bus.Publish(&event.Spawn{ID: id})
		p.bus.Publish(&event.Exit{ID: id})
	}
	st := p.state(t)
	if len(st.Processes) != webui.MaxProcesses {
		t.Fatalf("%d processes kept", len(st.Processes))
	}
	big := st.Processes[0]
	total := 0
	for _, o := range big.Output {
		total += len(o.Data)
	}
	last := big.Output[len(big.Output)-1]
	if big.ID != "big" || !big.Truncated || total != webui.OutputTail || last.Stream != "stderr" || last.Data != "the end\n" {
		t.Errorf("the running process kept %d bytes (truncated %v), last %+v", total, big.Truncated, last)
	}
}

// TestSlowPageDropped: a page that stops reading never holds up the run:
// publishing goes on at full speed, and the page's stream is ended once
// its queue is full (it then reconnects).
func TestSlowPageDropped(t *testing.T) {
	p := startRunPage(t, webui.QueueAnswer(approvals.New(nil, 0)))
	conn, err := net.Dial("tcp", p.srv.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	fmt.Fprintf(conn, "GET /api/events HTTP/1.1\r\nHost: %s\r\nAuthorization: Bearer %s\r\n\r\n", p.srv.Addr(), p.token)
	// A fast page alongside, which must keep getting everything.
	fast := p.events(t)
	fast.next(t, 5*time.Second)
	time.Sleep(100 * time.Millisecond) // the slow page subscribed
	p.bus.Publish(&event.Spawn{ID: "flood"})
	fast.next(t, 5*time.Second)
	chunk := bytes.Repeat([]byte("x"), 32<<10-1)
	chunk = append(chunk, '\n')
	// The run publishes 16 MiB, in rounds the fast page keeps up with;
	// no publish waits for the page that does not read.
	var slowest time.Duration
	for range 32 {
		for range 16 {
			start := time.Now()
			p.bus.Publish(&event.Output{ID: "flood", Stream: wire.Stdout, Data: chunk})
			slowest = max(slowest, time.Since(start))
		}
		for range 16 {
			if got := fast.next(t, 10*time.Second); !strings.HasPrefix(got, `{"event":"output"`) {
				t.Fatalf("the fast page got %.80s", got)
			}
		}
	}
	if slowest > time.Second {
		t.Errorf("a publish took %v with a page that does not read", slowest)
	}
	// The slow page's stream ends: reading it all reaches its end.
	conn.SetReadDeadline(time.Now().Add(10 * time.Second))
	resp, err := http.ReadResponse(bufio.NewReader(conn), nil)
	if err != nil {
		t.Fatal(err)
	}
	n, err := io.Copy(io.Discard, resp.Body)
	if err != nil {
		t.Fatalf("the slow page's stream did not end: %v after %d bytes", err, n)
	}
	if n > 8<<20 {
		t.Errorf("the slow page got %d bytes, more than its queue and the socket's buffers", n)
	}
}

// TestConnectionBound: peers that connect and say nothing take at most
// MaxConnections; one more is closed at once, and once they go the API
// answers again.
func TestConnectionBound(t *testing.T) {
	p := startRunPage(t, webui.QueueAnswer(approvals.New(nil, 0)))
	var idle []net.Conn
	defer func() {
		for _, c := range idle {
			c.Close()
		}
	}()
	for range webui.MaxConnections {
		c, err := net.Dial("tcp", p.srv.Addr().String())
		if err != nil {
			t.Fatal(err)
		}
		idle = append(idle, c)
	}
	time.Sleep(100 * time.Millisecond) // accepted
	extra, err := net.Dial("tcp", p.srv.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	defer extra.Close()
	extra.SetReadDeadline(time.Now().Add(5 * time.Second))
	if _, err := extra.Read(make([]byte, 1)); err != io.EOF {
		t.Errorf("connection %d: read %v, want it closed (EOF)", webui.MaxConnections+1, err)
	}
	for _, c := range idle {
		c.Close()
	}
	idle = nil
	waitFor(t, "the API to answer again", func() bool {
		req, _ := http.NewRequest("GET", p.base+"/api/state", nil)
		req.Header.Set("Authorization", "Bearer "+p.token)
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			return false
		}
		resp.Body.Close()
		return resp.StatusCode == 200
	})
}
