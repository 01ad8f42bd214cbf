package main

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/seed5ad92d46/sous/internal/claudecli"
	"github.com/seed5ad92d46/sous/runtime/agent/fakemodel"
)

// The CLI prices each scripted request of these tests: 1000 input and 5
// output tokens of claude-sonnet-4-6 cost $0.003075.
const requestCost = 0.003075

// pricedText is a text reply that costs requestCost.
func pricedText(text string) fakemodel.Reply {
	r := fakemodel.Text(text)
	r.InputTokens = 1000
	return r
}

// TestRunMaxCost: a run capped at $0.005 spends $0.003075 on its first turn
// (budget() says so, and the cap), then its second turn reaches the cap: the
// recipe stops there, failing at that line with what was spent and the
// cap, whether the turn's send or the run's abort stopped it; the turn a
// deferred call then tries is refused without reaching the model; the
// summary shows the spend against the cap. The CLI itself was capped at
// what remained, so it ended the second turn with error_max_budget_usd.
func TestRunMaxCost(t *testing.T) {
	t.Parallel()
	for _, version := range []string{claudecli.WebSocket, claudecli.Latest} {
		t.Run(version, func(t *testing.T) {
			t.Parallel()
			w := newAgentWorld(t, version, fakemodel.Options{Func: func(req *fakemodel.Request, n int) fakemodel.Reply {
				return pricedText("reply " + firstPromptOfTurn(req))
			}})
			o := w.run(`
s = sdk.session(cwd = args["dir"], cli = json.decode(args["cli"]), model = "claude-sonnet-4-6")
t1 = s.send("one")
b = budget()
print("after one:", t1.ok, b.spent == t1.cost_usd, b.spent, b.limit)
defer(s.send, "three")
s.send("two")
print("not reached")
`, "--max-cost", "0.005", "--verbose")
			o.expect(t, 1, "after one: True True 0.003075 0.005",
				"main.star:7:7: in <toplevel>\nError in Session.send: Session.send: budget exceeded: the run's agent sessions spent $0.0062 of its --max-cost $0.0050",
				"failure at "+filepath.Join(w.dir, "main.star")+":7: s.send(\"two\")",
				// The deferred turn is refused.
				"Session.send: budget exceeded: the run's agent sessions spent $0.0062 of its --max-cost $0.0050",
				"· 1 session · $0.0062 of $0.0050 budget",
				// The CLI had what remained as its own --max-budget-usd.
				"turn error_max_budget_usd")
			if strings.Contains(o.stderr, "not reached") {
				t.Error("the recipe went on past its budget")
			}
			if n := len(w.api.Scripted()); n != 2 {
				t.Errorf("the model got %d requests, want 2 (the deferred turn must be refused)", n)
			}
		})
	}
}

// TestRunMaxCostCountsTheCLIsTotal: a session's second result says the
// cost of both turns (the CLI's running total), so two turns of $0.003075
// spend $0.00615, under a $0.007 cap: the run succeeds and its end event
// says so. Adding up the results' totals (0.003075 + 0.00615) would pass
// the cap and fail the run.
func TestRunMaxCostCountsTheCLIsTotal(t *testing.T) {
	t.Parallel()
	w := newAgentWorld(t, claudecli.Latest, fakemodel.Options{Func: func(req *fakemodel.Request, n int) fakemodel.Reply {
		return pricedText("ok")
	}})
	o := w.run(`
s = sdk.session(cwd = args["dir"], cli = json.decode(args["cli"]), model = "claude-sonnet-4-6")
t1 = s.send("one")
t2 = s.send("two")
print("spent:", budget().spent < 0.0062, budget().spent > 0.0061, t2.cost_usd)
`, "--max-cost", "0.007", "--json")
	o.expect(t, 0)
	ev := o.events(t)
	var logs []string
	for _, e := range ev {
		if e["event"] == "log" {
			logs = append(logs, e["text"].(string))
		}
	}
	if len(logs) != 1 || logs[0] != "spent: True True 0.00615" {
		t.Errorf("log events %q, want the spend of both turns once", logs)
	}
	end := ev[len(ev)-1]
	b, _ := end["budget"].(map[string]any)
	if end["event"] != "end" || end["status"] != "ok" || b == nil || b["limit"] != 0.007 ||
		b["spent"].(float64) < 0.0061 || b["spent"].(float64) > 0.0062 {
		t.Errorf("end event %v, want ok with budget spent 0.00615 of 0.007", end)
	}
}

// TestRunMaxCostInterruptsRunningTurns: while one session's turn is held
// by the model, another session's turn spends past the cap: the held turn
// is interrupted (its result is error_during_execution, long before the
// model would let go), the turn queued behind it is dropped without
// reaching the model, and the run fails naming what was spent.
func TestRunMaxCostInterruptsRunningTurns(t *testing.T) {
	t.Parallel()
	hold := make(chan struct{})
	defer close(hold)
	var w *agentWorld
	w = newAgentWorld(t, claudecli.Latest, fakemodel.Options{Func: func(req *fakemodel.Request, n int) fakemodel.Reply {
		if firstPromptOfTurn(req) == "hold on" {
			os.WriteFile(filepath.Join(w.dir, "held"), nil, 0o644)
			return fakemodel.Reply{Blocks: []fakemodel.Block{fakemodel.TextBlock("never")}, Hold: hold}
		}
		return pricedText("spent")
	}})
	start := time.Now()
	o := w.run(`
cli = json.decode(args["cli"])
a = sdk.session(cwd = args["dir"], cli = cli, model = "claude-sonnet-4-6")
b = sdk.session(cwd = args["dir"], cli = cli, model = "claude-sonnet-4-6")
p = b.start("hold on")
while not files.stat(args["dir"] + "/held").exists:
    sleep(0.05)
q = b.start("queued after")
defer(p.wait, timeout = 60)
defer(q.wait, timeout = 60)
a.send("spend")
print("not reached")
`, "--max-cost", "0.003", "--json")
	if d := time.Since(start); d > 60*time.Second {
		t.Errorf("the run took %s: the held turn was not interrupted", d)
	}
	o.expect(t, 1, "budget exceeded: the run's agent sessions spent $0.0031 of its --max-cost $0.0030")
	ev := o.events(t)
	interrupted := false
	for _, e := range ev {
		if e["event"] == "log" && strings.Contains(e["text"].(string), "not reached") {
			t.Error("the recipe went on past its budget")
		}
		m, _ := e["message"].(map[string]any)
		if e["event"] == "agent" && m["type"] == "result" && m["subtype"] == "error_during_execution" {
			interrupted = true
		}
	}
	for _, r := range w.api.Scripted() {
		if firstPromptOfTurn(r) == "queued after" {
			t.Error("the queued turn reached the model after the budget was spent")
		}
	}
	if !strings.Contains(o.stdout, `deferred Pending.wait`) || strings.Count(o.stdout, "budget exceeded") < 3 {
		t.Errorf("want both deferred waits to fail with the budget error:\n%.3000s", o.stdout)
	}
	if !interrupted {
		t.Errorf("no interrupted turn in the events:\n%s", o.stdout)
	}
	end := ev[len(ev)-1]
	if end["event"] != "end" || !strings.Contains(end["error"].(string), "spent $0.0031 of its --max-cost $0.0030") {
		t.Errorf("end event %v, want the budget error", end)
	}
}

// TestRunMaxCostStopsTheRecipeWhereItIs: a turn started with start()
// spends past the cap while the recipe sleeps: the recipe is stopped in
// its sleep at once (not 30 s later), failing at that line with the
// budget's message.
func TestRunMaxCostStopsTheRecipeWhereItIs(t *testing.T) {
	t.Parallel()
	w := newAgentWorld(t, claudecli.Latest, fakemodel.Options{Func: func(req *fakemodel.Request, n int) fakemodel.Reply {
		return pricedText("spent")
	}})
	start := time.Now()
	o := w.run(`
s = sdk.session(cwd = args["dir"], cli = json.decode(args["cli"]), model = "claude-sonnet-4-6")
p = s.start("spend")
sleep(30)
print("not reached")
`, "--max-cost", "0.001")
	if d := time.Since(start); d > 20*time.Second {
		t.Errorf("the run took %s: the sleep was not stopped", d)
	}
	o.expect(t, 1, "main.star:4:6: in <toplevel>\nError in sleep: sleep: budget exceeded: the run's agent sessions spent $0.0031 of its --max-cost $0.0010")
	if strings.Contains(o.stderr, "not reached") {
		t.Error("the recipe went on past its budget")
	}
}

// TestBudgetWithoutCap: without --max-cost, budget() has spent nothing
// and has no limit; it takes no argument.
func TestBudgetWithoutCap(t *testing.T) {
	t.Parallel()
	o, _ := runStar(t, "b = budget()\nprint(\"budget:\", b.spent, b.limit)\n")
	o.expect(t, 0, "budget: 0.0 None")
	o, _ = runStar(t, "budget(1)\n")
	o.expect(t, 1, "budget: got 1 positional arguments, want at most 0")
}
