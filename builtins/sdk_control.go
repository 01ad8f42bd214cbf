package builtins

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"strings"

	"go.starlark.net/starlark"

	"github.com/seed5ad92d46/sous/runtime"
	"github.com/seed5ad92d46/sous/runtime/agent"
)

// A session's control surface: live messages (on_message), file
// checkpoints (checkpoints, Turn.user_message_id, Session.rewind_files),
// the CLI's initialize answer (Session.info), raw control requests
// (Session.control), and the permission request's extra fields with the
// updates an approval may send (Request.suggestions, ..., approve(updates=)).
// runtime/agent does the protocol; on_message runs on the recipe thread
// as policies do.

func controlEntries() []runtime.Entry {
	return []runtime.Entry{
		{Name: "Session.info", Sig: "Session.info -> dict",
			Doc: "The CLI's answer to initialize, as it sent it (frozen): commands, models, output_style, " +
				"available_output_styles, account, ... (recent CLIs also claude_code_version).",
			Attr: attr((*Session).infoValue)},
		{Name: "Session.control", Journal: runtime.JournalEffect, Rejoin: true, Sig: "Session.control(subtype, **fields) -> dict",
			Doc: "Sends one control request to the CLI ({\"subtype\": subtype, **fields}, e.g. \"mcp_status\", " +
				"\"get_context_usage\" on current CLIs) and returns its answer (a dict, frozen). A request the CLI " +
				"refuses or does not support fails naming the subtype, the CLI's version and its message; a CLI " +
				"that gives no answer within 30 s fails too.",
			Fn: method(sessionControl)},
		{Name: "Session.rewind_files", Journal: runtime.JournalEffect, Rejoin: true, Sig: "Session.rewind_files(turn, *, dry_run=False) -> list",
			Doc: "Restores the files the agent changed with Write, Edit or NotebookEdit since turn's user message " +
				"to what they were before that turn (a file the turns created is deleted) and returns the paths it " +
				"changed; dry_run=True changes nothing and returns the paths it would change. Needs " +
				"sdk.session(checkpoints=True). Bash commands' changes are not tracked. Fails naming the CLI's " +
				"version and reason when the CLI cannot rewind (no checkpoint for that turn).",
			Fn: method(sessionRewindFiles)},
		{Name: "Turn.user_message_id", Sig: "Turn.user_message_id -> string",
			Doc:  "The uuid of the user message sous sent for the turn: the checkpoint Session.rewind_files restores.",
			Attr: attr(func(t *Turn) starlark.Value { return starlark.String(t.t.UserMessageID) })},
		{Name: "Request.suggestions", Sig: "Request.suggestions -> list of dicts or None",
			Doc: "The permission updates the CLI suggests (permission_suggestions, frozen): {\"type\": \"addRules\", " +
				"\"rules\": [...], \"behavior\": \"allow\", \"destination\": ...}, {\"type\": \"setMode\", ...}, " +
				"{\"type\": \"addDirectories\", ...}; approve(updates=req.suggestions) accepts them. None when it " +
				"sent none (always for privileged commands).",
			Attr: attr((*Request).suggestions)},
		{Name: "Request.blocked_path", Sig: "Request.blocked_path -> string or None",
			Doc:  "The path that made the CLI ask (a Bash command writing outside what is allowed); None when it names none.",
			Attr: attr(func(r *Request) starlark.Value { return optString(r.req.BlockedPath) })},
		{Name: "Request.decision_reason", Sig: "Request.decision_reason -> string or None",
			Doc:  "Why the CLI asks (\"Path is outside allowed working directories\", a hook's or classifier's reason); None when it says nothing.",
			Attr: attr(func(r *Request) starlark.Value { return optString(r.req.DecisionReason) })},
		{Name: "Request.agent_id", Sig: "Request.agent_id -> string or None",
			Doc:  "The subagent whose tool use this is; None for the session's main agent.",
			Attr: attr(func(r *Request) starlark.Value { return optString(r.req.AgentID) })},
		{Name: "Decision.updates", Sig: "Decision.updates -> list or None",
			Doc: "The permission updates of approve(updates=...) (frozen), else None.",
			Attr: attr(func(d *Decision) starlark.Value {
				if d.updatesV == nil {
					return starlark.None
				}
				return d.updatesV
			})},
	}
}

// controlOptions are the sdk.session keywords of this file.
type controlOptions struct {
	checkpoints bool
	onMessage   starlark.Callable
}

func (o *controlOptions) bindings() []binding {
	return []binding{
		opt("checkpoints", boolean(&o.checkpoints)),
		opt("on_message", optCallable(&o.onMessage)),
	}
}

// apply puts the keywords into opt: on_message wants the partial
// messages too.
func (o *controlOptions) apply(opt *agent.Options) {
	opt.Checkpoints = o.checkpoints
	opt.PartialMessages = o.onMessage != nil
}

// deliverMessage posts one message from the CLI to the session's
// on_message, on the recipe thread, in the order the messages came (the
// loop runs what is posted in order, and the engine observes them one at
// a time). A message posted before a turn's result runs before the
// send() waiting for that turn returns.
func (s *Session) deliverMessage(e agent.Event) {
	if s.onMessage == nil || e.Dir != agent.In || e.Type == "" {
		return
	}
	raw := e.Message
	s.env.Loop.Post(func() {
		if s.env.Ctx.Err() != nil || s.env.RecipeEnded() {
			return
		}
		s.callOnMessage(raw)
	})
}

// callOnMessage calls on_message with the message as a frozen dict. A
// failure fails the recipe with its traceback, as a failed policy does.
func (s *Session) callOnMessage(raw json.RawMessage) {
	st := agentsOf(s.env)
	st.inPolicy++ // it cannot wait for a turn either
	_, err := starlark.Call(s.thread, s.onMessage, starlark.Tuple{jsonValue(raw)}, nil)
	st.inPolicy--
	if err != nil && s.env.Abort != nil {
		s.env.Abort(err)
	}
}

// jsonValue is a JSON document as a frozen Starlark value, numbers exact.
func jsonValue(raw json.RawMessage) starlark.Value {
	dec := json.NewDecoder(bytes.NewReader(raw))
	dec.UseNumber()
	var v any
	if err := dec.Decode(&v); err != nil {
		v = string(raw) // not JSON: keep it visible
	}
	return frozen(toStarlark(v))
}

func optString(s string) starlark.Value {
	if s == "" {
		return starlark.None
	}
	return starlark.String(s)
}

// infoValue is Session.info: built once, so every access sees the same
// value (the answer never changes).
func (s *Session) infoValue() starlark.Value {
	if s.infoV == nil {
		var info json.RawMessage
		if s.s != nil {
			info = s.s.Info()
		} else {
			info = s.replayed.info // a handle a resumed run rebuilt (sdk_durable.go)
		}
		if len(info) == 0 || string(info) == "null" {
			s.infoV = frozen(starlark.NewDict(0)) // a CLI that answered initialize with nothing
		} else {
			s.infoV = jsonValue(info)
		}
	}
	return s.infoV
}

func sessionControl(c *runtime.Call, s *Session) (starlark.Value, error) {
	var subtype string
	if len(c.Args) != 1 {
		return nil, c.Errorf("want 1 positional argument (the subtype), got %d", len(c.Args))
	}
	subtype, ok := starlark.AsString(c.Args[0])
	if !ok || subtype == "" {
		return nil, c.Errorf("subtype: want a non-empty string, got %s", c.Args[0].Type())
	}
	fields := make(map[string]any, len(c.Kwargs))
	for _, kv := range c.Kwargs {
		k := string(kv[0].(starlark.String))
		if k == "subtype" {
			return nil, c.Errorf("subtype: given twice")
		}
		v, err := fromStarlark(kv[1])
		if err != nil {
			return nil, c.Errorf("%s%v", k, err)
		}
		fields[k] = v
	}
	if err := s.takeOverDiedIn(c); err != nil {
		return nil, err
	}
	var resp json.RawMessage
	err := s.control(c, func(ctx context.Context) (err error) {
		resp, err = s.s.Control(ctx, subtype, fields)
		return err
	})
	if err != nil {
		return nil, err
	}
	if len(resp) == 0 || string(resp) == "null" {
		return frozen(starlark.NewDict(0)), nil
	}
	return jsonValue(resp), nil
}

func sessionRewindFiles(c *runtime.Call, s *Session) (starlark.Value, error) {
	var tv starlark.Value
	var dryRun bool
	if err := bind(c, 1, req("turn", value(&tv)), opt("dry_run", boolean(&dryRun))); err != nil {
		return nil, err
	}
	t, ok := tv.(*Turn)
	if !ok {
		return nil, c.Errorf("turn: want a Turn (from send or wait), got %s", tv.Type())
	}
	if err := s.takeOverDiedIn(c); err != nil {
		return nil, err
	}
	if !s.checkpoints {
		return nil, c.Errorf("the session has no checkpoints: start it with sdk.session(..., checkpoints=True)")
	}
	var files []string
	err := s.control(c, func(ctx context.Context) (err error) {
		files, err = s.s.RewindFiles(ctx, t.t.UserMessageID, dryRun)
		return err
	})
	if err != nil {
		return nil, err
	}
	l := make([]starlark.Value, len(files))
	for i, f := range files {
		l[i] = starlark.String(f)
	}
	return starlark.NewList(l), nil
}

// suggestions is Request.suggestions.
func (r *Request) suggestions() starlark.Value {
	raw := r.req.Suggestions
	if len(raw) == 0 || string(raw) == "null" {
		return starlark.None
	}
	return jsonValue(raw)
}

// permissionUpdateList binds approve's updates: a list of permission
// updates (dicts in Claude Code's PermissionUpdate shape), each checked,
// kept as JSON; dst holds a frozen copy of the list for Decision.updates.
func permissionUpdateList(raws *[]json.RawMessage, dst *starlark.Value) param {
	return paramFunc(func(v starlark.Value) error {
		if v == starlark.None {
			return nil
		}
		seq, ok := v.(starlark.Indexable)
		if _, isList := v.(*starlark.List); !isList {
			if _, isTuple := v.(starlark.Tuple); !isTuple {
				ok = false
			}
		}
		if !ok {
			return want("list of permission updates (dicts) or None", v)
		}
		given := make([]starlark.Value, seq.Len())
		for i := range seq.Len() {
			g, err := fromStarlark(seq.Index(i))
			m, isDict := g.(map[string]any)
			if err != nil || !isDict {
				return &argError{path: fmt.Sprintf("[%d]", i), msg: want("dict (a permission update)", seq.Index(i)).Error()}
			}
			u, err := agent.ParsePermissionUpdate(m)
			if err != nil {
				return &argError{path: fmt.Sprintf("[%d]", i), msg: err.Error()}
			}
			b, err := json.Marshal(u)
			if err != nil {
				return err
			}
			*raws = append(*raws, b)
			given[i] = toStarlark(g)
		}
		// A copy: freezing the recipe's own list would surprise it.
		*dst = frozen(starlark.NewList(given))
		return nil
	})
}

// permissionUpdates decodes an Answer's updates for the engine.
func permissionUpdates(raws []json.RawMessage) ([]agent.PermissionUpdate, error) {
	out := make([]agent.PermissionUpdate, 0, len(raws))
	for _, raw := range raws {
		var u agent.PermissionUpdate
		if err := json.Unmarshal(raw, &u); err != nil {
			return nil, fmt.Errorf("updates: %s: %w", strings.TrimSpace(string(raw)), err)
		}
		out = append(out, u)
	}
	return out, nil
}
