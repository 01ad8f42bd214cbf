package main

import (
	"bytes"
	"errors"
	"io"
	"path/filepath"
	"reflect"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/spf13/cobra"
)

// The flag tests parse command lines without running anything: the command
// under test is built with a runF that keeps its options, swapped into the
// whole command tree, and run through executeRoot as main runs it, so that
// cobra's errors, the flag error func and the exit codes are the real ones.
// The environment is the case's alone (newTestFactory).

// flagCase is one command line: what it parses into (want), or the exact
// stderr and exit code of its refusal (err, code).
type flagCase[P any] struct {
	args []string
	env  []string
	want P
	err  string
	code int
}

// parseWith runs args through the command tree with the command at path
// built by newCmd with a runF that keeps its options: nil when the command
// line was refused before runF.
func parseWith[O any](t *testing.T, env []string, path []string, newCmd func(*Factory, func(*O) error) *cobra.Command, args []string) (opts *O, stderr string, code int) {
	t.Helper()
	var errOut bytes.Buffer
	f := newTestFactory(strings.NewReader(""), io.Discard, &errOut, env)
	root := newCmdRoot(f)
	old, _, err := root.Find(path)
	if err != nil || old.CommandPath() != "sous "+strings.Join(path, " ") {
		t.Fatalf("no command %q in the tree: %v", path, err)
	}
	parent := old.Parent()
	parent.RemoveCommand(old)
	parent.AddCommand(newCmd(f, func(o *O) error {
		opts = o
		return nil
	}))
	refuseUnknownSubcommands(root) // as newCmdRoot does, for a group swapped in
	code = executeRoot(f, root, args)
	return opts, errOut.String(), code
}

// testFlags runs each case on the command at path; project picks what the
// case compares of the parsed options.
func testFlags[O, P any](t *testing.T, path []string, newCmd func(*Factory, func(*O) error) *cobra.Command, project func(*O) P, cases []flagCase[P]) {
	t.Helper()
	for _, c := range cases {
		t.Run(strings.Join(c.args, " "), func(t *testing.T) {
			opts, stderr, code := parseWith(t, c.env, path, newCmd, c.args)
			if c.err != "" {
				if code != c.code || stderr != c.err {
					t.Errorf("exit %d, stderr:\n%s\nwant exit %d, stderr:\n%s", code, stderr, c.code, c.err)
				}
				if opts != nil {
					t.Errorf("the command ran after its refusal, with %+v", project(opts))
				}
				return
			}
			if code != 0 || stderr != "" || opts == nil {
				t.Fatalf("exit %d, stderr %q, ran: %v", code, stderr, opts != nil)
			}
			if got := project(opts); !reflect.DeepEqual(got, c.want) {
				t.Errorf("parsed\n%+v\nwant\n%+v", got, c.want)
			}
		})
	}
}

// args splits a command line on spaces.
func args(line string) []string { return strings.Fields(line) }

// targetURL is where a command's target flags and environment lead, or
// the error resolving them.
func targetURL(t *Target) string {
	url, err := t.URL()
	if err != nil {
		return "error: " + err.Error()
	}
	return url
}

// abs is p made absolute, as --socket paths are.
func abs(t *testing.T, p string) string {
	t.Helper()
	a, err := filepath.Abs(p)
	if err != nil {
		t.Fatal(err)
	}
	return a
}

func TestRunFlags(t *testing.T) {
	type parsed struct {
		Recipe            string
		Args, Allow, Deny []string
		JSON              bool
		URL               string
		Environ           []string
		Shard             string
		FakeModel         string
		Color             colorFlag
		Quiet, Verbose    bool
		Ask               bool
		AskTimeout        time.Duration
		MaxCost           float64
		Notify            []string
		NotifyTimeout     time.Duration
		UI                string
	}
	project := func(o *RunOptions) parsed {
		return parsed{o.Recipe, o.Args, o.Allow, o.Deny, o.JSON, targetURL(o.Target), o.Environ, o.Shard, o.FakeModel, o.Color, o.Quiet, o.Verbose,
			o.Ask, o.AskTimeout, float64(o.MaxCost), o.Notify, o.NotifyTimeout, o.UI}
	}
	env := []string{"SOUS_SOCKET=/run/sous.sock", "HOME=/home/u"}
	testFlags(t, []string{"run"}, newCmdRun, project, []flagCase[parsed]{
		{args: args("run r.star"), want: parsed{Recipe: "r.star", URL: "embedded", Color: "auto", NotifyTimeout: 5 * time.Second}},
		{args: []string{"run", "r.star", "-a", "k=v", "--arg", "task=make it pass", "--json", "--allow", "Bash(go test:*)", "--deny", "Bash(git push:*)"},
			want: parsed{Recipe: "r.star", Args: []string{"k=v", "task=make it pass"}, JSON: true,
				Allow: []string{"Bash(go test:*)"}, Deny: []string{"Bash(git push:*)"}, URL: "embedded", Color: "auto", NotifyTimeout: 5 * time.Second}},
		// The target's defaults and the recipe's environment are the
		// factory's.
		{args: args("run r.star"), env: env, want: parsed{Recipe: "r.star", URL: "unix:///run/sous.sock", Environ: env, Color: "auto", NotifyTimeout: 5 * time.Second}},
		{args: args("run --remote ws://127.0.0.1:8003 r.star"), env: env, want: parsed{Recipe: "r.star", URL: "ws://127.0.0.1:8003", Environ: env, Color: "auto", NotifyTimeout: 5 * time.Second}},
		{args: args("run --shard 1/4 r.star"), want: parsed{Recipe: "r.star", URL: "embedded", Shard: "1/4", Color: "auto", NotifyTimeout: 5 * time.Second}},
		{args: args("run r.star --socket rel.sock"), want: parsed{Recipe: "r.star", URL: "unix://" + abs(t, "rel.sock"), Color: "auto", NotifyTimeout: 5 * time.Second}},
		{args: args("run r.star"), env: []string{"SOUS_REMOTE=ssh://build"}, want: parsed{Recipe: "r.star", URL: "ssh://build", Environ: []string{"SOUS_REMOTE=ssh://build"}, Color: "auto", NotifyTimeout: 5 * time.Second}},
		{args: args("run --fake-model triage.fake.json r.star"), want: parsed{Recipe: "r.star", URL: "embedded", FakeModel: "triage.fake.json", Color: "auto", NotifyTimeout: 5 * time.Second}},
		{args: args("run r.star --fake-model=s.json --socket /run/s.sock"), want: parsed{Recipe: "r.star", URL: "unix:///run/s.sock", FakeModel: "s.json", Color: "auto", NotifyTimeout: 5 * time.Second}},
		{args: args("run r.star --fake-model"), code: 2, err: "sous: flag needs an argument: --fake-model\nRun 'sous run --help' for usage.\n"},
		{args: args("run"), code: 2, err: "sous: run: want 1 argument(s), got 0 (usage: sous run RECIPE.star [-a key=value]... [flags])\n"},
		{args: args("run a.star b.star"), code: 2, err: "sous: run: want 1 argument(s), got 2 (usage: sous run RECIPE.star [-a key=value]... [flags])\n"},
		{args: args("run --bogus x.star"), code: 2, err: "sous: unknown flag: --bogus\nRun 'sous run --help' for usage.\n"},
		{args: args("run r.star --color never -q"), want: parsed{Recipe: "r.star", URL: "embedded", Color: "never", Quiet: true, NotifyTimeout: 5 * time.Second}},
		{args: args("run r.star --color=always --verbose"), want: parsed{Recipe: "r.star", URL: "embedded", Color: "always", Verbose: true, NotifyTimeout: 5 * time.Second}},
		{args: args("run r.star -v"), want: parsed{Recipe: "r.star", URL: "embedded", Color: "auto", Verbose: true, NotifyTimeout: 5 * time.Second}},
		{args: args("run --max-cost 0.05 r.star"), want: parsed{Recipe: "r.star", URL: "embedded", Color: "auto", MaxCost: 0.05, NotifyTimeout: 5 * time.Second}},
		{args: args("run r.star --max-cost=$2"), want: parsed{Recipe: "r.star", URL: "embedded", Color: "auto", MaxCost: 2, NotifyTimeout: 5 * time.Second}},
		{args: args("run r.star --max-cost 0"), code: 2, err: "sous: invalid argument \"0\" for \"--max-cost\" flag: want a positive number of dollars, such as 0.50 or 2\nRun 'sous run --help' for usage.\n"},
		{args: args("run r.star --max-cost -1"), code: 2, err: "sous: invalid argument \"-1\" for \"--max-cost\" flag: want a positive number of dollars, such as 0.50 or 2\nRun 'sous run --help' for usage.\n"},
		{args: args("run r.star --max-cost lots"), code: 2, err: "sous: invalid argument \"lots\" for \"--max-cost\" flag: want a positive number of dollars, such as 0.50 or 2\nRun 'sous run --help' for usage.\n"},
		{args: args("run r.star --max-cost NaN"), code: 2, err: "sous: invalid argument \"NaN\" for \"--max-cost\" flag: want a positive number of dollars, such as 0.50 or 2\nRun 'sous run --help' for usage.\n"},
		{args: args("run r.star --notify http://127.0.0.1:8080/hook --notify https://hooks.example.com/x --notify-timeout 2"),
			want: parsed{Recipe: "r.star", URL: "embedded", Color: "auto", Notify: []string{"http://127.0.0.1:8080/hook", "https://hooks.example.com/x"},
				NotifyTimeout: 2 * time.Second}},
		{args: args("run r.star --notify"), code: 2, err: "sous: flag needs an argument: --notify\nRun 'sous run --help' for usage.\n"},
		{args: args("run r.star -q -v"), code: 2, err: "sous: run: --quiet and --verbose: choose one\n"},
		{args: args("run r.star --ask"), want: parsed{Recipe: "r.star", URL: "embedded", Color: "auto", Ask: true, NotifyTimeout: 5 * time.Second}},
		{args: args("run --ask --ask-timeout 10m r.star"), want: parsed{Recipe: "r.star", URL: "embedded", Color: "auto", Ask: true, AskTimeout: 10 * time.Minute, NotifyTimeout: 5 * time.Second}},
		{args: args("run r.star --ask-timeout=300ms"), want: parsed{Recipe: "r.star", URL: "embedded", Color: "auto", AskTimeout: 300 * time.Millisecond, NotifyTimeout: 5 * time.Second}},
		{args: args("run r.star --ask-timeout 1.5"), want: parsed{Recipe: "r.star", URL: "embedded", Color: "auto", AskTimeout: 1500 * time.Millisecond, NotifyTimeout: 5 * time.Second}},
		{args: args("run r.star --ask-timeout=-1s"), code: 2, err: "sous: run: --ask-timeout: want a duration >= 0, got -1s\n"},
		{args: args("run r.star --ask-timeout soon"), code: 2, err: "sous: invalid argument \"soon\" for \"--ask-timeout\" flag: want a duration such as 30s, 1m30s or 250ms, or a number of seconds such as 1 or 0.5\nRun 'sous run --help' for usage.\n"},
		{args: args("run r.star --color=yes"), code: 2, err: "sous: invalid argument \"yes\" for \"--color\" flag: want auto, always or never, got \"yes\"\nRun 'sous run --help' for usage.\n"},
		{args: args("run --ui 127.0.0.1:0 r.star"), want: parsed{Recipe: "r.star", URL: "embedded", Color: "auto", NotifyTimeout: 5 * time.Second, UI: "127.0.0.1:0"}},
		{args: args("run r.star --ui=:8080"), want: parsed{Recipe: "r.star", URL: "embedded", Color: "auto", NotifyTimeout: 5 * time.Second, UI: ":8080"}},
		{args: args("run r.star --ui"), code: 2, err: "sous: flag needs an argument: --ui\nRun 'sous run --help' for usage.\n"},
	})
}

func TestExecFlags(t *testing.T) {
	type parsed struct {
		Command     []string
		ID, Cwd     string
		Env         map[string]string // the spawn's overlay
		TTY, Detach bool
		Timeout     time.Duration
		URL         string
	}
	project := func(o *ExecOptions) parsed {
		var env map[string]string
		if o.envOverlay != nil {
			env = map[string]string{}
			for k, v := range o.envOverlay {
				env[k] = *v
			}
		}
		if o.url != targetURL(o.Target) {
			t.Errorf("validate kept the URL %q, the target gives %q", o.url, targetURL(o.Target))
		}
		return parsed{o.Command, o.ID, o.Cwd, env, o.TTY, o.Detach, o.Timeout, o.url}
	}
	socketEnv := []string{"SOUS_SOCKET=/run/sous.sock"}
	testFlags(t, []string{"exec"}, newCmdExec, project, []flagCase[parsed]{
		{args: args("exec -- make test"), want: parsed{Command: args("make test"), URL: "embedded"}},
		// Flags end at the command: its own flags are its own.
		{args: args("exec ls -l --tty"), want: parsed{Command: args("ls -l --tty"), URL: "embedded"}},
		// Durations take plain seconds as well as Go's.
		{args: args("exec --timeout 90 -- ./integration.sh"), want: parsed{Command: args("./integration.sh"), Timeout: 90 * time.Second, URL: "embedded"}},
		{args: args("exec --timeout 0.5 -- sleep 1"), want: parsed{Command: args("sleep 1"), Timeout: 500 * time.Millisecond, URL: "embedded"}},
		{args: args("exec --timeout 1m30s -- sleep 1"), want: parsed{Command: args("sleep 1"), Timeout: 90 * time.Second, URL: "embedded"}},
		{args: args("exec --cwd /src -e GOFLAGS=-race -e EMPTY= --id job --tty -- go test ./..."),
			want: parsed{Command: args("go test ./..."), ID: "job", Cwd: "/src", Env: map[string]string{"GOFLAGS": "-race", "EMPTY": ""}, TTY: true, URL: "embedded"}},
		// SOUS_SOCKET names a daemon that outlives sous: --detach is fine.
		{args: args("exec --detach -- ./long-job.sh"), env: socketEnv, want: parsed{Command: args("./long-job.sh"), Detach: true, URL: "unix:///run/sous.sock"}},
		{args: args("exec --remote ssh://build -- true"), env: socketEnv, want: parsed{Command: args("true"), URL: "ssh://build"}},
		{args: args("exec"), code: 2, err: "sous: exec: missing the command to run (sous exec [flags] -- CMD [ARGS...])\n"},
		{args: args("exec --timeout soon -- true"), code: 2, err: "sous: invalid argument \"soon\" for \"--timeout\" flag: want a duration such as 30s, 1m30s or 250ms, or a number of seconds such as 1 or 0.5\nRun 'sous exec --help' for usage.\n"},
		{args: args("exec --timeout -1 -- true"), code: 2, err: "sous: exec: --timeout must not be negative (0: none), got -1s\n"},
		{args: args("exec --detach -- true"), code: 2, err: "sous: exec: --detach needs a daemon that outlives sous: pass --socket or --remote (or set SOUS_SOCKET)\n"},
		{args: args("exec -e X -- true"), code: 2, err: "sous: -e \"X\": want KEY=VALUE\n"},
		{args: args("exec --socket a.sock --remote ssh://h -- true"), code: 2, err: "sous: use either --socket or --remote, not both\n"},
		{args: args("exec -- true"), env: []string{"SOUS_SOCKET=a.sock", "SOUS_REMOTE=ssh://h"}, code: 2,
			err: "sous: SOUS_SOCKET and SOUS_REMOTE are both set; unset one or pass --socket/--remote\n"},
		{args: args("exec --remote bogus://x -- true"), code: 2,
			err: "sous: --remote: target \"bogus://x\": want \"embedded\", unix:///path/to.sock, ssh://[user@]host[:port][/socket] or ws://host:port[/path]\n"},
	})
}

func TestAttachFlags(t *testing.T) {
	type parsed struct {
		ID              string
		FromSeq         int64
		KillOnInterrupt bool
		URL             string
	}
	project := func(o *AttachOptions) parsed { return parsed{o.ID, o.FromSeq, o.KillOnInterrupt, targetURL(o.Target)} }
	testFlags(t, []string{"attach"}, newCmdAttach, project, []flagCase[parsed]{
		{args: args("attach nightly"), env: []string{"SOUS_SOCKET=/tmp/sous.sock"}, want: parsed{ID: "nightly", URL: "unix:///tmp/sous.sock"}},
		{args: args("attach --remote ssh://build nightly --from-seq 120 --kill-on-interrupt"),
			want: parsed{ID: "nightly", FromSeq: 120, KillOnInterrupt: true, URL: "ssh://build"}},
		{args: args("attach"), code: 2, err: "sous: attach: want 1 argument(s), got 0 (usage: sous attach ID)\n"},
		{args: args("attach --from-seq -1 nightly"), code: 2, err: "sous: attach: --from-seq must be 0 or more\n"},
		{args: args("attach --from-seq next nightly"), code: 2,
			err: "sous: invalid argument \"next\" for \"--from-seq\" flag: strconv.ParseInt: parsing \"next\": invalid syntax\nRun 'sous attach --help' for usage.\n"},
	})
}

func TestControlFlags(t *testing.T) {
	t.Run("ps", func(t *testing.T) {
		type parsed struct {
			JSON bool
			URL  string
		}
		project := func(o *PsOptions) parsed { return parsed{o.JSON, targetURL(o.Target)} }
		testFlags(t, []string{"ps"}, newCmdPs, project, []flagCase[parsed]{
			{args: args("ps"), want: parsed{URL: "embedded"}},
			{args: args("ps --json"), env: []string{"SOUS_REMOTE=ssh://build"}, want: parsed{JSON: true, URL: "ssh://build"}},
			{args: args("ps x"), code: 2, err: "sous: unknown command \"x\" for \"sous ps\"\n"},
		})
	})
	t.Run("kill", func(t *testing.T) {
		type parsed struct {
			ID, Signal       string
			Wait, NoEscalate bool
			Grace            time.Duration
		}
		project := func(o *KillOptions) parsed { return parsed{o.ID, o.Signal, o.Wait, o.NoEscalate, o.Grace} }
		testFlags(t, []string{"kill"}, newCmdKill, project, []flagCase[parsed]{
			{args: args("kill nightly"), want: parsed{ID: "nightly"}},
			{args: args("kill nightly --signal INT --wait --grace 10s"), want: parsed{ID: "nightly", Signal: "INT", Wait: true, Grace: 10 * time.Second}},
			{args: args("kill nightly --wait --grace 0.5 --no-escalate"), want: parsed{ID: "nightly", Wait: true, NoEscalate: true, Grace: 500 * time.Millisecond}},
			{args: args("kill nightly --signal 9"), want: parsed{ID: "nightly", Signal: "9"}},
			{args: args("kill"), code: 2, err: "sous: kill: want 1 argument(s), got 0 (usage: sous kill ID)\n"},
			{args: args("kill --signal FOO nightly"), code: 2, err: "sous: kill: --signal: unknown signal \"FOO\" (a name such as TERM, INT, HUP or KILL, or a number)\n"},
			{args: args("kill --grace soon nightly"), code: 2,
				err: "sous: invalid argument \"soon\" for \"--grace\" flag: want a duration such as 30s, 1m30s or 250ms, or a number of seconds such as 1 or 0.5\nRun 'sous kill --help' for usage.\n"},
		})
	})
	t.Run("approvals", func(t *testing.T) {
		type parsed struct {
			JSON bool
			URL  string
		}
		project := func(o *ApprovalsOptions) parsed { return parsed{o.JSON, targetURL(o.Target)} }
		testFlags(t, []string{"approvals"}, newCmdApprovals, project, []flagCase[parsed]{
			{args: args("approvals --socket /run/sous.sock"), want: parsed{URL: "unix:///run/sous.sock"}},
			{args: args("approvals --json"), env: []string{"SOUS_REMOTE=ssh://build"}, want: parsed{JSON: true, URL: "ssh://build"}},
			{args: args("approvals --remote ws://127.0.0.1:8003 --token-file tok --json"), want: parsed{JSON: true, URL: "ws://127.0.0.1:8003"}},
			// The embedded daemon holds no other run's requests: an
			// empty list there would read as "nothing waits".
			{args: args("approvals"), code: 2,
				err: "sous: approvals: pass --socket PATH or --remote URL (or set SOUS_SOCKET or SOUS_REMOTE): the requests wait on the daemon the run uses, and sous's embedded daemon holds none\n"},
			{args: args("approvals --socket a.sock --remote ssh://h"), code: 2, err: "sous: use either --socket or --remote, not both\n"},
			{args: args("approvals alow a1 --socket s"), code: 2,
				err: "sous: unknown command \"alow\" for \"sous approvals\"\n\nDid you mean this?\n\tallow\nRun 'sous approvals --help' for usage.\n"},
			{args: args("approvals --bogus"), code: 2, err: "sous: unknown flag: --bogus\nRun 'sous approvals --help' for usage.\n"},
		})
	})
	t.Run("approvals allow and deny", func(t *testing.T) {
		type parsed struct {
			ID, Decision, Message, URL string
		}
		project := func(o *ApprovalAnswerOptions) parsed { return parsed{o.ID, o.Decision, o.Message, targetURL(o.Target)} }
		testFlags(t, []string{"approvals", "allow"}, newCmdApprovalsAllow, project, []flagCase[parsed]{
			{args: args("approvals allow a1 --socket /run/sous.sock"), want: parsed{ID: "a1", Decision: "allow", URL: "unix:///run/sous.sock"}},
			// The group's target flags may come before the subcommand.
			{args: []string{"approvals", "--remote", "ws://build:8003", "allow", "a1", "-m", "fine, once"},
				want: parsed{ID: "a1", Decision: "allow", Message: "fine, once", URL: "ws://build:8003"}},
			{args: args("approvals allow a1"), code: 2,
				err: "sous: approvals allow: pass --socket PATH or --remote URL (or set SOUS_SOCKET or SOUS_REMOTE): the requests wait on the daemon the run uses, and sous's embedded daemon holds none\n"},
			{args: args("approvals allow --socket s"), code: 2, err: "sous: allow: want 1 argument(s), got 0 (usage: sous approvals allow ID)\n"},
			{args: args("approvals allow a1 a2 --socket s"), code: 2, err: "sous: allow: want 1 argument(s), got 2 (usage: sous approvals allow ID)\n"},
			{args: []string{"approvals", "allow", "", "--socket", "s"}, code: 2, err: "sous: approvals allow: the ID is empty (sous approvals lists the pending ones)\n"},
			{args: args("approvals allow a1 --message"), code: 2, err: "sous: flag needs an argument: --message\nRun 'sous approvals allow --help' for usage.\n"},
		})
		testFlags(t, []string{"approvals", "deny"}, newCmdApprovalsDeny, project, []flagCase[parsed]{
			{args: []string{"approvals", "deny", "a1", "--message", "not on main", "--socket", "/run/sous.sock"},
				want: parsed{ID: "a1", Decision: "deny", Message: "not on main", URL: "unix:///run/sous.sock"}},
			{args: args("approvals deny a1"), env: []string{"SOUS_SOCKET=/run/sous.sock"}, want: parsed{ID: "a1", Decision: "deny", URL: "unix:///run/sous.sock"}},
			{args: args("approvals deny a1"), code: 2,
				err: "sous: approvals deny: pass --socket PATH or --remote URL (or set SOUS_SOCKET or SOUS_REMOTE): the requests wait on the daemon the run uses, and sous's embedded daemon holds none\n"},
		})
	})
	t.Run("rpc", func(t *testing.T) {
		type parsed struct {
			Method, Params string
			HasParams      bool
			URL            string
		}
		project := func(o *RPCOptions) parsed { return parsed{o.Method, o.Params, o.HasParams, targetURL(o.Target)} }
		testFlags(t, []string{"rpc"}, newCmdRPC, project, []flagCase[parsed]{
			{args: args("rpc server.capabilities"), want: parsed{Method: "server.capabilities", URL: "embedded"}},
			{args: []string{"rpc", "--socket", "/tmp/sous.sock", "files.stat", `{"path":"/etc/hosts"}`},
				want: parsed{Method: "files.stat", Params: `{"path":"/etc/hosts"}`, HasParams: true, URL: "unix:///tmp/sous.sock"}},
			// An empty JSON argument is given, and refused when run (below).
			{args: []string{"rpc", "git.info", ""}, want: parsed{Method: "git.info", HasParams: true, URL: "embedded"}},
			{args: args("rpc"), code: 2, err: "sous: rpc: want METHOD and optional JSON params (usage: sous rpc METHOD [JSON|-])\n"},
			{args: args("rpc a b c"), code: 2, err: "sous: rpc: want METHOD and optional JSON params (usage: sous rpc METHOD [JSON|-])\n"},
		})
		// The params are read (from stdin for "-") and checked when rpc
		// runs, before it connects.
		for _, c := range []struct{ arg, stdin, want, err string }{
			{arg: `{"path":"."}`, want: `{"path":"."}`},
			{arg: "-", stdin: " {\"path\": \".\"}\n", want: `{"path": "."}`},
			{arg: "", err: "rpc: params are empty: give a JSON value (or omit PARAMS for none)"},
			{arg: "-", stdin: "\n", err: "rpc: params are empty: give a JSON value (or omit PARAMS for none)"},
			{arg: "{bad", err: "rpc: params are not valid JSON: {bad"},
		} {
			o := &RPCOptions{IO: &IO{In: strings.NewReader(c.stdin)}, Method: "git.info", HasParams: true, Params: c.arg}
			raw, err := o.params()
			var ue *usageError
			switch {
			case c.err != "" && (!errors.As(err, &ue) || err.Error() != c.err):
				t.Errorf("params %q: %v, want the usage error %q", c.arg, err, c.err)
			case c.err == "" && (err != nil || string(raw) != c.want):
				t.Errorf("params %q, stdin %q: %s, %v; want %s", c.arg, c.stdin, raw, err, c.want)
			}
		}
	})
}

func TestModelServeFlags(t *testing.T) {
	testFlags(t, []string{"model", "serve"}, newCmdModelServe, func(o *ModelServeOptions) ModelServeOptions {
		return ModelServeOptions{Script: o.Script, Addr: o.Addr, Log: o.Log}
	},
		[]flagCase[ModelServeOptions]{
			{args: args("model serve --script s.json"), want: ModelServeOptions{Script: "s.json", Addr: "127.0.0.1:0"}},
			{args: args("model serve --script s.json --addr 0.0.0.0:8011 --log requests.jsonl"),
				want: ModelServeOptions{Script: "s.json", Addr: "0.0.0.0:8011", Log: "requests.jsonl"}},
			{args: args("model serve --script=s.json --log -"), want: ModelServeOptions{Script: "s.json", Addr: "127.0.0.1:0", Log: "-"}},
			{args: args("model serve"), code: 2, err: "sous: model serve: --script is required: the JSON file of replies to serve\n"},
			{args: args("model serve --script s.json --addr 8011"), code: 2, err: "sous: --addr \"8011\": want HOST:PORT, e.g. 127.0.0.1:0\n"},
			{args: args("model serve --script s.json extra"), code: 2, err: "sous: unknown command \"extra\" for \"sous model serve\"\n"},
			{args: args("model serve --scrip s.json"), code: 2, err: "sous: unknown flag: --scrip\nRun 'sous model serve --help' for usage.\n"},
			{args: args("model nosuch"), code: 2, err: "sous: unknown command \"nosuch\" for \"sous model\"\nRun 'sous model --help' for usage.\n"},
		})
}

func TestDaemonFlags(t *testing.T) {
	home := []string{"HOME=/home/u"}
	homeSocket := "/home/u/.claude/remote/rpc.sock"
	t.Run("serve", func(t *testing.T) {
		type parsed struct {
			Socket, TokenFile string
			TokenFD           int
			RetainFor         time.Duration
			Listen            []string
			LoginPath         bool
			Environ           []string
			UI                string
		}
		project := func(o *DaemonServeOptions) parsed {
			return parsed{o.Socket, o.TokenFile, o.TokenFD, o.RetainFor, o.Listen, o.LoginPath, o.Environ, o.UI}
		}
		withSocket := append([]string{"SOUS_SOCKET=/run/sous.sock"}, home...)
		testFlags(t, []string{"daemon", "serve"}, newCmdDaemonServe, project, []flagCase[parsed]{
			// Without --socket: $SOUS_SOCKET, else claustrum's under $HOME.
			{args: args("daemon serve --token-fd 0"), env: home,
				want: parsed{Socket: homeSocket, TokenFD: 0, RetainFor: time.Hour, LoginPath: true, Environ: home}},
			{args: args("daemon serve --token-file t"), env: withSocket,
				want: parsed{Socket: "/run/sous.sock", TokenFile: "t", TokenFD: -1, RetainFor: time.Hour, LoginPath: true, Environ: withSocket}},
			{args: []string{"daemon", "serve", "--socket", "", "--listen", "ws://127.0.0.1:8003", "--retain-for", "600", "--login-path=false"},
				want: parsed{TokenFD: -1, RetainFor: 10 * time.Minute, Listen: []string{"ws://127.0.0.1:8003"}}},
			{args: args("daemon serve --replay-mem-limit 0"), code: 2, err: "sous: --replay-mem-limit: want a positive number of bytes, got 0\n"},
			{args: args("daemon serve --log-format x"), code: 2, err: "sous: --log-format: want text or json, got \"x\"\n"},
			{args: args("daemon serve --listen wss://a:1"), code: 2,
				err: "sous: --listen \"wss://a:1\": the daemon serves plain ws://; put TLS in front of it (a reverse proxy) and dial wss:// there\n"},
			{args: []string{"daemon", "serve", "--socket", ""}, code: 2, err: "sous: --socket \"\" needs a --listen ws://HOST:PORT to serve on\n"},
			{args: args("daemon serve --allow-command rel/git"), code: 2,
				err: "sous: --allow-command: allowed command \"rel/git\": want a program name (git) or an absolute path (/usr/bin/git)\n"},
			{args: []string{"daemon", "serve", "--token-fd", "0", "--ui", ":8080"}, env: home,
				want: parsed{Socket: homeSocket, TokenFD: 0, RetainFor: time.Hour, LoginPath: true, Environ: home, UI: ":8080"}},
			{args: args("daemon serve --ui 8080"), code: 2,
				err: "sous: --ui \"8080\": want HOST:PORT or :PORT (e.g. 127.0.0.1:0): address 8080: missing port in address\n"},
			{args: args("daemon serve --ui :http"), code: 2,
				err: "sous: --ui \":http\": the port must be a number from 0 to 65535\n"},
		})
	})
	t.Run("start", func(t *testing.T) {
		type parsed struct {
			Socket, LogFile string
			Wait, RetainFor time.Duration
		}
		project := func(o *DaemonStartOptions) parsed { return parsed{o.Socket, o.LogFile, o.Wait, o.RetainFor} }
		testFlags(t, []string{"daemon", "start"}, newCmdDaemonStart, project, []flagCase[parsed]{
			{args: args("daemon start --token-fd 0"), env: home, want: parsed{Socket: homeSocket, Wait: 10 * time.Second, RetainFor: time.Hour}},
			{args: args("daemon start --socket /run/s.sock --log-file /var/log/s --wait 30 --retain-for 2h"),
				want: parsed{Socket: "/run/s.sock", LogFile: "/var/log/s", Wait: 30 * time.Second, RetainFor: 2 * time.Hour}},
			{args: []string{"daemon", "start", "--socket", ""}, code: 2, err: "sous: start needs a --socket: it waits for the socket, and stop talks to it\n"},
			{args: args("daemon start --wait soon"), code: 2,
				err: "sous: invalid argument \"soon\" for \"--wait\" flag: want a duration such as 30s, 1m30s or 250ms, or a number of seconds such as 1 or 0.5\nRun 'sous daemon start --help' for usage.\n"},
		})
	})
	t.Run("stop", func(t *testing.T) {
		type parsed struct{ Socket, TokenFile, EnvToken string }
		project := func(o *DaemonStopOptions) parsed { return parsed{o.Socket, o.TokenFile, o.Getenv("SOUS_TOKEN")} }
		testFlags(t, []string{"daemon", "stop"}, newCmdDaemonStop, project, []flagCase[parsed]{
			{args: args("daemon stop"), env: append([]string{"SOUS_TOKEN=tok"}, home...), want: parsed{Socket: homeSocket, EnvToken: "tok"}},
			{args: args("daemon stop --token-file tf"), env: []string{"SOUS_SOCKET=/run/sous.sock"}, want: parsed{Socket: "/run/sous.sock", TokenFile: "tf"}},
			{args: args("daemon stop now"), code: 2, err: "sous: unknown command \"now\" for \"sous daemon stop\"\n"},
		})
	})
	t.Run("bridge", func(t *testing.T) {
		project := func(o *DaemonBridgeOptions) string { return o.Socket }
		testFlags(t, []string{"daemon", "bridge"}, newCmdDaemonBridge, project, []flagCase[string]{
			{args: args("daemon bridge"), env: home, want: homeSocket},
			{args: args("daemon bridge --socket /run/sous.sock"), env: home, want: "/run/sous.sock"},
		})
	})
}

func TestGitFilesFlags(t *testing.T) {
	type query struct {
		Args []string
		JSON bool
		URL  string
	}
	projectQuery := func(o *QueryOptions) query { return query{o.Args, o.JSON, targetURL(o.Target)} }
	t.Run("git info", func(t *testing.T) {
		testFlags(t, []string{"git", "info"}, newCmdGitInfo, projectQuery, []flagCase[query]{
			{args: args("git info"), want: query{Args: []string{}, URL: "embedded"}},
			{args: args("git info /src/app --json"), env: []string{"SOUS_REMOTE=ssh://build"}, want: query{Args: args("/src/app"), JSON: true, URL: "ssh://build"}},
			{args: args("git info a b"), code: 2, err: "sous: info: wrong number of arguments (usage: sous git info [PATH])\n"},
		})
	})
	t.Run("files stat", func(t *testing.T) {
		testFlags(t, []string{"files", "stat"}, newCmdFilesStat, projectQuery, []flagCase[query]{
			{args: args("files stat /etc/hosts"), want: query{Args: args("/etc/hosts"), URL: "embedded"}},
			{args: args("files stat"), code: 2, err: "sous: stat: wrong number of arguments (usage: sous files stat PATH)\n"},
		})
	})
	t.Run("worktree create", func(t *testing.T) {
		type parsed struct {
			query
			Repo, Source string
		}
		project := func(o *WorktreeCreateOptions) parsed { return parsed{projectQuery(&o.QueryOptions), o.Repo, o.Source} }
		testFlags(t, []string{"git", "worktree", "create"}, newCmdWorktreeCreate, project, []flagCase[parsed]{
			{args: args("git worktree create feature-x ../wt/feature-x --source main --repo /src/app"),
				want: parsed{query{Args: args("feature-x ../wt/feature-x"), URL: "embedded"}, "/src/app", "main"}},
			{args: args("git worktree create feature-x"), code: 2,
				err: "sous: create: wrong number of arguments (usage: sous git worktree create BRANCH PATH)\n"},
		})
	})
	t.Run("worktree remove", func(t *testing.T) {
		type parsed struct {
			query
			Repo  string
			Force bool
		}
		project := func(o *WorktreeRemoveOptions) parsed { return parsed{projectQuery(&o.QueryOptions), o.Repo, o.Force} }
		testFlags(t, []string{"git", "worktree", "remove"}, newCmdWorktreeRemove, project, []flagCase[parsed]{
			{args: args("git worktree remove --force ../wt/experiment --json"),
				want: parsed{query{Args: args("../wt/experiment"), JSON: true, URL: "embedded"}, "", true}},
		})
	})
	t.Run("files read", func(t *testing.T) {
		type parsed struct {
			query
			MaxBytes    int64
			MaxBytesSet bool
		}
		project := func(o *FilesReadOptions) parsed {
			return parsed{projectQuery(&o.QueryOptions), o.MaxBytes, o.MaxBytesSet}
		}
		testFlags(t, []string{"files", "read"}, newCmdFilesRead, project, []flagCase[parsed]{
			{args: args("files read big.log"), want: parsed{query{Args: args("big.log"), URL: "embedded"}, 0, false}},
			// Given, even as 0: the daemon gets it.
			{args: args("files read big.log --max-bytes 0"), want: parsed{query{Args: args("big.log"), URL: "embedded"}, 0, true}},
			{args: args("files read big.log --max-bytes 1048576"), want: parsed{query{Args: args("big.log"), URL: "embedded"}, 1 << 20, true}},
		})
	})
	t.Run("extract-tar", func(t *testing.T) {
		type parsed struct {
			query
			Modes       string
			KeepArchive bool
		}
		project := func(o *ExtractTarOptions) parsed {
			return parsed{projectQuery(&o.QueryOptions), o.Modes, o.KeepArchive}
		}
		testFlags(t, []string{"files", "extract-tar"}, newCmdExtractTar, project, []flagCase[parsed]{
			{args: args("files extract-tar r.tar.gz out"), want: parsed{query{Args: args("r.tar.gz out"), URL: "embedded"}, "owner", false}},
			{args: args("files extract-tar --modes archive --keep-archive r.tar.gz out"),
				want: parsed{query{Args: args("r.tar.gz out"), URL: "embedded"}, "archive", true}},
			{args: args("files extract-tar --modes x a b"), code: 2, err: "sous: --modes: want owner or archive, got \"x\"\n"},
			{args: args("files extract-tar a"), code: 2, err: "sous: extract-tar: wrong number of arguments (usage: sous files extract-tar ARCHIVE DEST)\n"},
		})
	})
}

func TestMiscFlags(t *testing.T) {
	t.Run("check", func(t *testing.T) {
		project := func(o *CheckOptions) []string { return o.Recipes }
		testFlags(t, []string{"check"}, newCmdCheck, project, []flagCase[[]string]{
			{args: args("check a.star b.star"), want: args("a.star b.star")},
			{args: args("check"), code: 2, err: "sous: sous check needs at least one recipe\nRun 'sous check --help' for usage.\n"},
		})
	})
	t.Run("doc", func(t *testing.T) {
		type parsed struct {
			Index bool
			Name  string
		}
		project := func(o *DocOptions) parsed { return parsed{o.Index, o.Name} }
		testFlags(t, []string{"doc"}, newCmdDoc, project, []flagCase[parsed]{
			{args: args("doc"), want: parsed{Index: true}},
			{args: args("doc files.read"), want: parsed{Name: "files.read"}},
			// An empty NAME is a name (there is no such builtin), not the index.
			{args: []string{"doc", ""}, want: parsed{}},
			{args: args("doc a b"), code: 2, err: "sous: sous doc takes at most one NAME\nRun 'sous doc --help' for usage.\n"},
		})
	})
	t.Run("version", func(t *testing.T) {
		project := func(o *VersionOptions) bool { return o.IO != nil }
		testFlags(t, []string{"version"}, newCmdVersion, project, []flagCase[bool]{
			{args: args("version"), want: true},
			{args: args("version x"), code: 2, err: "sous: unknown command \"x\" for \"sous version\"\n"},
		})
	})
	t.Run("completion", func(t *testing.T) {
		type parsed struct {
			Shell          string
			NoDescriptions bool
		}
		project := func(o *CompletionOptions) parsed { return parsed{o.Shell, o.NoDescriptions} }
		testFlags(t, []string{"completion"}, newCmdCompletion, project, []flagCase[parsed]{
			{args: args("completion bash"), want: parsed{Shell: "bash"}},
			{args: args("completion zsh --no-descriptions"), want: parsed{Shell: "zsh", NoDescriptions: true}},
			{args: args("completion tcsh"), code: 2,
				err: "sous: unknown command \"tcsh\" for \"sous completion\"\n\nDid you mean this?\n\tbash\n\tfish\n\tzsh\nRun 'sous completion --help' for usage.\n"},
		})
	})
}

func TestDurableFlags(t *testing.T) {
	type parsed struct {
		Recipe, Resume, Journal string
		Args                    []string
		JSON, Quiet             bool
		URL                     string
	}
	project := func(o *RunOptions) parsed {
		return parsed{o.Recipe, o.Resume, o.Journal, o.Args, o.JSON, o.Quiet, targetURL(o.Target)}
	}
	testFlags(t, []string{"run"}, newCmdRun, project, []flagCase[parsed]{
		{args: args("run --journal .sous/runs r.star -a k=v"), want: parsed{Recipe: "r.star", Journal: ".sous/runs", Args: []string{"k=v"}, URL: "embedded"}},
		{args: args("run r.star --journal"), code: 2, err: "sous: flag needs an argument: --journal\nRun 'sous run --help' for usage.\n"},
		{args: args("run r.star --no-journal --socket /run/s.sock"), want: parsed{Recipe: "r.star", URL: "unix:///run/s.sock"}},
		{args: args("run r.star --journal j --no-journal"), code: 2, err: "sous: run: --journal and --no-journal: choose one\n"},
		{args: args("run r.star --journal-sync=never"), code: 2,
			err: "sous: invalid argument \"never\" for \"--journal-sync\" flag: want batch or always, got \"never\"\nRun 'sous run --help' for usage.\n"},
	})
	testFlags(t, []string{"resume"}, newCmdResume, project, []flagCase[parsed]{
		{args: args("resume --journal j 3f9c2a7b1d0e4c55 --json -q"), want: parsed{Resume: "3f9c2a7b1d0e4c55", Journal: "j", JSON: true, Quiet: true, URL: "embedded"}},
		{args: args("resume 3f9c2a7b1d0e4c55 --journal j --socket /run/s.sock"), want: parsed{Resume: "3f9c2a7b1d0e4c55", Journal: "j", URL: "unix:///run/s.sock"}},
		{args: args("resume 3f9c2a7b1d0e4c55 --remote ws://h:8003"), want: parsed{Resume: "3f9c2a7b1d0e4c55", URL: "ws://h:8003"}},
		{args: args("resume --journal j"), code: 2, err: "sous: resume: want 1 argument(s), got 0 (usage: sous resume RUN_ID [--journal DIR] [flags])\n"},
		{args: args("resume --journal j ID --journal-sync sometimes"), code: 2,
			err: "sous: invalid argument \"sometimes\" for \"--journal-sync\" flag: want batch or always, got \"sometimes\"\nRun 'sous resume --help' for usage.\n"},
		{args: args("resume --journal j 3f9c2a7b1d0e4c55 -a k=v"), code: 2, err: "sous: unknown shorthand flag: 'a' in -a\nRun 'sous resume --help' for usage.\n"},
		{args: args("resume --journal j ID -q -v"), code: 2, err: "sous: resume: --quiet and --verbose: choose one\n"},
	})
	testFlags(t, []string{"runs"}, newCmdRuns, func(o *RunsOptions) [2]string { return [2]string{o.Journal, strconv.FormatBool(o.JSON)} }, []flagCase[[2]string]{
		{args: args("runs --journal j --json"), want: [2]string{"j", "true"}},
		{args: args("runs --socket /run/s.sock"), want: [2]string{"", "false"}},
		{args: args("runs extra --journal j"), code: 2, err: "sous: unknown command \"extra\" for \"sous runs\"\n"},
	})
}
