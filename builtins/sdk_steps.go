package builtins

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"math"
	"strings"
	"time"

	"go.starlark.net/starlark"

	"github.com/seed5ad92d46/sous/runtime"
	"github.com/seed5ad92d46/sous/runtime/agent"
)

// A session as a programmable step: its output schema, hooks and budget
// (the sdk.session keywords output_schema, hooks, max_budget_usd), the
// hook() builtin and Turn.structured_output. runtime/agent does the
// protocol; hooks run on the recipe thread as policies do.

func hookEntries() []runtime.Entry {
	return []runtime.Entry{
		{Name: "hook", Journal: runtime.JournalPure, Sig: "hook(fn, *, matcher=None, timeout=None) -> HookDef",
			Doc: "A hook for sdk.session(hooks={event: [hook(...), ...]}). fn(input) is called on the recipe thread, as " +
				"a policy is, with the CLI's hook input as a frozen dict (hook_event_name, session_id, cwd, and per event " +
				"tool_name, tool_input, tool_use_id, tool_response, prompt, stop_hook_active, ...). It returns None (no " +
				"opinion) or a dict sent to the CLI as the hook's JSON output as it is: {\"decision\": \"block\", " +
				"\"reason\": ...}, {\"continue\": False, \"stopReason\": ...}, or {\"hookSpecificOutput\": " +
				"{\"hookEventName\": \"PreToolUse\", \"permissionDecision\": \"deny\", \"permissionDecisionReason\": ...}} " +
				"(\"allow\" with \"updatedInput\" replaces the tool's input; PostToolUse's \"additionalContext\" reaches " +
				"the model). A hook that fails fails the recipe with its traceback. matcher (a string: \"Bash\", " +
				"\"Write|Edit\", a regular expression; the CLI matches it) narrows PreToolUse and PostToolUse hooks to " +
				"some tools. timeout (seconds) is how long the CLI waits; past it the CLI withdraws the call and the " +
				"hook's answer is dropped.",
			Fn: hookBuiltin},
		{Name: "HookDef", Sig: "HookDef", Doc: "A hook from hook(), for the hooks of sdk.session."},
		{Name: "Turn.structured_output", Sig: "Turn.structured_output -> dict, list, string, number, bool or None",
			Doc: "The value the turn produced for the session's output_schema, validated by the CLI (frozen); None when " +
				"the turn produced none.",
			Attr: attr((*Turn).structuredOutput)},
	}
}

// stepOptions are the sdk.session keywords of this file.
type stepOptions struct {
	schema map[string]any
	hooks  map[string][]*HookDef
	budget *float64
}

func (o *stepOptions) bindings() []binding {
	return []binding{
		opt("output_schema", jsonSchema(&o.schema)),
		opt("hooks", hookMap(&o.hooks)),
		opt("max_budget_usd", dollars(&o.budget)),
	}
}

// apply puts what the engine needs straight from the keywords into opt;
// the hooks wait for their session (Session.hookOptions).
func (o *stepOptions) apply(opt *agent.Options) {
	opt.OutputSchema = o.schema
	if o.budget != nil {
		opt.MaxBudgetUSD = *o.budget
	}
}

// jsonSchema binds a JSON Schema: a dict of JSON values, or None.
func jsonSchema(dst *map[string]any) param {
	return paramFunc(func(v starlark.Value) error {
		if v == starlark.None {
			return nil
		}
		d, ok := v.(*starlark.Dict)
		if !ok {
			return want("dict (a JSON Schema) or None", v)
		}
		g, err := fromStarlark(d)
		if err != nil {
			s := err.Error() // `["properties"]: want a JSON value ..., got function`
			if i := strings.Index(s, ": want "); i >= 0 {
				return &argError{path: s[:i], msg: s[i+2:]}
			}
			return err
		}
		*dst = g.(map[string]any)
		return nil
	})
}

// dollars binds a positive amount of dollars (int or float), or None.
func dollars(dst **float64) param {
	return paramFunc(func(v starlark.Value) error {
		var f float64
		switch x := v.(type) {
		case starlark.NoneType:
			return nil
		case starlark.Int:
			f = float64(x.Float())
		case starlark.Float:
			f = float64(x)
		default:
			return want("dollars (int or float) or None", v)
		}
		if !(f > 0) || math.IsInf(f, 0) {
			return fmt.Errorf("want more than 0 dollars, got %s", v)
		}
		*dst = &f
		return nil
	})
}

// hookMap binds hooks: a dict from event name to a list of hook(...)
// values, or None. Events are checked here, so a wrong one fails before
// the CLI starts.
func hookMap(dst *map[string][]*HookDef) param {
	return paramFunc(func(v starlark.Value) error {
		if v == starlark.None {
			return nil
		}
		d, ok := v.(*starlark.Dict)
		if !ok {
			return want("dict (event name: list of hook(...)) or None", v)
		}
		out := make(map[string][]*HookDef, d.Len())
		for _, item := range d.Items() {
			event, ok := starlark.AsString(item[0])
			if !ok {
				return &argError{path: " key " + item[0].String(), msg: want("string (an event name)", item[0]).Error()}
			}
			if err := agent.CheckHookEvent(event); err != nil {
				return err
			}
			path := fmt.Sprintf("[%q]", event)
			list, ok := item[1].(starlark.Indexable)
			if _, isStr := item[1].(starlark.String); !ok || isStr {
				return &argError{path: path, msg: want("list of hook(...)", item[1]).Error()}
			}
			var defs []*HookDef
			for i := range list.Len() {
				h, ok := list.Index(i).(*HookDef)
				if !ok {
					return &argError{path: fmt.Sprintf("%s[%d]", path, i), msg: want("hook(...)", list.Index(i)).Error()}
				}
				defs = append(defs, h)
			}
			out[event] = defs
		}
		*dst = out
		return nil
	})
}

// HookDef is what hook() returns.
type HookDef struct {
	fn      starlark.Callable
	matcher string
	timeout time.Duration // 0: the CLI's default
}

var _ starlark.Value = (*HookDef)(nil)

func (h *HookDef) String() string {
	s := "<hook " + h.fn.Name()
	if h.matcher != "" {
		s += fmt.Sprintf(" matcher=%q", h.matcher)
	}
	if h.timeout > 0 {
		s += " timeout=" + formatSeconds(h.timeout)
	}
	return s + ">"
}
func (h *HookDef) Type() string          { return "HookDef" }
func (h *HookDef) Freeze()               { h.fn.Freeze() }
func (h *HookDef) Truth() starlark.Bool  { return starlark.True }
func (h *HookDef) Hash() (uint32, error) { return 0, fmt.Errorf("unhashable type: HookDef") }

func hookBuiltin(c *runtime.Call) (starlark.Value, error) {
	var fn starlark.Value
	var matcher string
	var timeout *time.Duration
	if err := bind(c, 1, req("fn", value(&fn)), opt("matcher", optStr(&matcher)), opt("timeout", optSeconds(&timeout))); err != nil {
		return nil, err
	}
	callable, ok := fn.(starlark.Callable)
	if !ok {
		return nil, c.Errorf("fn: want a function, got %s", fn.Type())
	}
	h := &HookDef{fn: callable, matcher: matcher}
	if timeout != nil {
		if *timeout <= 0 {
			return nil, c.Errorf("timeout: want more than 0 seconds")
		}
		h.timeout = *timeout
	}
	return h, nil
}

// hookOptions turns the session's hook(...) values into the engine's
// hooks, each calling its function on the recipe thread.
func (s *Session) hookOptions(defs map[string][]*HookDef) map[string][]agent.Hook {
	if len(defs) == 0 {
		return nil
	}
	out := make(map[string][]agent.Hook, len(defs))
	for event, list := range defs {
		for _, def := range list {
			out[event] = append(out[event], agent.Hook{Matcher: def.matcher, Timeout: def.timeout, Func: s.hookFunc(def)})
		}
	}
	return out
}

// hookAnswer is the recipe thread's answer to one hook call.
type hookAnswer struct {
	out map[string]any
	err error
}

// hookFunc is a hook's agent.Hook.Func. It runs on a goroutine of the
// engine; the hook's function runs on the recipe thread, at its next wait,
// in the order the CLI called, while this goroutine waits for it. A call
// the CLI withdraws (its timeout) or a session that ends meanwhile gets no
// answer.
func (s *Session) hookFunc(def *HookDef) func(ctx context.Context, call agent.HookCall) (map[string]any, error) {
	return func(ctx context.Context, call agent.HookCall) (map[string]any, error) {
		done := make(chan hookAnswer, 1)
		s.hooked.post(call.Seq, func() {
			if ctx.Err() != nil {
				return // nobody waits for this answer any more
			}
			if s.env.Ctx.Err() != nil || s.env.RecipeEnded() {
				done <- hookAnswer{} // the recipe is stopping: no opinion
				return
			}
			out, err := s.callHook(def, call)
			done <- hookAnswer{out, err}
		}, s.env.Loop.Post)
		select {
		case a := <-done:
			return a.out, a.err
		case <-ctx.Done():
			return nil, ctx.Err()
		}
	}
}

// callHook calls a hook's function on the recipe thread with the call's
// input, logs its answer, and checks what it returned: a dict of JSON
// values, or None. A failure aborts the run (its traceback is the
// recipe's error), as a failed policy does.
func (s *Session) callHook(def *HookDef, call agent.HookCall) (map[string]any, error) {
	dec := json.NewDecoder(bytes.NewReader(call.Input))
	dec.UseNumber()
	var in map[string]any
	if err := dec.Decode(&in); err != nil || in == nil {
		in = map[string]any{}
	}
	input := frozen(toStarlark(in))
	st := agentsOf(s.env)
	st.inPolicy++
	v, err := starlark.Call(s.thread, def.fn, starlark.Tuple{input}, nil)
	st.inPolicy--
	var out map[string]any
	if err == nil {
		out, err = hookOutput(s.thread, def, v)
	}
	if err != nil {
		if s.env.Abort != nil {
			s.env.Abort(err)
		}
		return nil, err
	}
	s.logHook(call, in, out)
	return out, nil
}

// hookOutput checks what a hook's function returned.
func hookOutput(thread *starlark.Thread, def *HookDef, v starlark.Value) (map[string]any, error) {
	// The function returned: the stack is the recipe's, down to the
	// builtin that was waiting when the call came, where the recipe stops.
	where := ""
	if fn, ok := def.fn.(*starlark.Function); ok {
		where = fmt.Sprintf(" (%s)", fn.Position())
	}
	fail := func(format string, args ...any) error {
		msg := fmt.Sprintf("hook %s%s returned ", def.fn.Name(), where) + fmt.Sprintf(format, args...)
		return &starlark.EvalError{Msg: msg, CallStack: thread.CallStack()}
	}
	switch x := v.(type) {
	case starlark.NoneType:
		return nil, nil
	case *starlark.Dict:
		g, err := fromStarlark(x)
		if err != nil {
			return nil, fail("a dict that is not JSON: %s", strings.TrimLeft(err.Error(), ": "))
		}
		return g.(map[string]any), nil
	}
	return nil, fail("%s: want a dict (the hook's JSON output) or None", v.Type())
}

// logHook reports a hook's answer: an event in --json mode, a line on
// stderr for a hook that had an opinion.
func (s *Session) logHook(call agent.HookCall, in, out map[string]any) {
	sid, _ := s.sid.Load().(string)
	if sid == "" {
		sid = call.SessionID
	}
	if sid == "" {
		sid, _ = in["session_id"].(string)
	}
	info := runtime.HookInfo{Session: sid, Event: call.Event}
	if tool, ok := in["tool_name"].(string); ok && tool != "" {
		info.Tool, info.ToolUseID = tool, call.ToolUseID
		toolInput, _ := in["tool_input"].(map[string]any)
		info.Summary = Summary(tool, toolInput)
	}
	if out != nil {
		info.Output, _ = json.Marshal(out) // checked by hookOutput: it encodes
	}
	s.env.Output.Hook(info)
}

// structuredOutput is Turn.structured_output.
func (t *Turn) structuredOutput() starlark.Value {
	if t.structuredV == nil {
		t.structuredV = starlark.None
		if raw := t.t.StructuredOutput; raw != nil {
			dec := json.NewDecoder(bytes.NewReader(raw))
			dec.UseNumber()
			var v any
			if dec.Decode(&v) == nil {
				t.structuredV = frozen(toStarlark(v))
			}
		}
	}
	return t.structuredV
}
