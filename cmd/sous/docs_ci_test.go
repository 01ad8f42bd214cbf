package main

import (
	"encoding/json"
	"math"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"

	"github.com/seed5ad92d46/sous/internal/claudecli"
	"github.com/seed5ad92d46/sous/runtime/agent/fakemodel"
)

// TestShardGatheringOfTheCIDoc runs four shards of a recipe with --json
// and --max-cost, as the matrix of docs/CI.md does, each with an agent
// turn of a known cost and its part of a parallel() whose item 3 fails,
// then the doc's gather step (its jq program and shell lines) over their
// files laid out as download-artifact lays them out: the totals match
// the events, the step summary gets its table, and the step fails
// because a shard failed.
func TestShardGatheringOfTheCIDoc(t *testing.T) {
	t.Parallel()
	if _, err := exec.LookPath("jq"); err != nil {
		t.Skip("jq is not installed (.ci/run installs it)")
	}
	w := newAgentWorld(t, claudecli.Latest, fakemodel.Options{Func: func(*fakemodel.Request, int) fakemodel.Reply {
		return pricedText("ok")
	}})
	src := `
s = sdk.session(cwd = args["dir"], cli = json.decode(args["cli"]), model = "claude-sonnet-4-6")
s.send("hello")
res = parallel(list(range(8)), lambda i: spawn(["sh", "-c", "exit %d" % (1 if i == 3 else 0)], echo = False), limit = 2)
if [r for r in res if r != None and not r.ok]:
    fail("a task failed")
`
	work := t.TempDir()
	for i := range 4 {
		o := w.run(src, "--shard", strconv.Itoa(i)+"/4", "--json", "--max-cost", "1")
		if want := map[bool]int{true: 1, false: 0}[i == 3]; o.code != want {
			t.Fatalf("shard %d: exit %d, want %d\n%s", i, o.code, want, o.stderr)
		}
		dir := filepath.Join(work, "shards", "shard-"+strconv.Itoa(i))
		os.MkdirAll(dir, 0o755)
		if err := os.WriteFile(filepath.Join(dir, "shard.jsonl"), []byte(o.stdout), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	os.MkdirAll(filepath.Join(work, ".github"), 0o755)
	if err := os.WriteFile(filepath.Join(work, ".github", "sous-shards.jq"), []byte(docBlock(t, "CI.md", "# .github/sous-shards.jq")), 0o644); err != nil {
		t.Fatal(err)
	}
	// The gather job's last step: the lines of its run: | block, dedented.
	workflow := docBlock(t, "CI.md", "# .github/workflows/shards.yml")
	m := regexp.MustCompile(`(?s)- name: Sum up the shards\n(\s*)run: \|\n(.*)$`).FindStringSubmatch(workflow)
	if m == nil {
		t.Fatalf("no gather step in:\n%s", workflow)
	}
	indent := m[1] + "  "
	var script []string
	for _, line := range strings.Split(m[2], "\n") {
		script = append(script, strings.TrimPrefix(line, indent))
	}
	summary := filepath.Join(work, "step-summary.md")
	cmd := exec.Command("bash", "-e", "-c", strings.Join(script, "\n"))
	cmd.Dir = work
	cmd.Env = append(os.Environ(), "GITHUB_STEP_SUMMARY="+summary)
	out, err := cmd.CombinedOutput()
	if ee, ok := err.(*exec.ExitError); !ok || ee.ExitCode() != 1 {
		t.Errorf("the gather step: %v, want exit 1 (a shard failed)\n%s", err, out)
	}
	var got struct {
		Shards       int     `json:"shards"`
		ShardsOK     int     `json:"shards_ok"`
		ShardsFailed int     `json:"shards_failed"`
		TasksDone    int     `json:"tasks_done"`
		TasksFailed  int     `json:"tasks_failed"`
		CostUSD      float64 `json:"cost_usd"`
	}
	b, err := os.ReadFile(filepath.Join(work, "summary.json"))
	if err != nil {
		t.Fatal(err)
	}
	if err := json.Unmarshal(b, &got); err != nil {
		t.Fatalf("summary.json: %v\n%s", err, b)
	}
	if got.Shards != 4 || got.ShardsOK != 3 || got.ShardsFailed != 1 || got.TasksDone != 8 || got.TasksFailed != 1 ||
		math.Abs(got.CostUSD-4*requestCost) > 1e-9 {
		t.Errorf("summary %s, want 4 shards, 3 ok, 1 failed, 8 tasks done, 1 failed, $%g", b, 4*requestCost)
	}
	table, err := os.ReadFile(summary)
	if err != nil {
		t.Fatal(err)
	}
	if want := "| 3 | 1 | 8 | 1 | 0.0123"; !strings.Contains(string(table), want) {
		t.Errorf("step summary lacks %q:\n%s", want, table)
	}
}
