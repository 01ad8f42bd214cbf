package main

import (
	"bytes"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/seed5ad92d46/sous/daemon"
	"github.com/seed5ad92d46/sous/internal/claudecli"
	"github.com/seed5ad92d46/sous/internal/testutil"
)

// sousEnv runs a command line in process with exactly env as sous's
// environment.
func sousEnv(env []string, args ...string) outcome {
	var stdout, stderr bytes.Buffer
	code := execute(newTestFactory(strings.NewReader(""), &stdout, &stderr, env), args)
	return outcome{code: code, stdout: stdout.String(), stderr: stderr.String()}
}

// TestRunFakeModelRefusals: --fake-model needs a daemon on this machine
// and a good script; otherwise the run stops before the recipe starts,
// with one line (and, with --json, a start and an end event).
func TestRunFakeModelRefusals(t *testing.T) {
	t.Parallel()
	recipe := testutil.WriteTree(t, map[string]string{"r.star": `print("ran")`})
	r := filepath.Join(recipe, "r.star")
	good := writeScript(t, `[{"text": "hi"}]`)
	bad := writeScript(t, `[{"text": "hi"}, {"txt": "typo"}]`)
	remote := func(target string) string {
		return "sous: --fake-model: the scripted model listens on this machine's loopback, which the CLIs " + target +
			" starts could not reach; run on the embedded daemon or a --socket daemon on this machine\n"
	}
	tests := []struct {
		args []string
		env  []string
		want string
	}{
		{[]string{"run", "--remote", "ws://127.0.0.1:1", "--fake-model", good, r}, nil, remote("ws://127.0.0.1:1")},
		{[]string{"run", "--fake-model", good, r}, []string{"SOUS_REMOTE=ssh://build.example"}, remote("ssh://build.example")},
		{[]string{"run", "--fake-model", bad, r}, nil,
			"sous: --fake-model: " + bad + `:1: reply 2: unknown key "txt" (want "text", "tool_use", "structured_output", "blocks", "error", "usage", "stop_reason", "when" or "comment")` + "\n"},
		{[]string{"run", "--fake-model", good + ".missing", r}, nil, "sous: --fake-model: open " + good + ".missing: no such file or directory\n"},
	}
	for _, tt := range tests {
		o := sousEnv(tt.env, tt.args...)
		if o.code != 2 || o.stderr != tt.want || o.stdout != "" {
			t.Errorf("%v: exit %d\nstdout %q\nstderr %q\nwant exit 2, stderr %q", tt.args, o.code, o.stdout, o.stderr, tt.want)
		}
	}
	o := sousEnv(nil, "run", "--json", "--remote", "ssh://h", "--fake-model", good, r)
	events := o.events(t)
	if o.code != 2 || len(events) != 2 || events[0]["event"] != "start" || events[1]["event"] != "end" ||
		!strings.HasPrefix(events[1]["error"].(string), "--fake-model: the scripted model listens on this machine's loopback") {
		t.Errorf("--json: exit %d, events %v", o.code, events)
	}
}

// TestRunFakeModelEnv: a --fake-model run's environment points at the
// scripted model (getenv, and the processes of the embedded daemon) and
// carries nothing that would send a CLI elsewhere; a reply nobody asked
// for is reported when the run ends.
func TestRunFakeModelEnv(t *testing.T) {
	t.Parallel()
	recipe := testutil.WriteTree(t, map[string]string{"r.star": `
print("getenv:", getenv("ANTHROPIC_BASE_URL")[:17], getenv("ANTHROPIC_API_KEY"))
r = run("sh", ["-c", "echo $ANTHROPIC_BASE_URL $ANTHROPIC_API_KEY auth=${ANTHROPIC_AUTH_TOKEN-unset} bedrock=${CLAUDE_CODE_USE_BEDROCK-unset} $CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC $KEEP"], echo = False)
print("child:", r.stdout.strip())
`})
	script := writeScript(t, `[{"text": "nobody asks"}, {"text": "nor this"}]`)
	env := []string{"PATH=" + os.Getenv("PATH"), "ANTHROPIC_BASE_URL=https://api.anthropic.com", "ANTHROPIC_API_KEY=sk-real",
		"ANTHROPIC_AUTH_TOKEN=secret", "CLAUDE_CODE_USE_BEDROCK=1", "KEEP=kept"}
	o := sousEnv(env, "run", "--fake-model", script, filepath.Join(recipe, "r.star"))
	o.expect(t, 0, "getenv: http://127.0.0.1: sous-fake-model\n",
		"sous: --fake-model: replies 1, 2 of "+script+" not used\n")
	child := o.stderrLines("child: ")
	if len(child) != 1 || !strings.HasPrefix(child[0], "child: http://127.0.0.1:") ||
		!strings.HasSuffix(child[0], " sous-fake-model auth=unset bedrock=unset 1 kept") {
		t.Errorf("the child's environment: %q", child)
	}
}

// TestRunFakeModelSocketHost: on a socket daemon, whose environment is
// its own, the session still talks to the scripted model, whatever the
// daemon's environment and the session's env= say.
func TestRunFakeModelSocketHost(t *testing.T) {
	t.Parallel()
	cli := claudecli.Find(t, claudecli.Latest)
	dead := "http://127.0.0.1:9" // nothing listens: a CLI sent there fails
	daemonEnv := []string{"PATH=" + os.Getenv("PATH"), "LANG=C.UTF-8"}
	for k, v := range claudecli.Env(t.TempDir(), dead) {
		daemonEnv = append(daemonEnv, k+"="+v)
	}
	sock, _ := socketDaemon(t, "tok", daemon.Config{ShutdownGrace: time.Second, Env: daemonEnv})
	dir, err := filepath.EvalSymlinks(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	cliJSON, _ := json.Marshal(cli)
	recipe := testutil.WriteTree(t, map[string]string{"r.star": `
t = sdk.send("hello socket", cwd = args["dir"], cli = json.decode(args["cli"]), env = {"ANTHROPIC_BASE_URL": "` + dead + `"})
print("turn:", t.ok, t.text)
`})
	script := writeScript(t, `[{"text": "scripted, via the socket daemon", "when": {"prompt_contains": "hello socket"}}]`)
	o := sousEnv([]string{"SOUS_TOKEN=tok"}, "run", "--socket", sock, "--fake-model", script, filepath.Join(recipe, "r.star"),
		"-a", "dir="+dir, "-a", "cli="+string(cliJSON))
	o.expect(t, 0, "turn: True scripted, via the socket daemon\n")
	if strings.Contains(o.stderr, "--fake-model:") {
		t.Errorf("the script did not fit the run:\n%s", o.stderr)
	}
}

// TestRunFakeModelSessionOnWSHost: a session on a host elsewhere could not
// reach the scripted model, so it does not start (rather than talk to a
// real one).
func TestRunFakeModelSessionOnWSHost(t *testing.T) {
	t.Parallel()
	d := serveDaemonProc(t, "tok", 1, "--socket", "", "--listen", "ws://127.0.0.1:0")
	ws := strings.TrimSuffix(d.url(t, wsLine), "/")
	o, _ := runStar(t, `
h = host("`+ws+`", token = "tok")
print("host ok")
h.sdk.session(cli = "claude-is-never-started")
`, "--fake-model", writeScript(t, `[{"text": "hi"}]`))
	o.expect(t, 1, "host ok\n", "Error in sdk.session: sdk.session: --fake-model: the session's model is on this machine, which a CLI on "+ws+
		" could not reach; start the session on the embedded daemon or a unix:// host\n")
}
