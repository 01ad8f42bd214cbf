package agent

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/google/uuid"
)

// interruptGrace is how long a timed-out turn may take to stop after the
// interrupt before the session gives up on the CLI.
const interruptGrace = 15 * time.Second

// Turn is the outcome of one user message.
type Turn struct {
	// Text is the result text ("" when the CLI gives none).
	Text       string
	Subtype    string
	IsError    bool
	CostUSD    float64
	NumTurns   int
	DurationMs int64
	SessionID  string
	Usage      map[string]any
	Denials    []Denial
	// StructuredOutput is the value the CLI validated against
	// Options.OutputSchema (the result's structured_output), as sent; nil
	// when the turn produced none.
	StructuredOutput json.RawMessage
	// Messages are every protocol message the CLI sent during the turn, in
	// order, the result last. keep_alive messages are left out.
	Messages []json.RawMessage
	// UserMessageID is the uuid of the user message sous sent for the
	// turn: the checkpoint RewindFiles restores.
	UserMessageID string
}

// OK says whether the turn succeeded: not is_error and not an error_*
// subtype (CLIs differ: some send is_error false with
// error_max_budget_usd or error_max_turns).
func (t *Turn) OK() bool {
	return !t.IsError && !strings.HasPrefix(t.Subtype, "error")
}

// Denial is a tool use the CLI reported as denied in the turn's result.
type Denial struct {
	Tool      string
	ToolUseID string
	Input     map[string]any
}

// TurnOptions adjust one turn.
type TurnOptions struct {
	// Timeout bounds this turn instead of Options.TurnTimeout (0: the
	// session's). It counts from when the prompt is sent, not from when it
	// was queued behind an earlier turn.
	Timeout time.Duration
}

// Pending is a turn under way.
type Pending struct {
	ts   *turnState
	done chan struct{}
	turn *Turn
	err  error
}

// Done is closed when the turn finished (or failed).
func (p *Pending) Done() <-chan struct{} { return p.done }

// Result is the turn's outcome once Done is closed.
func (p *Pending) Result() (*Turn, error) {
	<-p.done
	return p.turn, p.err
}

// Wait blocks until the turn finishes or ctx ends. Ending ctx does not stop
// the turn; Send does.
func (p *Pending) Wait(ctx context.Context) (*Turn, error) {
	select {
	case <-p.done:
		return p.turn, p.err
	case <-ctx.Done():
		return nil, fmt.Errorf("agent: waiting for the turn: %w", ctx.Err())
	}
}

func (p *Pending) finish(t *Turn, err error) {
	p.turn, p.err = t, err
	close(p.done)
}

// turnState is a turn as the session tracks it, guarded by Session.mu.
type turnState struct {
	prompt  string
	uuid    string
	pending *Pending
	sent    bool
	msgs    []json.RawMessage
	errs    []error       // failed incoming request handlers (permission callbacks)
	limit   time.Duration // this turn's timeout (0: none)
	timer   *time.Timer
	timeout bool // the limit passed
}

// Send sends prompt as a user message and waits for the turn's result. When
// ctx ends first the turn is interrupted (or dropped if it had not started).
func (s *Session) Send(ctx context.Context, prompt string) (*Turn, error) {
	p := s.Start(prompt)
	select {
	case <-p.done:
		return p.turn, p.err
	case <-ctx.Done():
	}
	s.abandon(p.ts)
	return nil, fmt.Errorf("agent: send: %w", ctx.Err())
}

// Start sends prompt as a user message without waiting. Turns run one after
// another: a prompt started while another turn runs is sent when that turn
// ends, so every result belongs to exactly one prompt.
func (s *Session) Start(prompt string) *Pending {
	return s.StartWith(prompt, TurnOptions{})
}

// StartWith is Start with options for this turn.
func (s *Session) StartWith(prompt string, o TurnOptions) *Pending {
	limit := o.Timeout
	if limit <= 0 {
		limit = s.opt.TurnTimeout
	}
	ts := &turnState{prompt: prompt, uuid: uuid.NewString(), limit: limit}
	p := &Pending{ts: ts, done: make(chan struct{})}
	ts.pending = p
	s.mu.Lock()
	if s.dead != nil {
		err := s.dead
		s.mu.Unlock()
		p.finish(nil, err)
		return p
	}
	s.turns = append(s.turns, ts)
	head := len(s.turns) == 1
	s.mu.Unlock()
	if head {
		s.sendTurn(ts)
	}
	return p
}

// sendTurn writes a turn's user message and arms its timeout.
func (s *Session) sendTurn(ts *turnState) {
	s.mu.Lock()
	if ts.sent || s.dead != nil {
		s.mu.Unlock()
		return
	}
	ts.sent = true
	sid := s.id
	if ts.limit > 0 {
		ts.timer = time.AfterFunc(ts.limit, func() { s.turnTimedOut(ts) })
	}
	s.mu.Unlock()
	s.enqueue(map[string]any{
		"type":               "user",
		"message":            map[string]any{"role": "user", "content": ts.prompt},
		"parent_tool_use_id": nil,
		"session_id":         sid,
		"uuid":               ts.uuid,
	}, outMeta{kind: outUser})
}

// turnTimedOut interrupts a turn that ran too long. If the CLI does not
// stop it within interruptGrace, the CLI is considered stuck and the
// session ends.
func (s *Session) turnTimedOut(ts *turnState) {
	s.mu.Lock()
	if len(s.turns) == 0 || s.turns[0] != ts || s.dead != nil {
		s.mu.Unlock()
		return
	}
	ts.timeout = true
	s.mu.Unlock()
	ctx, cancel := context.WithTimeout(s.ctx, interruptGrace)
	defer cancel()
	s.control(ctx, "interrupt", nil)
	select {
	case <-ts.pending.done:
	case <-ctx.Done():
		s.fail(fmt.Errorf("agent: %w after %s and %w within %s of the interrupt; the session was ended", ErrTurnTimeout, ts.limit, ErrCLIStuck, interruptGrace))
		go s.Close()
	}
}

// abandon gives up on a turn whose caller stopped waiting: a queued turn is
// dropped, a running one interrupted.
func (s *Session) abandon(ts *turnState) {
	s.mu.Lock()
	for i, t := range s.turns {
		if t != ts || i == 0 && ts.sent {
			continue
		}
		s.turns = append(s.turns[:i:i], s.turns[i+1:]...)
		s.mu.Unlock()
		ts.pending.finish(nil, errors.New("agent: turn abandoned before it started"))
		return
	}
	running := len(s.turns) > 0 && s.turns[0] == ts
	s.mu.Unlock()
	if running {
		go s.sendInterrupt()
	}
}

// result ends the running turn.
func (s *Session) result(line []byte) {
	parsed, perr := ParseResult(line, nil)
	if perr != nil {
		s.fail(perr)
		return
	}
	s.mu.Lock()
	if len(s.turns) == 0 || !s.turns[0].sent {
		s.mu.Unlock()
		return // a result for no turn of ours (kept in stray)
	}
	ts := s.turns[0]
	s.turns = s.turns[1:]
	var next *turnState
	if len(s.turns) > 0 {
		next = s.turns[0]
	}
	msgs := ts.msgs
	if len(s.stray) > 0 {
		msgs = append(s.stray, msgs...)
		s.stray = nil
	}
	errs := ts.errs
	timedOut := ts.timeout
	s.mu.Unlock()
	if ts.timer != nil {
		ts.timer.Stop()
	}

	t := parsed
	t.Messages, t.UserMessageID = msgs, ts.uuid
	var err error
	switch {
	case timedOut:
		err = fmt.Errorf("agent: %w after %s; the turn was interrupted", ErrTurnTimeout, ts.limit)
	case len(errs) > 0:
		err = errors.Join(errs...)
	}
	ts.pending.finish(t, err)
	if next != nil {
		s.sendTurn(next)
	}
}

// StopTurns ends the session's work without ending the session: the turns
// waiting their turn are dropped (their Pending ends with why), and the
// running one is interrupted (its Pending ends with the CLI's result, as
// after Interrupt). It returns at once: the interrupt is sent on a
// goroutine of its own.
func (s *Session) StopTurns(why error) {
	s.mu.Lock()
	var dropped []*turnState
	running := false
	if len(s.turns) > 0 {
		first := 0
		if s.turns[0].sent {
			running, first = s.dead == nil, 1
		}
		dropped = append(dropped, s.turns[first:]...)
		s.turns = s.turns[:first]
	}
	s.mu.Unlock()
	for _, ts := range dropped {
		ts.pending.finish(nil, fmt.Errorf("agent: turn dropped before it started: %w", why))
	}
	if running {
		go s.sendInterrupt()
	}
}

// ParseResult makes the Turn a result message ends, with msgs as its
// messages: what Session does at each result, and what a resumed durable
// run does with the stdout of a CLI whose turn went on without it.
func ParseResult(line []byte, msgs []json.RawMessage) (*Turn, error) {
	var r struct {
		Subtype      string          `json:"subtype"`
		IsError      bool            `json:"is_error"`
		Result       *string         `json:"result"`
		TotalCostUSD float64         `json:"total_cost_usd"`
		NumTurns     int             `json:"num_turns"`
		DurationMs   int64           `json:"duration_ms"`
		SessionID    string          `json:"session_id"`
		Usage        map[string]any  `json:"usage"`
		Errors       json.RawMessage `json:"errors"`
		Structured   json.RawMessage `json:"structured_output"`
		Denials      []struct {
			ToolName  string         `json:"tool_name"`
			ToolUseID string         `json:"tool_use_id"`
			ToolInput map[string]any `json:"tool_input"`
		} `json:"permission_denials"`
	}
	if err := json.Unmarshal(line, &r); err != nil {
		return nil, fmt.Errorf("agent: malformed result message: %w", err)
	}
	t := &Turn{
		Subtype: r.Subtype, IsError: r.IsError, CostUSD: r.TotalCostUSD, NumTurns: r.NumTurns,
		DurationMs: r.DurationMs, SessionID: r.SessionID, Usage: r.Usage, Messages: msgs,
	}
	if r.Result != nil {
		t.Text = *r.Result
	}
	if len(r.Structured) > 0 && string(r.Structured) != "null" {
		t.StructuredOutput = r.Structured
	}
	if t.Usage == nil {
		t.Usage = map[string]any{}
	}
	for _, d := range r.Denials {
		t.Denials = append(t.Denials, Denial{Tool: d.ToolName, ToolUseID: d.ToolUseID, Input: d.ToolInput})
	}
	return t, nil
}
