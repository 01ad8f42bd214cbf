package webui_test

import (
	"bufio"
	"context"
	"encoding/json"
	"io"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/seed5ad92d46/sous/runtime"
	"github.com/seed5ad92d46/sous/runtime/event"
	"github.com/seed5ad92d46/sous/webui"
)

// runPage is a run's page served on loopback: a bus the test publishes
// on, as a run does, and the real server in front of it.
type runPage struct {
	bus   *event.Bus
	hub   *webui.Hub
	srv   *webui.Server
	base  string // http://127.0.0.1:PORT
	token string
}

func startRunPage(t *testing.T, answer webui.AnswerFunc) *runPage {
	t.Helper()
	bus := event.New(nil)
	hub := webui.NewHub("run", "demo.star", runtime.JSONEvents, nil)
	hub.AttachRun(bus)
	token := webui.NewToken()
	srv, err := webui.Listen("127.0.0.1:0", token, hub, answer)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { srv.Close() })
	bus.Publish(&event.Start{Recipe: "demo.star", Args: map[string]string{}})
	return &runPage{bus: bus, hub: hub, srv: srv, base: "http://" + srv.Addr().String(), token: token}
}

// request sends one API request with the page's token (or the given
// Authorization, when auth is not nil) and the extra headers.
func (p *runPage) request(t *testing.T, method, path, body string, auth *string, headers ...string) *http.Response {
	t.Helper()
	var rd io.Reader
	if body != "" {
		rd = strings.NewReader(body)
	}
	req, err := http.NewRequest(method, p.base+path, rd)
	if err != nil {
		t.Fatal(err)
	}
	if auth == nil {
		req.Header.Set("Authorization", "Bearer "+p.token)
	} else if *auth != "" {
		req.Header.Set("Authorization", *auth)
	}
	for i := 0; i+1 < len(headers); i += 2 {
		if headers[i] == "Host" {
			req.Host = headers[i+1]
			continue
		}
		req.Header.Set(headers[i], headers[i+1])
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	return resp
}

// state is GET /api/state, decoded.
func (p *runPage) state(t *testing.T) apiState {
	t.Helper()
	resp := p.request(t, "GET", "/api/state", "", nil)
	defer resp.Body.Close()
	if resp.StatusCode != 200 {
		t.Fatalf("GET /api/state: %s", resp.Status)
	}
	var st apiState
	if err := json.NewDecoder(resp.Body).Decode(&st); err != nil {
		t.Fatal(err)
	}
	return st
}

type apiState struct {
	Kind      string `json:"kind"`
	Processes []struct {
		ID       string   `json:"id"`
		Command  []string `json:"command"`
		State    string   `json:"state"`
		ExitCode *int     `json:"exit_code"`
		Output   []struct {
			Stream string `json:"stream"`
			Data   string `json:"data"`
		} `json:"output"`
		Truncated bool `json:"output_truncated"`
	} `json:"processes"`
	Sessions []struct {
		ID       string            `json:"id"`
		Turns    int               `json:"turns"`
		CostUSD  float64           `json:"cost_usd"`
		Messages []json.RawMessage `json:"messages"`
	} `json:"sessions"`
	Approvals []webui.Approval `json:"approvals"`
	End       *struct {
		Status string `json:"status"`
	} `json:"end"`
}

// stream is an open GET /api/events.
type stream struct {
	resp *http.Response
	rd   *bufio.Reader
}

func (p *runPage) events(t *testing.T) *stream {
	t.Helper()
	resp := p.request(t, "GET", "/api/events", "", nil)
	if resp.StatusCode != 200 {
		t.Fatalf("GET /api/events: %s", resp.Status)
	}
	t.Cleanup(func() { resp.Body.Close() })
	return &stream{resp: resp, rd: bufio.NewReader(resp.Body)}
}

// next returns the next event's data (comments skipped), failing after
// the timeout.
func (s *stream) next(t *testing.T, timeout time.Duration) string {
	t.Helper()
	type line struct {
		s   string
		err error
	}
	ctx, cancel := context.WithTimeout(context.Background(), timeout)
	defer cancel()
	for {
		got := make(chan line, 1)
		go func() { l, err := s.rd.ReadString('\n'); got <- line{l, err} }()
		select {
		case l := <-got:
			if l.err != nil {
				t.Fatalf("event stream: %v", l.err)
			}
			if data, ok := strings.CutPrefix(l.s, "data: "); ok {
				return strings.TrimSuffix(data, "\n")
			}
		case <-ctx.Done():
			t.Fatal("no event within", timeout)
		}
	}
}

// waitFor polls cond until it holds.
func waitFor(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
		time.Sleep(20 * time.Millisecond)
	}
}
