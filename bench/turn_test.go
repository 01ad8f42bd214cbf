package bench

import (
	"bufio"
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/google/uuid"
)

// agentTurns is how many turns the agent-turn row's session takes, and
// agentTurnPairs how many paired runs the row takes at least.
const (
	agentTurns     = 10
	agentTurnPairs = 15
)

// agentTurn is the row of one agent session through sous: `sous run` of a
// recipe that opens one session of the real Claude Code CLI against the
// scripted model and sends it agentTurns prompts one after another,
// against the same CLI driven directly: the same command line and the
// same stream-json lines on its stdin (recorded from a sous run through a
// wrapper), each turn's prompt sent once the previous turn's result came
// back, as sous does. What sous adds per turn is the difference of the
// two walls over the turns; sous's own start and the embedded daemon's
// are in it too.
func (e *env) agentTurn(t *testing.T) row {
	cli, home, env := scriptedCLI(t)
	recipe := filepath.Join(e.dir, "turns.star")
	src := fmt.Sprintf(`
s = sdk.session(cwd = args["dir"], cli = json.decode(args["cli"]), model = "claude-sonnet-4-6")
for i in range(%d):
    t = s.send("turn %%d" %% i)
    if not t.ok:
        fail("turn %%d: %%s" %% (i, t.result))
s.close()
`, agentTurns)
	if err := os.WriteFile(recipe, []byte(src), 0o644); err != nil {
		t.Fatal(err)
	}
	runSous := func(cli []string) time.Duration {
		cliArg, _ := json.Marshal(cli)
		cmd := exec.Command(e.bin, "run", "--quiet", recipe, "-a", "dir="+home, "-a", "cli="+string(cliArg))
		cmd.Env = env
		start := time.Now()
		if out, err := cmd.CombinedOutput(); err != nil {
			t.Fatalf("sous run: %v\n%s", err, out)
		}
		return time.Since(start)
	}

	// Record what sous gives the CLI: its arguments and its stdin.
	rec := t.TempDir()
	wrapper := filepath.Join(rec, "record.sh")
	script := "#!/bin/sh\nprintf '%s\\n' \"$@\" > " + rec + "/args\nexec tee " + rec + "/stdin | \"$@\"\n"
	if err := os.WriteFile(wrapper, []byte(script), 0o755); err != nil {
		t.Fatal(err)
	}
	runSous(append([]string{wrapper}, cli...))
	argsB, _ := os.ReadFile(filepath.Join(rec, "args"))
	stdinB, _ := os.ReadFile(filepath.Join(rec, "stdin"))
	argv := strings.Split(strings.TrimSuffix(string(argsB), "\n"), "\n")
	lines := bytes.Split(bytes.TrimSuffix(stdinB, []byte("\n")), []byte("\n"))
	if len(argv) <= len(cli) || len(lines) < agentTurns {
		t.Fatalf("the recording has %d args and %d stdin lines", len(argv), len(lines))
	}

	direct := func() time.Duration {
		// A new session id for each run, as sous makes one.
		args := append([]string(nil), argv...)
		for i := range args[:len(args)-1] {
			if args[i] == "--session-id" {
				args[i+1] = uuid.NewString()
			}
		}
		start := time.Now()
		driveCLI(t, args, env, lines)
		return time.Since(start)
	}
	// Whole runs paired, their order alternating: what sous adds per turn,
	// as a share of the CLI's own turn, is a pair's ratio less one. Medians
	// of each side's runs moved by ±15% between runs minutes apart here.
	ratios, viaSous, alone := pairedRatios(max(e.repeats, agentTurnPairs), func() time.Duration { return runSous(cli) }, direct)
	share := medianFloat(ratios) - 1
	perTurn := alone / agentTurns
	added := time.Duration(share * float64(perTurn))
	return row{
		figure:   fmt.Sprintf("one agent session of %d turns (real CLI, scripted model): the time `sous run` adds per turn", agentTurns),
		baseline: "the same CLI, argv and stdin lines driven directly, per turn",
		target:   "at most 10% of it",
		result: fmt.Sprintf("%+.1f ms on %.0f ms (%+.1f%%, the median of %d paired runs, the middle half %+.1f%% to %+.1f%%; whole runs %.2f s vs %.2f s)",
			added.Seconds()*1000, perTurn.Seconds()*1000, share*100, len(ratios),
			(ratios[len(ratios)/4]-1)*100, (ratios[3*len(ratios)/4]-1)*100, viaSous.Seconds(), alone.Seconds()),
		ok: share <= 0.10,
	}
}

// driveCLI runs the CLI with args and env and writes it lines, one at a
// time: after a user message it waits for the turn's result, after a
// control request for its response. Then it closes stdin and waits for
// the CLI to exit.
func driveCLI(t *testing.T, args, env []string, lines [][]byte) {
	t.Helper()
	cmd := exec.Command(args[0], args[1:]...)
	cmd.Env = env
	stdin, err := cmd.StdinPipe()
	if err != nil {
		t.Fatal(err)
	}
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	out := bufio.NewReaderSize(stdout, 1<<16)
	waitFor := func(match func(map[string]any) bool) {
		for {
			line, err := out.ReadBytes('\n')
			if err != nil {
				t.Fatalf("the CLI stopped: %v\n%s", err, stderr.String())
			}
			var m map[string]any
			if json.Unmarshal(line, &m) == nil && match(m) {
				return
			}
		}
	}
	for _, l := range lines {
		var m map[string]any
		if err := json.Unmarshal(l, &m); err != nil {
			t.Fatalf("recorded stdin line %q: %v", l, err)
		}
		if _, err := stdin.Write(append(l, '\n')); err != nil {
			t.Fatal(err)
		}
		switch m["type"] {
		case "user":
			waitFor(func(r map[string]any) bool { return r["type"] == "result" })
		case "control_request":
			id := m["request_id"]
			waitFor(func(r map[string]any) bool {
				resp, _ := r["response"].(map[string]any)
				return r["type"] == "control_response" && resp != nil && resp["request_id"] == id
			})
		}
	}
	stdin.Close()
	io.Copy(io.Discard, out)
	if err := cmd.Wait(); err != nil {
		t.Fatalf("the CLI: %v\n%s", err, stderr.String())
	}
}
