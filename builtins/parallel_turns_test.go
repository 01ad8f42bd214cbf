package builtins

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/seed5ad92d46/sous/internal/claudecli"
	"github.com/seed5ad92d46/sous/runtime/agent/fakemodel"
)

// TestParallelRunsTurns: fn may return a Pending turn; parallel waits for
// it on the loop and puts its Turn in the item's place.
func TestParallelRunsTurns(t *testing.T) {
	t.Parallel()
	cli := claudecli.Find(t, claudecli.Latest)
	api, err := fakemodel.Start(fakemodel.Options{Func: func(req *fakemodel.Request, _ int) fakemodel.Reply {
		text := req.UserText()
		if i := strings.LastIndex(text, "say "); i >= 0 {
			text = text[i+len("say "):]
		}
		return fakemodel.Reply{Blocks: []fakemodel.Block{fakemodel.TextBlock("said " + strings.TrimSpace(text))}}
	}})
	if err != nil {
		t.Fatal(err)
	}
	defer api.Close()
	cliJSON, _ := json.Marshal(cli)
	envJSON, _ := json.Marshal(claudecli.Env(t.TempDir(), api.URL()))
	f := newFixture(t).withEmbeddedDaemon()
	f.args["cli"], f.args["env"] = string(cliJSON), string(envJSON)
	f.run(`
words = ["alpha", "beta", "gamma"]
sessions = [sdk.session(cwd = args["dir"], cli = json.decode(args["cli"]), env = json.decode(args["env"])) for _ in words]
turns = parallel(list(range(3)), lambda i: sessions[i].start("say " + words[i]), limit=2)
print([(type(t), t.ok, t.text) for t in turns])
`).expect(t, 0, `[("Turn", True, "said alpha"), ("Turn", True, "said beta"), ("Turn", True, "said gamma")]`)
}

// TestParallelFailFastInterruptsTurns: a failed process stops a turn that
// waits for the model: the turn is interrupted, parallel fails at once
// naming the process's item, and the session is usable afterwards (a
// deferred turn of the same session gets its answer).
func TestParallelFailFastInterruptsTurns(t *testing.T) {
	t.Parallel()
	cli := claudecli.Find(t, claudecli.Latest)
	hold := make(chan struct{})
	defer close(hold)
	f := newFixture(t).withEmbeddedDaemon()
	arrived := filepath.Join(f.dir, "arrived")
	var held atomic.Bool
	api, err := fakemodel.Start(fakemodel.Options{Func: func(req *fakemodel.Request, _ int) fakemodel.Reply {
		// Only the first: the CLI may send "hold on" again with the next
		// prompt, in the same user message.
		if strings.Contains(req.UserText(), "hold on") && !held.Swap(true) {
			os.WriteFile(arrived, nil, 0o644)
			return fakemodel.Reply{Blocks: []fakemodel.Block{fakemodel.TextBlock("never")}, Hold: hold}
		}
		return fakemodel.Reply{Blocks: []fakemodel.Block{fakemodel.TextBlock("here")}}
	}})
	if err != nil {
		t.Fatal(err)
	}
	defer api.Close()
	cliJSON, _ := json.Marshal(cli)
	envJSON, _ := json.Marshal(claudecli.Env(t.TempDir(), api.URL()))
	f.args["cli"], f.args["env"] = string(cliJSON), string(envJSON)
	start := time.Now()
	f.run(`
s = sdk.session(cwd = args["dir"], cli = json.decode(args["cli"]), env = json.decode(args["env"]))
defer(lambda: print("after:", s.send("are you there").text))
def task(i):
    if i == 0:
        return s.start("hold on")
    # Fails once the turn waits for the model.
    return spawn(["sh", "-c", 'while [ ! -e "$0/arrived" ]; do sleep 0.05; done; exit 1', args["dir"]], echo=False)
parallel([0, 1], task, fail_fast=True)
`).expect(t, 1, `parallel: item 1 (1): status "failed", exit code 1`, "after: here")
	if el := time.Since(start); el > 30*time.Second {
		t.Errorf("took %s: the held turn was not interrupted", el)
	}
}
