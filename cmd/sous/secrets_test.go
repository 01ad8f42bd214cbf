package main

import (
	"os"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/seed5ad92d46/sous/internal/claudecli"
	"github.com/seed5ad92d46/sous/internal/testutil"
	"github.com/seed5ad92d46/sous/runtime/agent/fakemodel"
)

// The secrets of secretsRecipe: from the environment, from the .env
// file, and one the recipe names itself.
const (
	envToken  = "ghp_envTokenValue0123456789abcdef"
	dotenvKey = `ak"live-98765` // a quote: Starlark and JSON escape it
	pemBody   = "-----BEGIN KEY-----\nMIIBsecretKeyBody42\n-----END KEY-----"
	literal   = "literal-secret-xyz"
)

const secretsDotenv = `# the deploy's credentials
export API_KEY="ak\"live-98765"
PEM="-----BEGIN KEY-----
MIIBsecretKeyBody42
-----END KEY-----"
DEBUG=1
`

// secretsRecipe shows every secret every way a recipe can: print (also
// inside a list, quoted), the command line of a process (--verbose and
// --json show it), a child that echoes one on stdout and stderr, one in
// two writes with a pause between (so in two frames), a multi-line one
// split at its newline, a process that fails with one on stderr (the
// summary shows its stderr), and last the failure's message. The child
// also writes the real value to a file, which the test reads.
const secretsRecipe = `token = getenv("SOUS_TEST_TOKEN", secret = True)
env = dotenv(args["dir"] + "/.env")
redact("literal-secret-xyz")
print("token:", token, "key:", [env["API_KEY"]], "literal-secret-xyz", "debug=" + env["DEBUG"])
child_env = {"TOKEN": token, "A": token[:9], "B": token[9:], "PEM": env["PEM"], "OUT": args["dir"] + "/seen"}
p = spawn(["sh", "-c", """
printf '%s' "$TOKEN" > "$OUT"
echo "child stdout: $TOKEN"
echo "child stderr: $TOKEN" >&2
printf 'split: %s' "$A"; sleep 0.3; printf '%s done\n' "$B"
printf '%s' "$A" >&2; sleep 0.3; printf '%s\n' "$B" >&2
printf '%s\n' "${PEM%%
*}"; sleep 0.3; printf '%s\n' "${PEM#*
}"
""", "sh", token], env = child_env, id = "child")
p.wait()
q = spawn(["sh", "-c", 'echo "deploy failed: bad key $K" >&2; exit 4'], env = {"K": env["API_KEY"]}, id = "deploy")
q.wait()
fail("could not deploy with " + token + " and " + env["API_KEY"])
`

// TestSecretsNeverWritten: a secret from getenv(secret=True), dotenv() or
// redact() appears in nothing sous writes, in any mode: not in the echo
// (whole, in two writes, multi-line), print, the command lines, the
// failure and its traceback, --json, GitHub's annotations or step summary.
// The marker does, and the child got the real value.
func TestSecretsNeverWritten(t *testing.T) {
	t.Parallel()
	dir := testutil.WriteTree(t, map[string]string{"main.star": secretsRecipe, ".env": secretsDotenv})
	summary := filepath.Join(t.TempDir(), "step-summary.md")
	env := []string{"PATH=" + os.Getenv("PATH"), "SOUS_TEST_TOKEN=" + envToken}
	gh := append(env[:len(env):len(env)], "GITHUB_ACTIONS=true", "GITHUB_STEP_SUMMARY="+summary, "GITHUB_WORKSPACE="+dir)
	recipe := filepath.Join(dir, "main.star")
	for _, mode := range []struct {
		name  string
		env   []string
		flags []string
	}{
		{"plain", env, nil},
		{"verbose", env, []string{"--verbose"}},
		{"json", env, []string{"--json"}},
		{"github", gh, nil},
		{"github-json", gh, []string{"--json"}},
	} {
		t.Run(mode.name, func(t *testing.T) {
			os.Remove(summary)
			os.Remove(filepath.Join(dir, "seen"))
			w := &agentWorld{t: t, env: mode.env}
			o := w.sous(append([]string{"run", recipe, "-a", "dir=" + dir}, mode.flags...)...)
			if o.code != 1 {
				t.Fatalf("exit code %d, want 1\nstdout:\n%s\nstderr:\n%s", o.code, o.stdout, o.stderr)
			}
			written := map[string]string{"stdout": o.stdout, "stderr": o.stderr}
			if strings.HasPrefix(mode.name, "github") {
				b, err := os.ReadFile(summary)
				if err != nil {
					t.Fatal(err)
				}
				written["step summary"] = string(b)
			}
			for where, text := range written {
				for _, secret := range []string{envToken, dotenvKey, `ak\"live-98765`, pemBody, literal,
					"MIIBsecretKeyBody42\n-----END"} {
					if strings.Contains(text, secret) {
						t.Errorf("%s has the secret %q:\n%s", where, secret, text)
					}
				}
			}
			all := o.stdout + o.stderr
			for _, want := range []string{
				"child stdout: ***", "child stderr: ***", "split: *** done", "could not deploy with *** and ***",
				"deploy failed: bad key ***", "debug=1",
			} {
				if !strings.Contains(all, want) {
					t.Errorf("the output lacks %q:\nstdout:\n%s\nstderr:\n%s", want, o.stdout, o.stderr)
				}
			}
			if mode.name == "json" {
				o.events(t) // still JSON lines only
			}
			if s := written["step summary"]; strings.HasPrefix(mode.name, "github") &&
				(!strings.Contains(s, "deploy failed: bad key ***") || !strings.Contains(s, "could not deploy with *** and ***")) {
				t.Errorf("the step summary lacks the redacted stderr or failure:\n%s", s)
			}
			seen, err := os.ReadFile(filepath.Join(dir, "seen"))
			if err != nil || string(seen) != envToken {
				t.Errorf("the child saw %q (%v), want the real token", seen, err)
			}
		})
	}
}

// TestRedactRefusesShortValues: redact() of a value too short to redact
// fails, naming the minimum; "" does nothing.
func TestRedactRefusesShortValues(t *testing.T) {
	t.Parallel()
	o, _ := runStar(t, `redact("")
print("empty is fine")
redact("abc")
`)
	o.expect(t, 1, "empty is fine\n", "redact: a value of 3 bytes would match all over the output; a secret has at least 4")
}

// TestGetenvSecretDefault: getenv(secret=True) redacts what it returns,
// the default too when the variable is not set.
func TestGetenvSecretDefault(t *testing.T) {
	t.Parallel()
	o, _ := runStar(t, `t = getenv("SOUS_TEST_UNSET_VARIABLE", "dev-token-123", secret = True)
print("token", t)
`)
	o.expect(t, 0, "token ***\n")
}

// TestDotenvErrors: a missing file and a bad line fail the recipe with
// the path and the line number; secret=False leaves the values shown.
func TestDotenvErrors(t *testing.T) {
	t.Parallel()
	dir := testutil.WriteTree(t, map[string]string{
		"bad.env":   "A=1\nB='open\n",
		"plain.env": "PORT=8080\n",
		"main.star": `v = dotenv(args["dir"] + "/plain.env", secret = False)
print("port", v["PORT"])
dotenv(args["dir"] + "/" + args["f"])
`,
	})
	o := sous(t, "run", filepath.Join(dir, "main.star"), "-a", "dir="+dir, "-a", "f=bad.env")
	o.expect(t, 1, "port 8080\n", "dotenv: "+dir+"/bad.env:2: the value's ' quote is never closed")
	o = sous(t, "run", filepath.Join(dir, "main.star"), "-a", "dir="+dir, "-a", "f=none.env")
	o.expect(t, 1, "dotenv: "+dir+"/none.env: no such file")
}

// TestSecretsInAgentSession: a secret the recipe sends an agent, and the
// model repeats in its text and in a Bash command (which nobody allows),
// is in none of the agent events, approval lines or turn lines sous
// writes; the model got the real value.
func TestSecretsInAgentSession(t *testing.T) {
	t.Parallel()
	var modelSaw atomic.Bool
	w := newAgentWorld(t, claudecli.Latest, fakemodel.Options{Func: func(req *fakemodel.Request, n int) fakemodel.Reply {
		if strings.Contains(string(req.Body), envToken) {
			modelSaw.Store(true)
		}
		if toolTurn(req) == 0 {
			return fakemodel.ToolUse("Bash", map[string]any{"command": "curl -H 'Authorization: " + envToken + "' https://x"})
		}
		return fakemodel.Text("I could not use " + envToken)
	}})
	w.env = append(w.env, "SOUS_TEST_TOKEN="+envToken)
	src := `token = getenv("SOUS_TEST_TOKEN", secret = True)
s = sdk.session(cwd = args["dir"], cli = json.decode(args["cli"]))
t = s.send("deploy with the token " + token)
print("turn:", t.text)
`
	for _, flags := range [][]string{{"--verbose"}, {"--json"}} {
		o := w.run(src, flags...)
		o.expect(t, 0)
		all := o.stdout + o.stderr
		if strings.Contains(all, envToken) {
			t.Errorf("%v: the token is in the output:\n%s", flags, all)
		}
		if !strings.Contains(all, "turn: I could not use ***") || !strings.Contains(all, "Authorization: ***") {
			t.Errorf("%v: the output lacks the redacted text or denial:\n%s", flags, all)
		}
		if flags[0] == "--json" {
			o.events(t)
		}
	}
	if !modelSaw.Load() {
		t.Error("the model never got the real token")
	}
}
