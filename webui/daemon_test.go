package webui_test

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/seed5ad92d46/sous/daemon"
	"github.com/seed5ad92d46/sous/daemon/client"
	"github.com/seed5ad92d46/sous/daemon/wire"
	"github.com/seed5ad92d46/sous/internal/daemontest"
	"github.com/seed5ad92d46/sous/runtime"
	"github.com/seed5ad92d46/sous/webui"
)

// TestDaemonPage: the daemon's page shows the processes a client started
// on the daemon (with their output, one that ran before the page and one
// after) and the requests of the daemon's approval queue, and answers
// them there as "remote".
func TestDaemonPage(t *testing.T) {
	srv, runner := daemontest.Embedded(t, daemon.Config{Token: "daemon-token"})
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	spawn := func(id, script string) {
		p, err := runner.Spawn(ctx, client.SpawnSpec{ID: id, Command: "sh", Args: []string{"-c", script}}, nil)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := p.Wait(ctx); err != nil {
			t.Fatal(err)
		}
	}
	spawn("before", "echo before the page; sleep 0.2; echo '<b>bold</b>' >&2; exit 3")

	hub := webui.NewHub("daemon", "daemon", runtime.JSONEvents, nil)
	page, err := webui.Listen("127.0.0.1:0", "daemon-token", hub, webui.QueueAnswer(srv.Approvals()))
	if err != nil {
		t.Fatal(err)
	}
	defer page.Close()
	own := client.Embedded(srv)
	defer own.Close()
	feed := &webui.DaemonFeed{Hub: hub, Client: own, Interval: 50 * time.Millisecond}
	go feed.Run(ctx)
	go webui.WatchQueue(ctx, hub, srv.Approvals())
	p := &runPage{hub: hub, srv: page, base: "http://" + page.Addr().String(), token: "daemon-token"}

	spawn("after", "echo after the page")
	if err := srv.Approvals().Publish(wire.Ask{ID: "ask-1", Run: "run-9", Recipe: "fix.star", Kind: "tool",
		Session: "s1", Tool: "Bash", Summary: "git push", Input: map[string]any{"command": "git push"}}); err != nil {
		t.Fatal(err)
	}
	var st apiState
	waitFor(t, "both processes, ended, and the request", func() bool {
		st = p.state(t)
		ended := 0
		for _, pr := range st.Processes {
			if pr.State == "exited" {
				ended++
			}
		}
		return ended == 2 && len(st.Approvals) == 1
	})
	out := map[string]string{}
	for _, pr := range st.Processes {
		var b strings.Builder
		for _, o := range pr.Output {
			b.WriteString(o.Stream + ":" + o.Data)
		}
		out[pr.ID] = b.String() + " exit " + string(rune('0'+*pr.ExitCode))
	}
	if out["before"] != "stdout:before the page\nstderr:<b>bold</b>\n exit 3" || out["after"] != "stdout:after the page\n exit 0" {
		t.Errorf("processes: %q", out)
	}
	if a := st.Approvals[0]; st.Kind != "daemon" || a.ID != "ask-1" || a.Run != "run-9" || a.Recipe != "fix.star" || a.Input["command"] != "git push" {
		t.Errorf("approvals: %+v", st.Approvals)
	}
	resp := p.request(t, "POST", "/api/approvals/ask-1", `{"decision":"deny","message":"not from here"}`, nil)
	if b := body(t, resp); resp.StatusCode != 200 {
		t.Fatalf("answer: %s %s", resp.Status, b)
	}
	got := srv.Approvals().Wait(ctx, []string{"ask-1"}, time.Second)
	if len(got) != 1 || got[0].Decision != "deny" || got[0].By != "remote" || got[0].Message != "not from here" {
		t.Errorf("the queue has %+v", got)
	}
	waitFor(t, "the request to leave the page", func() bool { return len(p.state(t).Approvals) == 0 })
	if resp := p.request(t, "GET", "/api/state", "", str("Bearer another")); resp.StatusCode != 401 {
		t.Errorf("another token: %s", resp.Status)
	}
}
