package main

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"strconv"
	"strings"
	"sync"

	"github.com/seed5ad92d46/sous/runtime/agent/fakemodel"
)

// fakeAPIKey is the API key a CLI talking to a scripted model is given:
// the CLI wants one, and nothing checks it.
const fakeAPIKey = "sous-fake-model"

// scriptReport tells what a scripted model did: every request as a JSON
// line on log (when set), a line per scripted request on progress (when
// set), and what was left over at the end.
type scriptReport struct {
	script   []fakemodel.Reply
	log      io.Writer
	progress io.Writer
	prefix   string // of progress lines: "sous model serve: "

	mu     sync.Mutex
	n      int
	logErr error
}

func newScriptReport(script []fakemodel.Reply, log, progress io.Writer, prefix string) *scriptReport {
	return &scriptReport{script: script, log: log, progress: progress, prefix: prefix}
}

// loggedRequest is one line of --log.
type loggedRequest struct {
	N      int    `json:"n"`
	Method string `json:"method"`
	Path   string `json:"path"`
	// Side is true for the requests that are not the scripted
	// conversation (fakemodel's side requests) and for other endpoints.
	Side bool `json:"side"`
	// Reply is the script's reply that answered, from 1; absent when none
	// did.
	Reply  int             `json:"reply,omitempty"`
	Prompt string          `json:"prompt,omitempty"`
	Body   json.RawMessage `json:"body,omitempty"`
}

// request is the server's OnRequest.
func (r *scriptReport) request(req *fakemodel.Request) {
	scripted := !req.Side && req.Path == "/v1/messages"
	r.mu.Lock()
	defer r.mu.Unlock()
	r.n++
	if r.log != nil && r.logErr == nil {
		line := loggedRequest{N: r.n, Method: req.Method, Path: req.Path, Side: !scripted, Reply: req.Reply + 1, Prompt: req.Prompt()}
		if json.Valid(req.Body) {
			line.Body = req.Body
		} else if len(req.Body) > 0 {
			line.Body, _ = json.Marshal(string(req.Body))
		}
		// The prompts and tool inputs are code: <, > and & stay as they are.
		var b bytes.Buffer
		enc := json.NewEncoder(&b)
		enc.SetEscapeHTML(false)
		enc.Encode(line)
		_, r.logErr = r.log.Write(b.Bytes())
		if r.logErr != nil && r.progress != nil {
			fmt.Fprintf(r.progress, "%s--log: %v; no more requests are logged\n", r.prefix, r.logErr)
		}
	}
	if r.progress == nil || !scripted {
		return
	}
	prompt := strconv.Quote(truncate(req.Prompt(), 60))
	if req.Reply < 0 {
		fmt.Fprintf(r.progress, "%srequest %d: no reply left in the script for %s; it gets a text saying so\n", r.prefix, r.n, prompt)
		return
	}
	fmt.Fprintf(r.progress, "%srequest %d: reply %d of %d (%s) for %s\n", r.prefix, r.n, req.Reply+1, len(r.script), describeReply(r.script[req.Reply]), prompt)
}

// summary says how much of the script srv used, once it stopped.
func (r *scriptReport) summary(srv *fakemodel.Server) {
	unused := srv.Unused()
	r.mu.Lock()
	n := r.n
	r.mu.Unlock()
	line := fmt.Sprintf("%sstopped after %d %s; %d of %d %s used", r.prefix, n, plural(n, "request", "requests"),
		len(r.script)-len(unused), len(r.script), plural(len(r.script), "reply", "replies"))
	if len(unused) > 0 {
		line += "; not used: " + replyNumbers(unused)
	}
	fmt.Fprintln(r.progress, line)
}

// leftovers is what went amiss with a script during a run, one line each:
// requests that found no reply, replies nobody asked for. Nothing when
// the script fit the run.
func leftovers(srv *fakemodel.Server, script string) []string {
	var out []string
	if ex := srv.Exhausted(); len(ex) > 0 {
		out = append(out, fmt.Sprintf("%d %s found no reply left in %s (the model answered with a text saying so): %s",
			len(ex), plural(len(ex), "request", "requests"), script, strings.Join(ex, "; ")))
	}
	if unused := srv.Unused(); len(unused) > 0 {
		out = append(out, fmt.Sprintf("%s of %s not used", replyNumbers(unused), script))
	}
	return out
}

// replyNumbers names script indexes as users count them: "replies 5, 6".
func replyNumbers(idx []int) string {
	nums := make([]string, len(idx))
	for i, n := range idx {
		nums[i] = strconv.Itoa(n + 1)
	}
	return plural(len(idx), "reply ", "replies ") + strings.Join(nums, ", ")
}

// describeReply is a reply in a few words: "tool_use Bash", "text \"done\"".
func describeReply(r fakemodel.Reply) string {
	if r.Status != 0 {
		return fmt.Sprintf("error %d %s", r.Status, r.ErrorType)
	}
	parts := make([]string, len(r.Blocks))
	for i, b := range r.Blocks {
		switch {
		case b.Type == "tool_use" && b.Name == "StructuredOutput":
			parts[i] = "structured_output"
		case b.Type == "tool_use":
			parts[i] = "tool_use " + b.Name
		default:
			parts[i] = "text " + strconv.Quote(truncate(b.Text, 30))
		}
	}
	return strings.Join(parts, ", ")
}
