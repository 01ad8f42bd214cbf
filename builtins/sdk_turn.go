package builtins

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"go.starlark.net/starlark"

	"github.com/seed5ad92d46/sous/runtime"
	"github.com/seed5ad92d46/sous/runtime/agent"
)

// What a sent prompt gives back: the Pending of Session.start, and the
// Turn a finished turn is.

// Pending is a turn started with Session.start.
type Pending struct {
	env     *runtime.Env
	session *Session
	prompt  string
	p       *agent.Pending
	limit   time.Duration
}

func (p *Pending) String() string {
	prompt := p.prompt
	if utf8Len := len([]rune(prompt)); utf8Len > 40 {
		prompt = string([]rune(prompt)[:40]) + "…"
	}
	return fmt.Sprintf("<Pending turn of session %s: %q>", p.session.s.ID(), prompt)
}
func (p *Pending) Type() string          { return "Pending" }
func (p *Pending) Freeze()               {}
func (p *Pending) Truth() starlark.Bool  { return starlark.True }
func (p *Pending) Hash() (uint32, error) { return 0, fmt.Errorf("unhashable type: Pending") }
func (p *Pending) Attr(name string) (starlark.Value, error) {
	return p.env.Table.Attr(p.env, "Pending", p, p.session.host, name)
}
func (p *Pending) AttrNames() []string { return p.env.Table.AttrNames("Pending") }

// Ready implements Awaitable.
func (p *Pending) Ready() <-chan struct{} { return p.p.Done() }

// Outcome implements Awaitable.
func (p *Pending) Outcome() (starlark.Value, error) {
	t, err := turnOutcome(p.env, p.p, p.limit)
	if err != nil {
		return nil, fmt.Errorf("turn of session %s: %w", p.session.s.ID(), err)
	}
	return t, nil
}

func pendingWait(c *runtime.Call, p *Pending) (starlark.Value, error) {
	var timeout *time.Duration
	if err := bind(c, 1, opt("timeout", optSeconds(&timeout))); err != nil {
		return nil, err
	}
	if err := agentsOf(c.Env).turnWaitRefused(); err != nil {
		return nil, c.Errorf("%v", err)
	}
	if err := wait(c.Env, p.p.Done(), timeout); err != nil {
		if errors.Is(err, errTimeout) {
			return nil, c.Errorf("the turn is still running after %s", formatSeconds(*timeout))
		}
		return nil, c.Errorf("%v", err)
	}
	t, err := turnOutcome(c.Env, p.p, p.limit)
	if err != nil {
		return nil, c.Errorf("%v", err)
	}
	return t, nil
}

// Turn is a finished turn. Its container attributes are built on first use
// and frozen, so every access sees the same values.
type Turn struct {
	t     *agent.Turn
	env   *runtime.Env
	cli   string // the daemon process id of the CLI that answered it (sdk_durable.go)
	stdin int64  // that CLI's stdin mark after the turn (-1: not known)

	usageV, denialsV, messagesV, structuredV starlark.Value
}

var _ starlark.HasAttrs = (*Turn)(nil)

func (t *Turn) String() string {
	return fmt.Sprintf("<Turn %s session=%s>", t.t.Subtype, t.t.SessionID)
}
func (t *Turn) Type() string          { return "Turn" }
func (t *Turn) Freeze()               {} // its containers are frozen when built
func (t *Turn) Truth() starlark.Bool  { return starlark.True }
func (t *Turn) Hash() (uint32, error) { return 0, fmt.Errorf("unhashable type: Turn") }
func (t *Turn) Attr(name string) (starlark.Value, error) {
	return t.env.Table.Attr(t.env, "Turn", t, nil, name)
}
func (t *Turn) AttrNames() []string { return t.env.Table.AttrNames("Turn") }

func frozen(v starlark.Value) starlark.Value {
	v.Freeze()
	return v
}

func (t *Turn) usage() starlark.Value {
	if t.usageV == nil {
		t.usageV = frozen(toStarlark(t.t.Usage))
	}
	return t.usageV
}

func (t *Turn) denials() starlark.Value {
	if t.denialsV == nil {
		l := make([]starlark.Value, len(t.t.Denials))
		for i, d := range t.t.Denials {
			in := toStarlark(d.Input)
			if d.Input == nil {
				in = starlark.NewDict(0)
			}
			l[i] = structOf(starlark.StringDict{
				"tool": starlark.String(d.Tool), "tool_use_id": starlark.String(d.ToolUseID), "input": in,
			})
		}
		t.denialsV = frozen(starlark.NewList(l))
	}
	return t.denialsV
}

func (t *Turn) messages() starlark.Value {
	if t.messagesV == nil {
		l := make([]starlark.Value, len(t.t.Messages))
		for i, raw := range t.t.Messages {
			dec := json.NewDecoder(bytes.NewReader(raw))
			dec.UseNumber()
			var v any
			if err := dec.Decode(&v); err != nil {
				v = string(raw) // never happens for what the engine keeps; keep it visible
			}
			l[i] = toStarlark(v)
		}
		t.messagesV = frozen(starlark.NewList(l))
	}
	return t.messagesV
}
