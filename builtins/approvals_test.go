package builtins

import (
	"context"
	"encoding/json"
	"errors"
	"strings"
	"sync"
	"testing"

	"go.starlark.net/starlark"

	"github.com/seed5ad92d46/sous/runtime"
	"github.com/seed5ad92d46/sous/runtime/rules"
)

// The approver chain without a daemon or an agent: a privileged request
// (what run(..., privileged=True) will send) through the recipe's policy,
// then the runtime's approver. The agent side is tested through sous run
// with the real CLI (cmd/sous/agent_test.go).

// runLoop runs posted callbacks while waiting, like runtime.Loop, without
// its refinements.
type runLoop struct {
	mu sync.Mutex
	q  []func()
}

func (l *runLoop) Post(f func()) {
	l.mu.Lock()
	l.q = append(l.q, f)
	l.mu.Unlock()
}

func (l *runLoop) Wait(ctx context.Context, ready <-chan struct{}) error {
	for {
		l.mu.Lock()
		q := l.q
		l.q = nil
		l.mu.Unlock()
		for _, f := range q {
			f()
		}
		select {
		case <-ready:
			return nil
		case <-ctx.Done():
			return ctx.Err()
		default:
		}
	}
}

// recordingOutput keeps the approvals; processes and agents do not occur.
type recordingOutput struct{ approvals []runtime.ApprovalInfo }

func (o *recordingOutput) Pending(runtime.ApprovalInfo)          {}
func (o *recordingOutput) Spawned(runtime.SpawnInfo)             {}
func (o *recordingOutput) Exited(string, int)                    {}
func (o *recordingOutput) Echo(string) runtime.Echo              { return nil }
func (o *recordingOutput) EchoBeside(string) runtime.Echo        { return nil }
func (o *recordingOutput) Settle()                               {}
func (o *recordingOutput) SpawnStarts()                          {}
func (o *recordingOutput) SpawnEnds()                            {}
func (o *recordingOutput) Agent(string, string, json.RawMessage) {}
func (o *recordingOutput) Approval(a runtime.ApprovalInfo)       { o.approvals = append(o.approvals, a) }
func (o *recordingOutput) Hook(runtime.HookInfo)                 {}
func (o *recordingOutput) Tool(string, string, bool)             {}
func (o *recordingOutput) Progress(runtime.ProgressInfo)         {}
func (o *recordingOutput) Redact(string) bool                    { return true }

type noHosts struct{}

func (noHosts) Default(context.Context) (runtime.Daemon, error) {
	return nil, errors.New("no daemon in this test")
}
func (noHosts) DefaultTarget() string { return "embedded" }
func (noHosts) Open(context.Context, string, string) (runtime.Daemon, error) {
	return nil, errors.New("no daemon in this test")
}
func (noHosts) Close() error { return nil }

// flagApprover stands for the runtime's: it allows "ls" and denies the rest.
type flagApprover struct{ asked []string }

func (a *flagApprover) Approve(req *runtime.ApprovalRequest) (runtime.Answer, *runtime.Waiting) {
	a.asked = append(a.asked, Summary(req.Tool, req.Input))
	if argv, _ := rules.Argv(req.Input); len(argv) > 0 && argv[0] == "ls" {
		return runtime.Answer{Allow: true, By: runtime.ByFlag}, nil
	}
	return runtime.Answer{Message: runtime.DefaultDenyMessage, By: runtime.ByDefault}, nil
}

func TestApprovePrivileged(t *testing.T) {
	t.Parallel()
	out := &recordingOutput{}
	appr := &flagApprover{}
	var aborted error
	env := &runtime.Env{
		Ctx: context.Background(), Table: DefaultTable(), Loop: &runLoop{}, Output: out, Hosts: noHosts{},
		Getenv: func(string) (string, bool) { return "", false }, Approver: appr,
		Abort: func(err error) { aborted = err },
	}
	var seen []string
	predeclared := env.Table.Start(env)
	predeclared["record"] = starlark.NewBuiltin("record", func(_ *starlark.Thread, _ *starlark.Builtin, args starlark.Tuple, _ []starlark.Tuple) (starlark.Value, error) {
		seen = append(seen, args[0].(starlark.String).GoString())
		return starlark.None, nil
	})
	thread := &starlark.Thread{Name: "test"}
	_, err := starlark.ExecFile(thread, "policy.star", `
def policy(req):
    record("%s %s %s %r %r %r %r" % (req.kind, req.tool, req.input["command"], req.input["reason"], req.description, req.session_id, req.tool_use_id))
    prog = req.input["command"][0]
    if prog == "reboot":
        return deny("not today")
    if prog == "explode":
        fail("boom")
    if prog == "apt-get":
        return permissions(allow = ["Sudo(apt-get install:*)"])(req)
    return None

approvals(policy)
`, predeclared)
	if err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		argv  []string
		allow bool
		by    string
		msg   string
	}{
		{[]string{"apt-get", "install", "jq"}, true, runtime.ByRecipe, ""},
		{[]string{"reboot"}, false, runtime.ByRecipe, "not today"},
		{[]string{"apt-get", "remove", "jq"}, false, runtime.ByDefault, runtime.DefaultDenyMessage}, // the rule leaves it to the next
		{[]string{"ls", "/root"}, true, runtime.ByFlag, ""},
	}
	for _, tt := range tests {
		ans, err := approvePrivileged(env, thread, tt.argv, "needs root")
		if err != nil || ans.Allow != tt.allow || ans.By != tt.by || ans.Message != tt.msg {
			t.Errorf("%v: %+v, %v; want allow=%v by %s %q", tt.argv, ans, err, tt.allow, tt.by, tt.msg)
		}
	}
	if want := `privileged Sudo ["apt-get", "install", "jq"] "needs root" "needs root" "" ""`; len(seen) != 4 || seen[0] != want {
		t.Errorf("the policy saw %q, want 4 requests, the first %s", seen, want)
	}
	if got := strings.Join(appr.asked, " | "); got != "apt-get remove jq | ls /root" {
		t.Errorf("the runtime's approver was asked about %s", got)
	}
	var log []string
	for _, a := range out.approvals {
		log = append(log, strings.Join([]string{a.Kind, a.Tool, a.Summary, a.By, a.Message}, ","))
	}
	want := "privileged,Sudo,apt-get install jq,recipe,|privileged,Sudo,reboot,recipe,not today|" +
		"privileged,Sudo,apt-get remove jq,default," + runtime.DefaultDenyMessage + "|privileged,Sudo,ls /root,flag,"
	if got := strings.Join(log, "|"); got != want {
		t.Errorf("approvals logged:\n%s\nwant:\n%s", got, want)
	}

	// A policy that fails denies, aborts the run and says why.
	ans, err := approvePrivileged(env, thread, []string{"explode"}, "")
	var ee *starlark.EvalError
	if !errors.As(err, &ee) || !strings.Contains(ee.Backtrace(), "policy.star:8:13: in policy") || ans.Allow || ans.By != runtime.ByRecipe {
		t.Errorf("failing policy: %+v, %v", ans, err)
		if ee != nil {
			t.Log(ee.Backtrace())
		}
	}
	if aborted != err {
		t.Errorf("the run was aborted with %v, want the policy's error", aborted)
	}
}

func TestSummary(t *testing.T) {
	t.Parallel()
	tests := []struct {
		tool  string
		input map[string]any
		want  string
	}{
		{"Bash", map[string]any{"command": "go test ./...\necho done", "description": "x"}, `go test ./...\necho done`},
		{"Sudo", map[string]any{"command": []any{"apt-get", "install", "a b"}}, "apt-get install 'a b'"},
		{"Write", map[string]any{"file_path": "/x/y", "content": "..."}, "/x/y"},
		{"WebFetch", map[string]any{"url": "https://go.dev", "prompt": "p"}, "https://go.dev"},
		{"Task", map[string]any{"n": 1}, `{"n":1}`},
		{"Bash", map[string]any{"command": strings.Repeat("é", 200)}, strings.Repeat("é", 160) + "…"},
	}
	for _, tt := range tests {
		if got := Summary(tt.tool, tt.input); got != tt.want {
			t.Errorf("Summary(%s, %v) = %q, want %q", tt.tool, tt.input, got, tt.want)
		}
	}
}

func TestJSONValuesRoundTrip(t *testing.T) {
	t.Parallel()
	in := map[string]any{"s": "x", "i": 3.0, "f": 1.5, "b": true, "n": nil, "l": []any{"a", 2.0},
		"num": json.Number("12345678901234567890"), "m": map[string]any{"k": "v"}}
	v := toStarlark(in)
	if got := v.String(); got != `{"b": True, "f": 1.5, "i": 3, "l": ["a", 2], "m": {"k": "v"}, "n": None, "num": 12345678901234567890, "s": "x"}` {
		t.Errorf("toStarlark = %s", got)
	}
	back, err := fromStarlark(v)
	if err != nil {
		t.Fatal(err)
	}
	b, _ := json.Marshal(back)
	if string(b) != `{"b":true,"f":1.5,"i":3,"l":["a",2],"m":{"k":"v"},"n":null,"num":12345678901234567890,"s":"x"}` {
		t.Errorf("fromStarlark = %s", b)
	}
}
