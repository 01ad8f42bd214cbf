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
	p       *agent.Pending // nil for a turn a resumed run rebuilt (replayed)
	limit   time.Duration
	// What a durable run keeps of it (sdk_durable.go): the daemon process
	// id of the CLI the prompt went to and that CLI's stdin mark before it.
	cli         string
	stdinBefore int64
	// replayed is what a turn rebuilt from a journal knows of where its
	// result may be; nil for a live one.
	replayed *replayedTurn
	// interrupted says the run interrupted the replayed turn: its result
	// is the CLI's, or none (sdk_durable.go).
	interrupted bool
}

// shortPrompt is prompt cut to 40 runes, for a turn's name.
func shortPrompt(prompt string) string {
	if utf8Len := len([]rune(prompt)); utf8Len > 40 {
		prompt = string([]rune(prompt)[:40]) + "…"
	}
	return prompt
}

func (p *Pending) String() string {
	prompt := shortPrompt(p.prompt)
	sid := ""
	if p.session != nil {
		sid, _ = starlark.AsString(sessionID(p.session))
	}
	return fmt.Sprintf("<Pending turn of session %s: %q>", sid, prompt)
}
func (p *Pending) Type() string          { return "Pending" }
func (p *Pending) Freeze()               {}
func (p *Pending) Truth() starlark.Bool  { return starlark.True }
func (p *Pending) Hash() (uint32, error) { return 0, fmt.Errorf("unhashable type: Pending") }
func (p *Pending) Attr(name string) (starlark.Value, error) {
	return p.env.Table.Attr(p.env, "Pending", p, p.session.host, name)
}
func (p *Pending) AttrNames() []string { return p.env.Table.AttrNames("Pending") }

// Ready implements Awaitable. A replayed turn is ready at once: its result
// is taken when it is waited for (sdk_durable.go).
func (p *Pending) Ready() <-chan struct{} {
	if p.p == nil {
		return closedChan
	}
	return p.p.Done()
}

var closedChan = func() chan struct{} {
	c := make(chan struct{})
	close(c)
	return c
}()

// Outcome implements Awaitable.
func (p *Pending) Outcome() (starlark.Value, error) {
	if p.p == nil {
		// Only parallel() asks a replayed turn this way, and a journal
		// with a turn in parallel() is not resumed (parallel.go).
		return nil, fmt.Errorf("%s started before the run was resumed: wait for it with wait() or wait_all()", p)
	}
	t, err := turnOutcome(p.env, p.p, p.limit)
	if err != nil {
		return nil, fmt.Errorf("turn of session %s: %w", p.session.s.ID(), err)
	}
	return t, nil
}

// pendingWaitEntry is Pending.wait, which wait_all also makes for each
// turn it waits for, so that a durable run keeps the Turn as it keeps
// p.wait()'s (runtime.JournalCall).
func pendingWaitEntry() runtime.Entry {
	return runtime.Entry{Name: "Pending.wait", Journal: runtime.JournalEffect, Rejoin: true, Replayed: waitReplayed,
		Sig: "Pending.wait(timeout=None) -> Turn",
		Doc: "Blocks until the turn's result. When timeout (seconds) passes first, wait fails and the turn keeps " +
			"running; a turn that ran past the session's timeout fails as send does.",
		Fn: method(pendingWait)}
}

// waitStep takes p's Turn for a builtin that waits for turns on the
// recipe's behalf (wait_all, parallel): as a Pending.wait of its own, so a
// durable run journals it as it journals p.wait().
func (p *Pending) waitStep(c *runtime.Call) (starlark.Value, error) {
	e := pendingWaitEntry()
	return runtime.JournalCall(&runtime.Call{Env: c.Env, Thread: c.Thread, Recv: p, Host: p.session.host}, &e)
}

func pendingWait(c *runtime.Call, p *Pending) (starlark.Value, error) {
	var timeout *time.Duration
	if err := bind(c, 1, opt("timeout", optSeconds(&timeout))); err != nil {
		return nil, err
	}
	return p.wait(c, timeout)
}

// wait gives the turn's Turn: Pending.wait, and wait_all for each turn.
func (p *Pending) wait(c *runtime.Call, timeout *time.Duration) (starlark.Value, error) {
	if err := agentsOf(c.Env).turnWaitRefused(); err != nil {
		return nil, c.Errorf("%v", err)
	}
	if p.p == nil {
		return p.finishReplayed(c) // sdk_durable.go
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
	t.cli, t.stdin = p.cli, -1
	if p.cli == p.session.procID {
		t.stdin = p.session.s.StdinApplied()
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
