package main

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/seed5ad92d46/sous/internal/claudecli"
	"github.com/seed5ad92d46/sous/internal/testutil"
)

// writeScript writes a --script / --fake-model file and returns its path.
func writeScript(t *testing.T, src string) string {
	t.Helper()
	p := filepath.Join(t.TempDir(), "script.json")
	if err := os.WriteFile(p, []byte(src), 0o644); err != nil {
		t.Fatal(err)
	}
	return p
}

// streamedRequest is a Messages API request as Claude Code makes it for
// a conversation: streamed, with tools.
func streamedRequest(prompt string) string {
	return `{"model":"claude-x","stream":true,"max_tokens":100,"tools":[{"name":"Bash"}],"messages":[{"role":"user","content":"` + prompt + `"}]}`
}

// sseText is the text a server-sent event stream of the Messages API says.
func sseText(t *testing.T, r io.Reader) string {
	t.Helper()
	var text string
	sc := bufio.NewScanner(r)
	for sc.Scan() {
		data, ok := strings.CutPrefix(sc.Text(), "data: ")
		if !ok {
			continue
		}
		var ev struct {
			Delta struct {
				Text string `json:"text"`
			} `json:"delta"`
		}
		if err := json.Unmarshal([]byte(data), &ev); err != nil {
			t.Fatalf("event data is not JSON: %q", data)
		}
		text += ev.Delta.Text
	}
	return text
}

// TestModelServeProcess runs `sous model serve` as a real process: it
// prints the variables on stdout, answers a plain HTTP POST and the real
// CLI from the script (each scripted request a line on stderr), logs every
// request as a JSON line, and on SIGTERM exits 0 saying what was used.
func TestModelServeProcess(t *testing.T) {
	t.Parallel()
	script := writeScript(t, `[
  {"text": "plain hello", "when": {"prompt_contains": "plain"}},
  {"text": "hello from the script", "when": {"prompt_contains": "say hi"}, "comment": "the CLI's turn"},
  {"tool_use": {"name": "Bash", "input": {"command": "never asked"}}}
]`)
	logFile := filepath.Join(t.TempDir(), "requests.jsonl")
	stdout, stderr := &testutil.SyncBuffer{}, &testutil.SyncBuffer{}
	cmd := exec.Command(sousBinary(t), "model", "serve", "--script", script, "--log", logFile)
	cmd.Stdout, cmd.Stderr = stdout, stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	exited := make(chan error, 1)
	go func() { exited <- cmd.Wait() }()
	t.Cleanup(func() {
		cmd.Process.Kill() // after a passing test it has exited already
		if t.Failed() {
			t.Logf("serve stdout:\n%s\nstderr:\n%s", stdout, stderr)
		}
	})
	var baseURL string
	for deadline := time.Now().Add(10 * time.Second); ; time.Sleep(10 * time.Millisecond) {
		if lines := strings.Split(stdout.String(), "\n"); len(lines) >= 3 {
			var ok bool
			baseURL, ok = strings.CutPrefix(lines[0], "ANTHROPIC_BASE_URL=")
			if !ok || !strings.HasPrefix(baseURL, "http://127.0.0.1:") || lines[1] != "ANTHROPIC_API_KEY=sous-fake-model" {
				t.Fatalf("stdout:\n%s\nwant ANTHROPIC_BASE_URL=http://127.0.0.1:PORT and ANTHROPIC_API_KEY=sous-fake-model", stdout)
			}
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("serve printed no URL")
		}
	}

	resp, err := http.Post(baseURL+"/v1/messages", "application/json", strings.NewReader(streamedRequest("a plain POST")))
	if err != nil {
		t.Fatal(err)
	}
	if got := sseText(t, resp.Body); resp.StatusCode != 200 || got != "plain hello" {
		t.Errorf("POST: %d %q, want 200 and the first reply", resp.StatusCode, got)
	}
	resp.Body.Close()

	t.Run("the real CLI", func(t *testing.T) {
		cli := claudecli.Find(t, claudecli.Latest)
		c := exec.Command(cli[0], append(cli[1:], "-p", "say hi")...)
		c.Env = []string{"PATH=" + os.Getenv("PATH"), "LANG=C.UTF-8"}
		for k, v := range claudecli.Env(t.TempDir(), baseURL) {
			c.Env = append(c.Env, k+"="+v)
		}
		out, err := c.Output()
		if err != nil || strings.TrimSpace(string(out)) != "hello from the script" {
			t.Errorf("claude -p: %v: %q", err, out)
		}
	})

	cmd.Process.Signal(syscall.SIGTERM)
	select {
	case err := <-exited:
		if err != nil {
			t.Errorf("serve ended with %v after SIGTERM, want exit 0", err)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("serve did not stop on SIGTERM")
	}
	errText := stderr.String()
	for _, want := range []string{
		"sous model serve: 3 replies from " + script + " at " + baseURL + "; give Claude Code the two variables above (any API key does). Ctrl-C stops.\n",
		`sous model serve: request 1: reply 1 of 3 (text "plain hello") for "a plain POST"` + "\n",
	} {
		if !strings.Contains(errText, want) {
			t.Errorf("stderr lacks %q:\n%s", want, errText)
		}
	}
	cliRan := strings.Contains(errText, `(text "hello from the script") for "say hi"`)
	used := "1 of 3 replies used; not used: replies 2, 3\n"
	if cliRan {
		used = "2 of 3 replies used; not used: reply 3\n"
	}
	if !strings.Contains(errText, used) {
		t.Errorf("stderr lacks %q:\n%s", used, errText)
	}

	raw, err := os.ReadFile(logFile)
	if err != nil {
		t.Fatal(err)
	}
	var scripted []string
	lines := strings.Split(strings.TrimSuffix(string(raw), "\n"), "\n")
	for i, l := range lines {
		var r struct {
			N      int             `json:"n"`
			Method string          `json:"method"`
			Path   string          `json:"path"`
			Side   bool            `json:"side"`
			Reply  int             `json:"reply"`
			Prompt string          `json:"prompt"`
			Body   json.RawMessage `json:"body"`
		}
		if err := json.Unmarshal([]byte(l), &r); err != nil {
			t.Fatalf("log line %d is not JSON: %q", i+1, l)
		}
		if r.N != i+1 {
			t.Errorf("log line %d has n %d", i+1, r.N)
		}
		if !r.Side {
			scripted = append(scripted, r.Path+" "+r.Prompt)
			if r.Reply == 0 || !strings.Contains(string(r.Body), `"messages"`) {
				t.Errorf("a scripted request logged without its reply or body: %s", l)
			}
		}
	}
	want := []string{"/v1/messages a plain POST"}
	if cliRan {
		want = append(want, "/v1/messages say hi")
	}
	if strings.Join(scripted, "\n") != strings.Join(want, "\n") {
		t.Errorf("scripted requests in the log:\n%s\nwant:\n%s", strings.Join(scripted, "\n"), strings.Join(want, "\n"))
	}
}

// TestModelServeLogStdout: --log - puts the JSON lines on stdout, after
// the two variables; a request past the script's end is a line on stderr.
func TestModelServeLogStdout(t *testing.T) {
	t.Parallel()
	out, errOut := &testutil.SyncBuffer{}, &testutil.SyncBuffer{}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	opts := &ModelServeOptions{IO: &IO{Out: out, ErrOut: errOut}, Script: writeScript(t, `[{"text": "hi <there>"}]`), Addr: "127.0.0.1:0", Log: "-"}
	go func() { done <- modelServe(ctx, opts) }()
	var url string
	for deadline := time.Now().Add(5 * time.Second); url == ""; time.Sleep(5 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatal("no URL on stdout")
		}
		first, _, ok := strings.Cut(out.String(), "\n")
		if ok {
			url = strings.TrimPrefix(first, "ANTHROPIC_BASE_URL=")
		}
	}
	for _, prompt := range []string{"x < y", "one more"} {
		resp, err := http.Post(url+"/v1/messages", "application/json", strings.NewReader(streamedRequest(prompt)))
		if err != nil {
			t.Fatal(err)
		}
		io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
	}
	cancel()
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	lines := strings.Split(strings.TrimSuffix(out.String(), "\n"), "\n")
	if len(lines) != 4 || lines[1] != "ANTHROPIC_API_KEY=sous-fake-model" ||
		!strings.HasPrefix(lines[2], `{"n":1,"method":"POST","path":"/v1/messages","side":false,"reply":1,"prompt":"x < y","body":{"model":"claude-x",`) ||
		!strings.HasPrefix(lines[3], `{"n":2,"method":"POST","path":"/v1/messages","side":false,"prompt":"one more","body":`) {
		t.Errorf("stdout:\n%s", out)
	}
	for _, want := range []string{
		`sous model serve: request 1: reply 1 of 1 (text "hi <there>") for "x < y"` + "\n",
		`sous model serve: request 2: no reply left in the script for "one more"; it gets a text saying so` + "\n",
		"sous model serve: stopped after 2 requests; 1 of 1 reply used\n",
	} {
		if !strings.Contains(errOut.String(), want) {
			t.Errorf("stderr lacks %q:\n%s", want, errOut)
		}
	}
}

// TestModelServeAddrInUse: an address another server holds is one line.
func TestModelServeAddrInUse(t *testing.T) {
	t.Parallel()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	o := sousEnv(nil, "model", "serve", "--script", writeScript(t, `[{"text": "hi"}]`), "--addr", ln.Addr().String())
	want := "sous: model serve: --addr: listen tcp " + ln.Addr().String() + ": bind: address already in use\n"
	if o.code != 1 || o.stderr != want || o.stdout != "" {
		t.Errorf("exit %d, stdout %q, stderr %q; want exit 1 and %q", o.code, o.stdout, o.stderr, want)
	}
}

// TestModelServeBadScript: a script with a mistake stops serve before it
// listens, with the file, the line and the reply at fault.
func TestModelServeBadScript(t *testing.T) {
	t.Parallel()
	bad := writeScript(t, "[\n  {\"text\": \"fine\"},\n  {\"tool_use\": {\"name\": \"Bash\", \"input\": \"ls\"}}\n]")
	tests := []struct {
		args []string
		want string
	}{
		{[]string{"model", "serve", "--script", bad}, "sous: --script: " + bad + `:3: reply 2: tool_use: "input": want an object, got a string` + "\n"},
		{[]string{"model", "serve", "--script", bad + ".missing"}, "sous: --script: open " + bad + ".missing: no such file or directory\n"},
		{[]string{"model", "serve", "--script", writeScript(t, `{"text": "hi"}`)}, "sous: --script: "},
	}
	for _, tt := range tests {
		var stdout, stderr bytes.Buffer
		code := execute(newTestFactory(strings.NewReader(""), &stdout, &stderr, nil), tt.args)
		if code != 2 || !strings.HasPrefix(stderr.String(), tt.want) || stdout.Len() != 0 {
			t.Errorf("%v: exit %d, stdout %q, stderr %q; want exit 2 and %q", tt.args, code, stdout.String(), stderr.String(), tt.want)
		}
	}
}
