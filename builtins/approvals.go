package builtins

import (
	"context"
	"encoding/json"
	"fmt"
	"math/big"
	"sort"
	"strings"
	"unicode/utf8"

	"go.starlark.net/starlark"
	"go.starlark.net/starlarkstruct"

	"github.com/seed5ad92d46/sous/runtime"
	"github.com/seed5ad92d46/sous/runtime/rules"
)

// The recipe's part of the approver chain (see runtime/approval.go): a
// session's policy and the recipe's approvals(policy) are Starlark
// functions, so the chain runs on the recipe thread: agent sessions post
// their requests to the event loop (see Session.permission), and a
// privileged run, already on the recipe thread, calls approvePrivileged.
// What no policy decided goes to the run's Env.Approver; what only a
// person can decide is waited for off the recipe thread.

// Summary renders what a request asks for in one line, for the log and the
// prompt: the command, the path or the url, else the input as JSON.
func Summary(tool string, input map[string]any) string {
	var s string
	switch {
	case input["command"] != nil:
		if argv, ok := rules.Argv(input); ok {
			s = quoteArgs(argv)
		} else {
			s = fmt.Sprint(input["command"])
		}
	case len(rules.Paths(input)) > 0:
		s = strings.Join(rules.Paths(input), " ")
	case input["url"] != nil:
		s = fmt.Sprint(input["url"])
	default:
		b, _ := json.Marshal(input)
		s = string(b)
	}
	s = strings.ReplaceAll(s, "\n", `\n`)
	const max = 160
	if utf8.RuneCountInString(s) > max {
		s = string([]rune(s)[:max]) + "…"
	}
	return s
}

// decide runs the approver chain for req on the recipe thread: the
// session's policy (nil: none), the recipe's, then Env.Approver. A policy
// that fails denies the request, aborts the run with the policy's error
// (its traceback) and returns that error too. When only a person can
// decide, it returns a *runtime.Waiting instead of an answer: the caller
// waits for the person off the recipe thread (waitForPerson), or through
// the loop on it (approvePrivileged), never holding the recipe thread.
func decide(e *runtime.Env, thread *starlark.Thread, req *runtime.ApprovalRequest, session starlark.Callable) (runtime.Answer, *runtime.Waiting, error) {
	if req.Summary == "" {
		req.Summary = Summary(req.Tool, req.Input)
	}
	// Pending until logApproval says the decision: the status area shows
	// the request meanwhile (a policy that takes its time, a person).
	e.Output.Pending(approvalInfo(req))
	var rv *Request
	st := agentsOf(e)
	steps := []struct {
		policy starlark.Callable
		by     string
	}{{session, runtime.BySession}, {st.policy, runtime.ByRecipe}}
	for _, step := range steps {
		if step.policy == nil {
			continue
		}
		if rv == nil {
			rv = newRequest(e, req)
		}
		st.inPolicy++
		d, err := callPolicy(thread, step.policy, rv)
		st.inPolicy--
		if err != nil {
			ans := runtime.Answer{Message: "the recipe's policy failed: " + err.Error(), By: step.by}
			logApproval(e, req, ans)
			if e.Abort != nil {
				e.Abort(err)
			}
			return ans, nil, err
		}
		if d != nil {
			ans := d.answer()
			ans.By = step.by
			logApproval(e, req, ans)
			return ans, nil, nil
		}
	}
	ans := runtime.Answer{Message: runtime.DefaultDenyMessage, By: runtime.ByDefault}
	if e.Approver != nil {
		var w *runtime.Waiting
		if ans, w = e.Approver.Approve(req); w != nil {
			return runtime.Answer{}, w, nil
		}
	}
	logApproval(e, req, ans)
	return ans, nil, nil
}

// waitForPerson waits for the answer of a person to req (w.Wait: the
// terminal prompt, sous approvals, the web page, the --ask-timeout) and
// logs it. The request is pending again, now with its id, once a person
// can answer it. Any goroutine but the recipe thread; ctx ending (the agent
// withdrew the request) ends the wait.
func waitForPerson(ctx context.Context, e *runtime.Env, req *runtime.ApprovalRequest, w *runtime.Waiting) runtime.Answer {
	ans := w.Wait(ctx, func() { e.Output.Pending(approvalInfo(req)) })
	logApproval(e, req, ans)
	return ans
}

// approvePrivileged asks the approvers whether argv may run with root
// privileges: the recipe's approvals(policy), then the command line's rules,
// a person, the default. It is for run(..., privileged=True) and must be
// called on the recipe thread (from a builtin): waiting for a person, it
// waits on the run's loop, so that agents' requests and tool calls are
// answered meanwhile. A policy error is returned (the run is aborted with
// it too); the answer then denies.
func approvePrivileged(e *runtime.Env, thread *starlark.Thread, argv []string, reason string) (runtime.Answer, error) {
	input := map[string]any{"command": stringsToAny(argv), "reason": reason}
	req := &runtime.ApprovalRequest{Kind: runtime.KindPrivileged, Tool: "Sudo", Input: input, Description: reason}
	ans, w, err := decide(e, thread, req, nil)
	if w == nil {
		return ans, err
	}
	ctx := e.Ctx
	got := make(chan runtime.Answer, 1)
	ready := make(chan struct{})
	go func() {
		got <- waitForPerson(ctx, e, req, w)
		close(ready)
	}()
	e.Loop.Wait(ctx, ready) // ctx ending ends the person's wait too
	return <-got, nil
}

func stringsToAny(ss []string) []any {
	out := make([]any, len(ss))
	for i, s := range ss {
		out[i] = s
	}
	return out
}

// approvalInfo describes a request for the log, before its decision.
func approvalInfo(req *runtime.ApprovalRequest) runtime.ApprovalInfo {
	summary := req.Summary
	if summary == "" {
		summary = Summary(req.Tool, req.Input)
	}
	return runtime.ApprovalInfo{
		ID: req.ID, Kind: req.Kind, Session: req.SessionID, Tool: req.Tool, ToolUseID: req.ToolUseID,
		Summary: summary, Description: req.Description, Input: req.Input,
	}
}

func logApproval(e *runtime.Env, req *runtime.ApprovalRequest, ans runtime.Answer) {
	info := approvalInfo(req)
	info.Allow, info.By = ans.Allow, ans.By
	if !ans.Allow {
		info.Message = ans.Message
	}
	e.Output.Approval(info)
}

// callPolicy calls a policy with a Request and checks what it returned:
// a Decision, or None (nil).
func callPolicy(thread *starlark.Thread, policy starlark.Callable, req *Request) (*Decision, error) {
	v, err := starlark.Call(thread, policy, starlark.Tuple{req}, nil)
	if err != nil {
		return nil, err
	}
	switch d := v.(type) {
	case *Decision:
		return d, nil
	case starlark.NoneType:
		return nil, nil
	}
	// The policy returned: the stack is the recipe's, down to the builtin
	// that was waiting when the request came. That is where the recipe
	// stops, so the traceback shows it, with the policy named.
	where := ""
	if fn, ok := policy.(*starlark.Function); ok {
		where = fmt.Sprintf(" (%s)", fn.Position())
	}
	return nil, &starlark.EvalError{
		Msg:       fmt.Sprintf("policy %s%s returned %s: want approve(...), deny(...) or None", policy.Name(), where, v.Type()),
		CallStack: thread.CallStack(),
	}
}

// Request is a permission request as recipes see it.
type Request struct {
	req   *runtime.ApprovalRequest
	env   *runtime.Env
	input *starlark.Dict // frozen
}

var _ starlark.HasAttrs = (*Request)(nil)

func newRequest(env *runtime.Env, req *runtime.ApprovalRequest) *Request {
	in := toStarlark(req.Input)
	d, ok := in.(*starlark.Dict)
	if !ok {
		d = starlark.NewDict(0)
	}
	d.Freeze()
	return &Request{req: req, env: env, input: d}
}

func (r *Request) String() string {
	return fmt.Sprintf("<Request %s %s %s>", r.req.Kind, r.req.Tool, Summary(r.req.Tool, r.req.Input))
}
func (r *Request) Type() string          { return "Request" }
func (r *Request) Freeze()               {}
func (r *Request) Truth() starlark.Bool  { return starlark.True }
func (r *Request) Hash() (uint32, error) { return 0, fmt.Errorf("unhashable type: Request") }
func (r *Request) Attr(name string) (starlark.Value, error) {
	return r.env.Table.Attr(r.env, "Request", r, nil, name)
}
func (r *Request) AttrNames() []string { return r.env.Table.AttrNames("Request") }

// Decision is what approve() and deny() return.
type Decision struct {
	allow     bool
	input     starlark.Value // the replacement input as given (None: unchanged)
	goInput   map[string]any
	remember  string
	updates   []json.RawMessage // approve(updates=...), checked (sdk_control.go)
	updatesV  starlark.Value    // the same as given, frozen; None when not given
	message   string
	interrupt bool
	env       *runtime.Env
}

var _ starlark.HasAttrs = (*Decision)(nil)

func (d *Decision) answer() runtime.Answer {
	return runtime.Answer{Allow: d.allow, Input: d.goInput, Remember: d.remember, Updates: d.updates, Message: d.message, Interrupt: d.interrupt}
}

func (d *Decision) String() string {
	if d.allow {
		return "<approve>"
	}
	return fmt.Sprintf("<deny %q>", d.message)
}
func (d *Decision) Type() string          { return "Decision" }
func (d *Decision) Freeze()               { d.input.Freeze() }
func (d *Decision) Truth() starlark.Bool  { return starlark.True }
func (d *Decision) Hash() (uint32, error) { return 0, fmt.Errorf("unhashable type: Decision") }
func (d *Decision) Attr(name string) (starlark.Value, error) {
	return d.env.Table.Attr(d.env, "Decision", d, nil, name)
}
func (d *Decision) AttrNames() []string { return d.env.Table.AttrNames("Decision") }

// rulesPolicy is the policy permissions() builds.
type rulesPolicy struct {
	set              rules.Set
	allow, deny, ask []string
}

var _ starlark.Callable = (*rulesPolicy)(nil)

func (p *rulesPolicy) Name() string { return "permissions" }
func (p *rulesPolicy) String() string {
	return fmt.Sprintf("<permissions allow=%s deny=%s ask=%s>", quoteList(p.allow), quoteList(p.deny), quoteList(p.ask))
}
func (p *rulesPolicy) Type() string          { return "policy" }
func (p *rulesPolicy) Freeze()               {}
func (p *rulesPolicy) Truth() starlark.Bool  { return starlark.True }
func (p *rulesPolicy) Hash() (uint32, error) { return 0, fmt.Errorf("unhashable type: policy") }

func (p *rulesPolicy) CallInternal(_ *starlark.Thread, args starlark.Tuple, kwargs []starlark.Tuple) (starlark.Value, error) {
	var v starlark.Value
	if err := starlark.UnpackPositionalArgs("permissions policy", args, kwargs, 1, &v); err != nil {
		return nil, err
	}
	req, ok := v.(*Request)
	if !ok {
		return nil, fmt.Errorf("permissions policy: want a Request, got %s", v.Type())
	}
	verdict, rule := p.set.Decide(req.req.RuleRequest())
	switch verdict {
	case rules.Allowed:
		return &Decision{allow: true, input: starlark.None, env: req.env}, nil
	case rules.Denied:
		msg := fmt.Sprintf("denied by the rule %q", rule.String())
		if rule == rules.GitDefault {
			msg = "denied: permissions() denies writes inside .git by default (allow them with a rule that names .git)"
		}
		return &Decision{message: msg, input: starlark.None, env: req.env}, nil
	}
	return starlark.None, nil
}

func quoteList(ss []string) string {
	q := make([]string, len(ss))
	for i, s := range ss {
		q[i] = fmt.Sprintf("%q", s)
	}
	return "[" + strings.Join(q, ", ") + "]"
}

func approvalEntries() []runtime.Entry {
	return []runtime.Entry{
		{Name: "approve", Sig: "approve(*, input=None, remember=None, updates=None) -> Decision",
			Doc: "What a policy returns to allow a request. input (a dict) replaces the tool's input; the default " +
				"keeps it. remember is a rule in Claude Code syntax (\"Bash(git:*)\") sent to the agent as a " +
				"session-scoped addRules update: whether it applies it is the CLI's decision. updates is a list of " +
				"permission updates sent with the allow as the CLI's updatedPermissions, each a dict: {\"type\": " +
				"\"addRules\"|\"replaceRules\"|\"removeRules\", \"rules\": [\"Bash(git:*)\" or {\"toolName\": ..., " +
				"\"ruleContent\": ...}], \"behavior\": \"allow\"|\"deny\"|\"ask\", \"destination\": ...}, " +
				"{\"type\": \"setMode\", \"mode\": ..., \"destination\": ...} or {\"type\": " +
				"\"addDirectories\"|\"removeDirectories\", \"directories\": [...], \"destination\": ...}; destination " +
				"is \"session\", \"localSettings\", \"projectSettings\", \"userSettings\" or \"cliArg\" " +
				"(Request.suggestions are in this shape). A malformed update fails approve.",
			Fn: approveBuiltin},
		{Name: "deny", Sig: "deny(message, *, interrupt=False) -> Decision",
			Doc: "What a policy returns to refuse a request. The agent sees message as the tool's error result; " +
				"interrupt=True also stops the turn (the CLI then shows its own interruption text instead).",
			Fn: denyBuiltin},
		{Name: "permissions", Sig: "permissions(allow=[], deny=[], ask=[]) -> policy",
			Doc: "A policy from rules in Claude Code syntax: \"Read\" (any use of the tool), \"Bash(go test:*)\" " +
				"(a command whose words start with `go test`), \"Bash(make)\" (exactly that command), " +
				"\"Write(/abs/prefix/**)\" (a glob on file_path, path or notebook_path; ** spans directories; " +
				"relative paths are from the session's cwd; on a local host symlinks are resolved first), " +
				"\"WebFetch(domain:go.dev)\" (the host or a subdomain; a url whose host is unclear matches deny rules " +
				"only), \"mcp__server\". An Edit rule covers every file-editing tool (Write, MultiEdit, NotebookEdit); " +
				"other tool names match exactly. " +
				"A deny rule that matches the request, or any part of a compound shell command, denies it, also " +
				"through wrappers (sudo, env, nice, timeout, xargs, FOO=1, /bin/rm, sh -c ...); " +
				"then an ask rule returns None (the next approver decides); writes inside .git (or to a file named .git) " +
				"are denied unless an allow rule that names .git covers them; then allow rules approve a command only " +
				"when every part is allowed word for word and bash would run nothing else: no substitution, " +
				"arithmetic, ${...} beyond a plain name, assignment, keyword, subshell or redirection to a file; " +
				"no match returns None.",
			Fn: permissionsBuiltin},
		{Name: "approvals", Sig: "approvals(policy)",
			Doc: "Sets the recipe-wide approver, asked after a session's own policy for every session of the run and " +
				"for privileged commands; None removes it. After it come sous run's --allow/--deny rules, then a " +
				"person when one can answer (the prompt when stdin is a terminal, sous approvals with --ask, the web page " +
				"with --ui; the first answer wins), else deny(\"" + runtime.DefaultDenyMessage + "\"). Policies run on the " +
				"recipe thread while it waits (send, wait, sleep, run, ...), one at a time; a policy that fails denies " +
				"the request and fails the recipe with its traceback.",
			Fn: approvalsBuiltin},
		{Name: "Request", Sig: "Request",
			Doc: "A permission request, the argument of a policy: a tool use by an agent, or a privileged command."},
		{Name: "Request.kind", Sig: "Request.kind -> string", Doc: `"tool" (an agent's tool use) or "privileged" (run(..., privileged=True)).`,
			Attr: attr(func(r *Request) starlark.Value { return starlark.String(r.req.Kind) })},
		{Name: "Request.tool", Sig: "Request.tool -> string", Doc: `The tool: "Bash", "Write", ...; "Sudo" for a privileged command.`,
			Attr: attr(func(r *Request) starlark.Value { return starlark.String(r.req.Tool) })},
		{Name: "Request.input", Sig: "Request.input -> dict",
			Doc:  `The tool's input as the agent sent it (frozen); for a privileged command {"command": [...], "reason": ...}.`,
			Attr: attr(func(r *Request) starlark.Value { return r.input })},
		{Name: "Request.tool_use_id", Sig: "Request.tool_use_id -> string", Doc: `The agent's id of the tool use ("" for privileged commands).`,
			Attr: attr(func(r *Request) starlark.Value { return starlark.String(r.req.ToolUseID) })},
		{Name: "Request.description", Sig: "Request.description -> string",
			Doc:  `What the CLI says the tool use does ("" when it says nothing); the reason of a privileged command.`,
			Attr: attr(func(r *Request) starlark.Value { return starlark.String(r.req.Description) })},
		{Name: "Request.session_id", Sig: "Request.session_id -> string",
			Doc:  `The session's id, as in Turn.session_id ("" for privileged commands).`,
			Attr: attr(func(r *Request) starlark.Value { return starlark.String(r.req.SessionID) })},
		{Name: "Decision", Sig: "Decision", Doc: "What approve() and deny() return, and a policy passes on."},
		{Name: "Decision.behavior", Sig: "Decision.behavior -> string", Doc: `"allow" or "deny".`,
			Attr: attr(func(d *Decision) starlark.Value {
				if d.allow {
					return starlark.String("allow")
				}
				return starlark.String("deny")
			})},
		{Name: "Decision.message", Sig: "Decision.message -> string", Doc: `The deny message ("" for approve).`,
			Attr: attr(func(d *Decision) starlark.Value { return starlark.String(d.message) })},
		{Name: "Decision.input", Sig: "Decision.input -> dict or None", Doc: "The replacement input of approve(input=...), else None.",
			Attr: attr(func(d *Decision) starlark.Value { return d.input })},
		{Name: "Decision.remember", Sig: "Decision.remember -> string or None", Doc: "The rule of approve(remember=...), else None.",
			Attr: attr(func(d *Decision) starlark.Value {
				if d.remember == "" {
					return starlark.None
				}
				return starlark.String(d.remember)
			})},
		{Name: "Decision.interrupt", Sig: "Decision.interrupt -> bool", Doc: "Whether deny(..., interrupt=True) also stops the turn.",
			Attr: attr(func(d *Decision) starlark.Value { return starlark.Bool(d.interrupt) })},
	}
}

func approveBuiltin(c *runtime.Call) (starlark.Value, error) {
	var input starlark.Value = starlark.None
	var remember string
	d := &Decision{allow: true, input: starlark.None, updatesV: starlark.None, env: c.Env}
	if err := bind(c, 0, opt("input", value(&input)), opt("remember", optStr(&remember)),
		opt("updates", permissionUpdateList(&d.updates, &d.updatesV))); err != nil {
		return nil, err
	}
	if input != starlark.None {
		dict, ok := input.(*starlark.Dict)
		if !ok {
			return nil, c.Errorf("input: want dict or None, got %s", input.Type())
		}
		goIn, err := fromStarlark(dict)
		if err != nil {
			return nil, c.Errorf("input%v", err)
		}
		d.input, d.goInput = dict, goIn.(map[string]any)
	}
	if remember != "" {
		r, err := rules.Parse(remember)
		if err != nil {
			return nil, c.Errorf("remember: %v", err)
		}
		d.remember = r.String()
	}
	return d, nil
}

func denyBuiltin(c *runtime.Call) (starlark.Value, error) {
	var message string
	var interrupt bool
	if err := bind(c, 1, req("message", str(&message)), opt("interrupt", boolean(&interrupt))); err != nil {
		return nil, err
	}
	if strings.TrimSpace(message) == "" {
		return nil, c.Errorf("message: empty; say why, the agent reads it")
	}
	return &Decision{message: message, interrupt: interrupt, input: starlark.None, env: c.Env}, nil
}

func permissionsBuiltin(c *runtime.Call) (starlark.Value, error) {
	p := &rulesPolicy{set: rules.Set{DenyGitWrites: true}}
	if err := bind(c, 3, opt("allow", strList(&p.allow)), opt("deny", strList(&p.deny)), opt("ask", strList(&p.ask))); err != nil {
		return nil, err
	}
	var err error
	if p.set.Allow, err = rules.ParseList("allow", p.allow); err != nil {
		return nil, c.Errorf("%v", err)
	}
	if p.set.Deny, err = rules.ParseList("deny", p.deny); err != nil {
		return nil, c.Errorf("%v", err)
	}
	if p.set.Ask, err = rules.ParseList("ask", p.ask); err != nil {
		return nil, c.Errorf("%v", err)
	}
	return p, nil
}

func approvalsBuiltin(c *runtime.Call) (starlark.Value, error) {
	var policy starlark.Callable
	if err := bind(c, 1, req("policy", optCallable(&policy))); err != nil {
		return nil, err
	}
	agentsOf(c.Env).policy = policy
	return starlark.None, nil
}

// optCallable binds a function or None (which leaves *dst nil).
func optCallable(dst *starlark.Callable) param {
	return paramFunc(func(v starlark.Value) error {
		if v == starlark.None {
			*dst = nil
			return nil
		}
		fn, ok := v.(starlark.Callable)
		if !ok {
			return want("function or None", v)
		}
		*dst = fn
		return nil
	})
}

// toStarlark converts a JSON-like Go value (from encoding/json) to
// Starlark. Whole float64s become ints: JSON has one number type, and a
// line number or a count should read as 3, not 3.0.
func toStarlark(v any) starlark.Value {
	switch x := v.(type) {
	case nil:
		return starlark.None
	case bool:
		return starlark.Bool(x)
	case string:
		return starlark.String(x)
	case float64:
		if x == float64(int64(x)) && x > -1<<53 && x < 1<<53 {
			return starlark.MakeInt64(int64(x))
		}
		return starlark.Float(x)
	case int:
		return starlark.MakeInt(x)
	case int64:
		return starlark.MakeInt64(x)
	case json.Number:
		if i, err := x.Int64(); err == nil {
			return starlark.MakeInt64(i)
		}
		if i, ok := new(big.Int).SetString(string(x), 10); ok {
			return starlark.MakeBigInt(i)
		}
		if f, err := x.Float64(); err == nil {
			return starlark.Float(f)
		}
		return starlark.String(x.String())
	case []any:
		l := make([]starlark.Value, len(x))
		for i, e := range x {
			l[i] = toStarlark(e)
		}
		return starlark.NewList(l)
	case []string:
		l := make([]starlark.Value, len(x))
		for i, e := range x {
			l[i] = starlark.String(e)
		}
		return starlark.NewList(l)
	case map[string]any:
		keys := make([]string, 0, len(x))
		for k := range x {
			keys = append(keys, k)
		}
		sort.Strings(keys)
		d := starlark.NewDict(len(x))
		for _, k := range keys {
			d.SetKey(starlark.String(k), toStarlark(x[k]))
		}
		return d
	}
	return starlark.String(fmt.Sprint(v))
}

// fromStarlark converts a Starlark value made of dicts with string keys,
// lists, tuples, strings, numbers, bools and None into JSON-like Go. The
// error locates the bad element ("[\"content\"]: want ..., got function").
func fromStarlark(v starlark.Value) (any, error) {
	switch x := v.(type) {
	case starlark.NoneType:
		return nil, nil
	case starlark.Bool:
		return bool(x), nil
	case starlark.String:
		return string(x), nil
	case starlark.Bytes:
		return string(x), nil
	case starlark.Int:
		if i, ok := x.Int64(); ok {
			return i, nil
		}
		return json.Number(x.String()), nil
	case starlark.Float:
		return float64(x), nil
	case *starlark.Dict:
		out := make(map[string]any, x.Len())
		for _, item := range x.Items() {
			k, ok := starlark.AsString(item[0])
			if !ok {
				return nil, fmt.Errorf(" key %s: want string, got %s", item[0], item[0].Type())
			}
			e, err := fromStarlark(item[1])
			if err != nil {
				return nil, fmt.Errorf("[%q]%v", k, err)
			}
			out[k] = e
		}
		return out, nil
	case *starlark.List, starlark.Tuple:
		// Only real sequences: a range is Indexable too, and range(10**12)
		// would never finish converting.
		seq := x.(starlark.Indexable)
		out := make([]any, seq.Len())
		for i := range out {
			e, err := fromStarlark(seq.Index(i))
			if err != nil {
				return nil, fmt.Errorf("[%d]%v", i, err)
			}
			out[i] = e
		}
		return out, nil
	}
	return nil, fmt.Errorf(": want a JSON value (dict, list, string, number, bool or None), got %s", v.Type())
}

// structOf builds a struct from ordered fields.
func structOf(fields starlark.StringDict) starlark.Value {
	return starlarkstruct.FromStringDict(starlarkstruct.Default, fields)
}
