package builtins

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"

	"go.starlark.net/starlark"

	"github.com/seed5ad92d46/sous/runtime"
	"github.com/seed5ad92d46/sous/runtime/agent"
)

// A session's own tools: tool() makes one, sdk.session(tools=[...]) serves
// them to the CLI (runtime/agent runs the MCP server), and each call runs
// the tool's fn on the recipe thread, posted through the event loop as a
// policy is.

func toolEntries() []runtime.Entry {
	return []runtime.Entry{
		{Name: "tool", Journal: runtime.JournalPure, Sig: "tool(name, description, schema, fn) -> Tool",
			Doc: "A tool that sdk.session(tools=[...]) offers the agent, served by sous itself (an in-process MCP server " +
				"named sous): the model calls it as mcp__sous__NAME, without asking for permission unless " +
				"disallowed_tools names it. name is letters, digits, _ and -; description tells the model what it " +
				"does; schema (a dict) is the JSON Schema of its input, an object (\"type\": \"object\" is added when " +
				"missing). fn(args) is called with the input as a frozen dict on the recipe thread, while the recipe " +
				"waits (send, wait, run, sleep, ...), one call at a time, like a policy, and may call any builtin " +
				"(run, files.read, ...) but not wait for an agent's turn. It returns the result the model reads: a " +
				"string as it is, None as \"\", anything else as its JSON text; over 1 MiB it is cut, with a note. " +
				"An error in fn (fail(...), a failing builtin) becomes an error result carrying its message: the " +
				"model reads it and the recipe goes on. Each call is a line on stderr (tool: mcp__sous__NAME ok, or " +
				"error, [session ID]), a tool event (session, tool, ok) with --json.",
			Fn: toolBuiltin},
		{Name: "Tool", Sig: "Tool", Doc: "A tool from tool(), for sdk.session(tools=[...])."},
		{Name: "Tool.name", Sig: "Tool.name -> string", Doc: "The tool's name; the model calls it as mcp__sous__NAME.",
			Attr: attr(func(t *Tool) starlark.Value { return starlark.String(t.name) })},
		{Name: "Tool.description", Sig: "Tool.description -> string", Doc: "What the model is told the tool does.",
			Attr: attr(func(t *Tool) starlark.Value { return starlark.String(t.description) })},
		{Name: "Tool.schema", Sig: "Tool.schema -> dict", Doc: "The JSON Schema of the tool's input, as sent (frozen).",
			Attr: attr(func(t *Tool) starlark.Value { return t.schemaV })},
	}
}

// Tool is a tool from tool().
type Tool struct {
	env         *runtime.Env
	name        string
	description string
	schema      json.RawMessage // as sent to the CLI
	schemaV     starlark.Value  // the same, frozen
	fn          starlark.Callable
}

var _ starlark.HasAttrs = (*Tool)(nil)

func (t *Tool) String() string        { return fmt.Sprintf("<Tool %s>", t.name) }
func (t *Tool) Type() string          { return "Tool" }
func (t *Tool) Freeze()               { t.fn.Freeze() }
func (t *Tool) Truth() starlark.Bool  { return starlark.True }
func (t *Tool) Hash() (uint32, error) { return 0, fmt.Errorf("unhashable type: Tool") }
func (t *Tool) Attr(name string) (starlark.Value, error) {
	return t.env.Table.Attr(t.env, "Tool", t, nil, name)
}
func (t *Tool) AttrNames() []string { return t.env.Table.AttrNames("Tool") }

func toolBuiltin(c *runtime.Call) (starlark.Value, error) {
	t := &Tool{env: c.Env}
	var schema, fn starlark.Value
	if err := bind(c, 4, req("name", str(&t.name)), req("description", str(&t.description)),
		req("schema", value(&schema)), req("fn", value(&fn))); err != nil {
		return nil, err
	}
	if err := agent.CheckToolName(t.name); err != nil {
		return nil, c.Errorf("name: %v", err)
	}
	d, ok := schema.(*starlark.Dict)
	if !ok {
		return nil, c.Errorf("schema: want dict (a JSON Schema), got %s", schema.Type())
	}
	var err error
	if t.schema, t.schemaV, err = inputSchema(d); err != nil {
		return nil, c.Errorf("schema%v", err)
	}
	if t.fn, ok = fn.(starlark.Callable); !ok {
		return nil, c.Errorf("fn: want function, got %s", fn.Type())
	}
	return t, nil
}

// inputSchema is a tool's input schema as JSON and as a frozen dict. A
// tool's input is an object, so a schema without a type gets "type":
// "object" and one with another type is refused (the model could not
// call the tool).
func inputSchema(d *starlark.Dict) (json.RawMessage, starlark.Value, error) {
	v, err := fromStarlark(d)
	if err != nil {
		return nil, nil, err
	}
	m := v.(map[string]any)
	switch typ := m["type"]; typ {
	case nil:
		m["type"] = "object"
	case "object":
	default:
		return nil, nil, fmt.Errorf(`: a tool's input is an object: want "type": "object", got %s`, jsonText(typ))
	}
	b, err := marshalJSON(m)
	if err != nil {
		return nil, nil, fmt.Errorf(": %v", err)
	}
	return b, frozen(toStarlark(m)), nil
}

// jsonText is v's JSON for a message.
func jsonText(v any) string {
	b, err := marshalJSON(v)
	if err != nil {
		return fmt.Sprint(v)
	}
	return string(b)
}

// marshalJSON is v's JSON without HTML escaping: what a tool returns is
// text for the model, not for a web page.
func marshalJSON(v any) ([]byte, error) {
	var buf bytes.Buffer
	enc := json.NewEncoder(&buf)
	enc.SetEscapeHTML(false)
	if err := enc.Encode(v); err != nil {
		return nil, err
	}
	return bytes.TrimSuffix(buf.Bytes(), []byte("\n")), nil
}

// toolList binds sdk.session's tools: a list of Tool values with distinct
// names.
func toolList(dst *[]*Tool) param {
	return paramFunc(func(v starlark.Value) error {
		var seq starlark.Indexable
		switch x := v.(type) {
		case *starlark.List:
			seq = x
		case starlark.Tuple:
			seq = x
		default:
			return want("list of Tool", v)
		}
		tools := make([]*Tool, seq.Len())
		seen := make(map[string]bool, len(tools))
		for i := range tools {
			t, ok := seq.Index(i).(*Tool)
			if !ok {
				return &argError{path: fmt.Sprintf("[%d]", i), msg: want("Tool", seq.Index(i)).Error()}
			}
			if seen[t.name] {
				return fmt.Errorf("two tools named %q", t.name)
			}
			seen[t.name] = true
			tools[i] = t
		}
		*dst = tools
		return nil
	})
}

// agentTools are the tools as the engine serves them.
func agentTools(tools []*Tool) []agent.Tool {
	out := make([]agent.Tool, len(tools))
	for i, t := range tools {
		out[i] = agent.Tool{Name: t.name, Description: t.description, InputSchema: t.schema}
	}
	return out
}

// toolOutcome is what one call of a tool's fn gave.
type toolOutcome struct {
	text string
	err  error
}

// callTool is the session's agent.Options.CallTool. It runs on a goroutine
// of the engine; the tool's fn runs on the recipe thread, at its next
// wait, in the order the CLI sent the calls, while this goroutine waits for
// it. A call withdrawn (or a session closed) meanwhile is dropped.
func (s *Session) callTool(ctx context.Context, call agent.ToolCall) (string, error) {
	t := s.tools[call.Tool]
	done := make(chan toolOutcome, 1)
	s.called.post(call.Seq, func() {
		if ctx.Err() != nil {
			return // nobody waits for this result any more
		}
		var o toolOutcome
		if s.env.Ctx.Err() != nil || s.env.RecipeEnded() {
			o.err = errors.New("the recipe is stopping")
		} else {
			o.text, o.err = t.call(s.env, s.thread, call)
		}
		sid, _ := s.sid.Load().(string)
		name := agent.ToolName(t.name)
		s.env.Output.Tool(sid, name, o.err == nil)
		done <- o
	}, s.env.Loop.Post)
	select {
	case o := <-done:
		return o.text, o.err
	case <-ctx.Done():
		return "", ctx.Err()
	}
}

// call runs fn with the call's input on the recipe thread and turns what
// it returned into the result's text.
func (t *Tool) call(env *runtime.Env, thread *starlark.Thread, call agent.ToolCall) (string, error) {
	dec := json.NewDecoder(bytes.NewReader(call.Arguments))
	dec.UseNumber() // an integer stays an int
	var in map[string]any
	if err := dec.Decode(&in); err != nil {
		return "", fmt.Errorf("the input is not a JSON object: %v", err)
	}
	args := toStarlark(in)
	if in == nil {
		args = starlark.NewDict(0)
	}
	args.Freeze()
	st := agentsOf(env)
	st.inTool++
	v, err := starlark.Call(thread, t.fn, starlark.Tuple{args}, nil)
	st.inTool--
	if err != nil {
		return "", err
	}
	return toolText(v)
}

// toolText is the result text of what a tool's fn returned: a string as it
// is, None as "", anything else as its JSON.
func toolText(v starlark.Value) (string, error) {
	switch x := v.(type) {
	case starlark.String:
		return string(x), nil
	case starlark.NoneType:
		return "", nil
	}
	g, err := fromStarlark(v)
	if err != nil {
		return "", fmt.Errorf("fn returned %s: want a string, None or a JSON value (dict, list, number, bool)", v.Type())
	}
	b, err := marshalJSON(g)
	if err != nil {
		return "", fmt.Errorf("fn returned %s that is not JSON: %v", v.Type(), err)
	}
	return string(b), nil
}
