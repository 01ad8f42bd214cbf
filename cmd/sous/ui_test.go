package main

import (
	"context"
	"encoding/json"
	"io"
	"net/http"
	"net/url"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/chromedp"

	"github.com/seed5ad92d46/sous/daemon/client"
	"github.com/seed5ad92d46/sous/daemon/wire"
	"github.com/seed5ad92d46/sous/internal/browsertest"
	"github.com/seed5ad92d46/sous/internal/testutil"
)

// uiLine is what --ui prints on stderr.
var uiLine = regexp.MustCompile(`sous: ui at (http://(127\.0\.0\.1:\d+)/#token=(\S+))`)

// uiGet is one API request to a page with a bearer token.
func uiGet(t *testing.T, method, url, token, body string) (int, string) {
	t.Helper()
	req, err := http.NewRequest(method, url, strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	if token != "" {
		req.Header.Set("Authorization", "Bearer "+token)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(b)
}

// TestDaemonServeUI: `sous daemon serve --ui 127.0.0.1:0` prints the page's
// URL with the daemon's token; the page shows a process a client ran on
// the daemon and a run's pending request, and a browser's click on Allow
// reaches the run as decided by "remote".
func TestDaemonServeUI(t *testing.T) {
	t.Parallel()
	const token = "daemon ui token"
	dir := testutil.ShortTempDir(t)
	sock := filepath.Join(dir, "d.sock")
	d := serveDaemonProc(t, token, 1, "--socket", sock, "--ui", "127.0.0.1:0")
	m := uiLine.FindStringSubmatch(d.stderr.String())
	d.waitFor(t, func() bool { m = uiLine.FindStringSubmatch(d.stderr.String()); return m != nil }, "the ui line")
	pageURL, base := m[1], "http://"+m[2]
	if got, _ := url.QueryUnescape(m[3]); got != token {
		t.Fatalf("the URL's token is %q, want the daemon's", got)
	}
	if code, _ := uiGet(t, "GET", base+"/api/state", "", ""); code != 401 {
		t.Errorf("no token: %d", code)
	}
	if code, _ := uiGet(t, "GET", base+"/api/state", "another", ""); code != 401 {
		t.Errorf("a wrong token: %d", code)
	}

	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	run, err := client.Open(ctx, client.Target{URL: "unix://" + sock, Token: token})
	if err != nil {
		t.Fatal(err)
	}
	defer run.Shutdown()
	p, err := run.Spawn(ctx, client.SpawnSpec{ID: "hello", Command: "sh", Args: []string{"-c", "echo '<script>alert(1)</script>'"}}, nil)
	if err != nil {
		t.Fatal(err)
	}
	p.Wait(ctx)
	if err := run.PublishAsk(ctx, wire.Ask{ID: "ask-1", Run: "run-1", Recipe: "deploy.star", Kind: "tool", Session: "s1",
		Tool: "Bash", Summary: "git push origin main", Input: map[string]any{"command": "git push origin main"}}); err != nil {
		t.Fatal(err)
	}
	var st struct {
		Kind      string `json:"kind"`
		Processes []struct {
			ID     string `json:"id"`
			State  string `json:"state"`
			Output []struct{ Data string }
		} `json:"processes"`
		Approvals []struct {
			ID    string         `json:"id"`
			Input map[string]any `json:"input"`
		} `json:"approvals"`
	}
	d.waitFor(t, func() bool {
		code, body := uiGet(t, "GET", base+"/api/state", token, "")
		if code != 200 || json.Unmarshal([]byte(body), &st) != nil {
			t.Fatalf("state: %d %s", code, body)
		}
		return len(st.Processes) == 1 && st.Processes[0].State == "exited" && len(st.Approvals) == 1
	}, "the process and the request on the page")
	if out := st.Processes[0].Output; st.Kind != "daemon" || st.Processes[0].ID != "hello" || len(out) != 1 || out[0].Data != "<script>alert(1)</script>\n" {
		t.Errorf("state %+v", st)
	}

	tab := browsertest.New(t, 60*time.Second)
	allow := chromedp.CSS(`.approval[data-id="ask-1"] button.allow`)
	if err := chromedp.Do(tab, chromedp.Navigate(pageURL), chromedp.WaitVisible(allow)); err != nil {
		t.Fatal(err)
	}
	// An exited process's output is folded away: read its text, not what shows.
	output, err := chromedp.Run(tab, chromedp.Evaluate[string](`document.querySelector("#processes pre.output").textContent`))
	if err != nil || output != "<script>alert(1)</script>\n" {
		t.Errorf("the page shows %q (%v)", output, err)
	}
	waited := make(chan []wire.AskAnswer, 1)
	go func() {
		got, _ := run.WaitAsks(ctx, []string{"ask-1"}, 20*time.Second)
		waited <- got
	}()
	if err := chromedp.Do(tab, chromedp.Click(allow)); err != nil {
		t.Fatal(err)
	}
	if got, want := <-waited, (wire.AskAnswer{ID: "ask-1", Decision: "allow", By: "remote"}); len(got) != 1 || got[0] != want {
		t.Fatalf("the run heard %+v, want %+v", got, want)
	}
	if err := chromedp.Do(tab, chromedp.WaitNotPresent(chromedp.CSS(`.approval[data-id="ask-1"]`))); err != nil {
		t.Fatal(err)
	}
	if code, body := uiGet(t, "POST", base+"/api/approvals/ask-1", token, `{"decision":"deny"}`); code != 409 || !strings.Contains(body, "allowed by remote") {
		t.Errorf("a second answer: %d %s", code, body)
	}
}
