package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os/exec"
	"regexp"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/seed5ad92d46/sous/daemon/client"
	"github.com/seed5ad92d46/sous/daemon/wire"
)

// The tests publish requests with the client's approval calls, as a run
// on the daemon does, and answer them with the sous command, in process
// (Main) and as the real binary.

// waitDecided waits on c, as a run does, until every id is decided, and
// returns each id's decision. An id decided twice fails the test.
func waitDecided(c *client.Client, ids []string) (map[string]wire.AskAnswer, error) {
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	got := make(map[string]wire.AskAnswer)
	pending := append([]string(nil), ids...)
	for len(pending) > 0 {
		decided, err := c.WaitAsks(ctx, pending, 10*time.Second)
		if err != nil {
			return got, err
		}
		if ctx.Err() != nil {
			return got, fmt.Errorf("still pending after 60s: %v", pending)
		}
		for _, d := range decided {
			if prev, ok := got[d.ID]; ok {
				return got, fmt.Errorf("%s decided twice: %+v, then %+v", d.ID, prev, d)
			}
			got[d.ID] = d
		}
		pending = slices.DeleteFunc(pending, func(id string) bool { _, ok := got[id]; return ok })
	}
	return got, c.WithdrawAsks(ctx, ids)
}

// columnGap is what tabwriter puts between a table's columns: two spaces
// or more (a cell holds single spaces at most).
var columnGap = regexp.MustCompile(`\s{2,}`)

func TestApprovalsListAndAnswer(t *testing.T) {
	t.Parallel()
	sock, _ := socketDaemon(t, "tok", daemonConfig(t))
	flags := []string{"--socket", sock, "--token-file", tokenFile(t, "tok")}
	cmd := func(args ...string) outcome {
		t.Helper()
		return sous(t, append(args, flags...)...)
	}
	run := dialDaemon(t, sock, "tok")
	ctx := context.Background()

	now := time.Now()
	asks := []wire.Ask{
		{ID: "a1", Run: "r1", Recipe: "fix.star", Kind: "tool", Session: "s1", Tool: "Bash", Summary: "rm -rf build",
			Input: map[string]any{"command": "rm -rf build"}, Since: now.Add(-(3*time.Minute + 4*time.Second))},
		// A summary that would break the row, repaint the terminal or
		// read backwards is escaped.
		{ID: "a2", Run: "r1", Kind: "tool", Session: "s2", Tool: "Write", Summary: "/etc/passwd\n\x1b[2Jok \u202etxt.exe",
			Input: map[string]any{"file_path": "/etc/passwd"}, Since: now.Add(-time.Minute)},
		{ID: "a3", Run: "r2", Kind: "privileged", Tool: "sudo", Summary: "apt-get install -y jq", Since: now.Add(-12 * time.Second)},
	}
	for _, a := range asks {
		if err := run.PublishAsk(ctx, a); err != nil {
			t.Fatal(err)
		}
	}

	o := cmd("approvals")
	if o.code != 0 || o.stderr != "" {
		t.Fatalf("approvals: exit %d\n%s", o.code, o.stderr)
	}
	lines := o.stdoutLines()
	want := [][]string{
		{"ID", "RUN", "SESSION", "TOOL", "WAITING", "REQUEST"},
		{"a1", "r1", "s1", "Bash", "3m0[4-6]s", regexp.QuoteMeta("rm -rf build")},
		{"a2", "r1", "s2", "Write", "1m0[0-2]s", regexp.QuoteMeta(`$'/etc/passwd\n\x1b[2Jok \u202etxt.exe'`)},
		{"a3", "r2", "-", "sudo", "1[2-4]s", regexp.QuoteMeta("apt-get install -y jq")},
	}
	if len(lines) != len(want) {
		t.Fatalf("approvals printed %d lines, want %d:\n%s", len(lines), len(want), o.stdout)
	}
	for i, line := range lines {
		cells := columnGap.Split(line, -1)
		if len(cells) != len(want[i]) {
			t.Errorf("row %d has %d cells, want %d: %q", i, len(cells), len(want[i]), line)
			continue
		}
		for j, re := range want[i] {
			if !regexp.MustCompile("^" + re + "$").MatchString(cells[j]) {
				t.Errorf("row %d column %s: %q, want %s\n%s", i, want[0][j], cells[j], re, o.stdout)
			}
		}
	}

	// Shell completion of ID offers the pending ones, the request beside
	// each (escaped: a newline would end the completion's line).
	o = sous(t, append([]string{"__complete", "approvals", "deny"}, append(flags, "")...)...)
	if want := "a1\tBash: rm -rf build\na2\t" + `$'Write: /etc/passwd\n\x1b[2Jok \u202etxt.exe'` + "\na3\tsudo: apt-get install -y jq\n:4\n"; o.code != 0 || !strings.HasPrefix(o.stdout, want) {
		t.Errorf("completion of the ID: exit %d\n%s\nwant\n%s", o.code, o.stdout, want)
	}

	// --json: the requests as published, oldest first.
	o = cmd("approvals", "--json")
	var listed []wire.Ask
	if err := json.Unmarshal([]byte(o.stdout), &listed); o.code != 0 || err != nil {
		t.Fatalf("approvals --json: exit %d, %v\n%s%s", o.code, err, o.stdout, o.stderr)
	}
	if len(listed) != len(asks) {
		t.Fatalf("--json listed %d requests, want %d:\n%s", len(listed), len(asks), o.stdout)
	}
	for i, a := range asks {
		got := listed[i]
		if !got.Since.Equal(a.Since) {
			t.Errorf("%s since %v, want %v", a.ID, got.Since, a.Since)
		}
		got.Since, a.Since = time.Time{}, time.Time{}
		if fmt.Sprint(got) != fmt.Sprint(a) {
			t.Errorf("--json request %d:\n%+v\nwant\n%+v", i, got, a)
		}
	}

	// A deny with a message: the run's wait hears it, by remote.
	type waited struct {
		got map[string]wire.AskAnswer
		err error
	}
	waitFor := func(ids ...string) chan waited {
		ch := make(chan waited, 1)
		go func() {
			got, err := waitDecided(run, ids)
			ch <- waited{got, err}
		}()
		return ch
	}
	w := waitFor("a1")
	if o := cmd("approvals", "deny", "a1", "--message", "not here"); o.code != 0 || o.stdout != "a1 denied\n" || o.stderr != "" {
		t.Fatalf("deny a1: %+v", o)
	}
	r := <-w
	if want := (wire.AskAnswer{ID: "a1", Decision: "deny", Message: "not here", By: "remote"}); r.err != nil || r.got["a1"] != want {
		t.Fatalf("the run heard %+v (%v), want %+v", r.got, r.err, want)
	}

	// The first answer won: a second, either way, is refused with the
	// daemon's word, and so is an id nobody asked.
	for _, again := range []string{"allow", "deny"} {
		o := cmd("approvals", again, "a1")
		if o.code != 1 || o.stdout != "" || o.stderr != "sous: request a1 was decided already: denied by remote\n" {
			t.Errorf("a second answer (%s): %+v", again, o)
		}
	}
	if o := cmd("approvals", "allow", "zz"); o.code != 1 || o.stderr != "sous: no pending request \"zz\" (answered and gone, or never asked)\n" {
		t.Errorf("an unknown id: %+v", o)
	}

	// The list shows what still waits; an allow with -m is heard too.
	if o := cmd("approvals"); o.code != 0 || strings.Contains(o.stdout, "a1") || len(o.stdoutLines()) != 3 {
		t.Errorf("after a1 was answered: %+v", o)
	}
	w = waitFor("a2", "a3")
	cmd("approvals", "allow", "a3", "-m", "fine, once").expect(t, 0)
	cmd("approvals", "deny", "a2").expect(t, 0)
	r = <-w
	if r.err != nil || r.got["a3"] != (wire.AskAnswer{ID: "a3", Decision: "allow", Message: "fine, once", By: "remote"}) ||
		r.got["a2"] != (wire.AskAnswer{ID: "a2", Decision: "deny", By: "remote"}) {
		t.Fatalf("the run heard %+v (%v)", r.got, r.err)
	}

	// Nothing waits: an empty table would look like a broken one, so the
	// list says so on stderr; --json is [].
	if o := cmd("approvals"); o.code != 0 || o.stdout != "" || o.stderr != "no request waits for an answer on unix://"+sock+"\n" {
		t.Errorf("an empty list: %+v", o)
	}
	if o := cmd("approvals", "--json"); o.code != 0 || o.stdout != "[]\n" {
		t.Errorf("an empty --json list: %+v", o)
	}
}

// 50 requests of 5 runs in 10 sessions, each answered at once by two sous
// processes, one allowing and one denying: each is decided exactly once,
// the run hears the winner's decision, and the loser is told who won.
func TestApprovalsAnsweredOnceUnderContention(t *testing.T) {
	t.Parallel()
	bin := sousBinary(t)
	sock, _ := socketDaemon(t, "tok", daemonConfig(t))
	tok := tokenFile(t, "tok")
	ctx := context.Background()

	const runs, perRun = 5, 10
	type runResult struct {
		got map[string]wire.AskAnswer
		err error
	}
	results := make(chan runResult, runs)
	var ids []string
	for r := range runs {
		c := dialDaemon(t, sock, "tok")
		var mine []string
		for i := range perRun {
			id := fmt.Sprintf("r%d-a%d", r, i)
			a := wire.Ask{ID: id, Run: fmt.Sprintf("r%d", r), Kind: "tool", Session: fmt.Sprintf("s%d", 2*r+i%2),
				Tool: "Bash", Summary: "echo " + id}
			if err := c.PublishAsk(ctx, a); err != nil {
				t.Fatal(err)
			}
			mine = append(mine, id)
		}
		ids = append(ids, mine...)
		go func() {
			got, err := waitDecided(c, mine)
			results <- runResult{got, err}
		}()
	}
	var listed []wire.Ask
	if o := sous(t, "approvals", "--json", "--socket", sock, "--token-file", tok); json.Unmarshal([]byte(o.stdout), &listed) != nil || len(listed) != runs*perRun {
		t.Fatalf("listed %d requests, want %d: %+v", len(listed), runs*perRun, o)
	}
	sessions := map[string]bool{}
	for _, a := range listed {
		sessions[a.Run+"/"+a.Session] = true
	}
	if len(sessions) != 10 {
		t.Fatalf("%d sessions, want 10", len(sessions))
	}

	type answer struct {
		decision       string
		code           int
		stdout, stderr string
	}
	answers := make(map[string][]answer)
	var mu sync.Mutex
	var wg sync.WaitGroup
	for _, id := range ids {
		for _, decision := range []string{"allow", "deny"} {
			wg.Add(1)
			go func() {
				defer wg.Done()
				cmd := exec.Command(bin, "approvals", decision, id, "--socket", sock, "--token-file", tok)
				cmd.Env = []string{"PATH=/usr/bin:/bin"}
				var stdout, stderr bytes.Buffer
				cmd.Stdout, cmd.Stderr = &stdout, &stderr
				err := cmd.Run()
				code := 0
				if ee := (*exec.ExitError)(nil); errors.As(err, &ee) {
					code = ee.ExitCode()
				} else if err != nil {
					code = -1
				}
				mu.Lock()
				answers[id] = append(answers[id], answer{decision, code, stdout.String(), stderr.String()})
				mu.Unlock()
			}()
		}
	}
	wg.Wait()

	heard := make(map[string]wire.AskAnswer)
	for range runs {
		r := <-results
		if r.err != nil {
			t.Fatal(r.err)
		}
		for id, d := range r.got {
			heard[id] = d
		}
	}
	past := map[string]string{"allow": "allowed", "deny": "denied"}
	for _, id := range ids {
		var won, lost []answer
		for _, a := range answers[id] {
			if a.code == 0 {
				won = append(won, a)
			} else {
				lost = append(lost, a)
			}
		}
		if len(won) != 1 || len(lost) != 1 {
			t.Errorf("%s: %d answers succeeded, %d were refused: %+v", id, len(won), len(lost), answers[id])
			continue
		}
		w, l := won[0], lost[0]
		if w.stdout != id+" "+past[w.decision]+"\n" {
			t.Errorf("%s: the winner printed %q", id, w.stdout)
		}
		if want := "sous: request " + id + " was decided already: " + past[w.decision] + " by remote\n"; l.code != 1 || l.stderr != want {
			t.Errorf("%s: the loser exited %d with %q, want 1 with %q", id, l.code, l.stderr, want)
		}
		if want := (wire.AskAnswer{ID: id, Decision: w.decision, By: "remote"}); heard[id] != want {
			t.Errorf("%s: the run heard %+v, want %+v", id, heard[id], want)
		}
	}
	if len(heard) != len(ids) {
		t.Errorf("the runs heard %d decisions, want %d", len(heard), len(ids))
	}
}

// Over WebSocket, to `sous daemon serve --listen`: list and answer with the
// real binary, with the token from a file.
func TestApprovalsOverWebSocket(t *testing.T) {
	t.Parallel()
	const token = "ws approvals token"
	d := serveDaemonProc(t, token, 1, "--socket", "", "--listen", "ws://127.0.0.1:0")
	ws := strings.TrimSuffix(d.url(t, wsLine), "/")
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	run, err := client.Open(ctx, client.Target{URL: ws, Token: token})
	if err != nil {
		t.Fatal(err)
	}
	defer run.Shutdown()
	if err := run.PublishAsk(ctx, wire.Ask{ID: "w1", Run: "r1", Kind: "tool", Session: "s1", Tool: "WebFetch", Summary: "https://example.com"}); err != nil {
		t.Fatal(err)
	}
	bin := sousBinary(t)
	sousProc := func(args ...string) outcome {
		t.Helper()
		cmd := exec.Command(bin, append(args, "--remote", ws, "--token-file", tokenFile(t, token))...)
		cmd.Env = []string{"PATH=/usr/bin:/bin"}
		var stdout, stderr bytes.Buffer
		cmd.Stdout, cmd.Stderr = &stdout, &stderr
		err := cmd.Run()
		code := 0
		if ee := (*exec.ExitError)(nil); errors.As(err, &ee) {
			code = ee.ExitCode()
		} else if err != nil {
			t.Fatal(err)
		}
		return outcome{code, stdout.String(), stderr.String()}
	}
	o := sousProc("approvals")
	if lines := o.stdoutLines(); o.code != 0 || len(lines) != 2 || columnGap.Split(lines[1], -1)[0] != "w1" || !strings.HasSuffix(lines[1], "  https://example.com") {
		t.Fatalf("approvals over ws: %+v", o)
	}
	waited := make(chan []wire.AskAnswer, 1)
	go func() {
		d, _ := run.WaitAsks(ctx, []string{"w1"}, 20*time.Second)
		waited <- d
	}()
	if o := sousProc("approvals", "allow", "w1", "--message", "docs are fine"); o.code != 0 || o.stdout != "w1 allowed\n" {
		t.Fatalf("allow over ws: %+v", o)
	}
	if got, want := <-waited, (wire.AskAnswer{ID: "w1", Decision: "allow", Message: "docs are fine", By: "remote"}); len(got) != 1 || got[0] != want {
		t.Fatalf("the run heard %+v, want %+v", got, want)
	}
	if o := sousProc("approvals", "deny", "w1"); o.code != 1 || o.stderr != "sous: request w1 was decided already: allowed by remote\n" {
		t.Fatalf("a second answer over ws: %+v", o)
	}
	// A wrong token is refused before anything is listed.
	cmd := exec.Command(bin, "approvals", "--remote", ws, "--token-file", tokenFile(t, "wrong"))
	if out, err := cmd.CombinedOutput(); err == nil || !strings.Contains(string(out), "daemon refused the token (HTTP 401") {
		t.Fatalf("a wrong token: %v\n%s", err, out)
	}
}

// A daemon without the extension (an older sous, claustrum) is named, with
// what to do, rather than answering "Unknown method".
func TestApprovalsNeedTheDaemonsQueue(t *testing.T) {
	t.Parallel()
	cfg := daemonConfig(t)
	cfg.DisableFeatures = []string{wire.FeatureApprovalQueue}
	sock, _ := socketDaemon(t, "tok", cfg)
	tok := tokenFile(t, "tok")
	want := "sous: the daemon at unix://" + sock + " does not hold approvals (no approval.queue feature): upgrade it\n"
	for _, args := range [][]string{{"approvals"}, {"approvals", "--json"}, {"approvals", "deny", "a1"}, {"approvals", "allow", "a1", "-m", "x"}} {
		o := sous(t, append(args, "--socket", sock, "--token-file", tok)...)
		if o.code != 1 || o.stdout != "" || o.stderr != want {
			t.Errorf("%v: exit %d, stdout %q, stderr %q; want exit 1 and %q", args, o.code, o.stdout, o.stderr, want)
		}
	}
}
