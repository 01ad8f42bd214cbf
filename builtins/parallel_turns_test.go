package builtins

import (
	"encoding/json"
	"strings"
	"testing"

	"github.com/seed5ad92d46/sous/internal/claudecli"
	"github.com/seed5ad92d46/sous/internal/modelapi"
)

// TestParallelRunsTurns: fn may return a Pending turn; parallel waits for
// it on the loop and puts its Turn in the item's place.
func TestParallelRunsTurns(t *testing.T) {
	t.Parallel()
	cli := claudecli.Find(t, claudecli.Latest)
	api, err := modelapi.Start(modelapi.Options{Func: func(req *modelapi.Request, _ int) modelapi.Reply {
		text := req.UserText()
		if i := strings.LastIndex(text, "say "); i >= 0 {
			text = text[i+len("say "):]
		}
		return modelapi.Reply{Blocks: []modelapi.Block{modelapi.TextBlock("said " + strings.TrimSpace(text))}}
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
