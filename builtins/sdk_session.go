package builtins

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"path"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/google/uuid"
	"go.starlark.net/starlark"

	"github.com/seed5ad92d46/sous/daemon/client"
	"github.com/seed5ad92d46/sous/daemon/wire"
	"github.com/seed5ad92d46/sous/runtime"
	"github.com/seed5ad92d46/sous/runtime/agent"
)

// A Session value: starting the CLI with its options, answering its
// permission requests on the recipe thread, sending turns and control
// requests, closing it.

// Session is a running CLI as recipes see it.
type Session struct {
	env    *runtime.Env
	host   *runtime.Host
	thread *starlark.Thread // the recipe thread: policies are called on it
	policy starlark.Callable
	// cwd is the CLI's working directory, which rules on relative paths
	// resolve against: the one the CLI reports in system/init, where its
	// own relative paths start. Until then, cwd= as given (empty or
	// relative ones are the daemon's to resolve, on its host).
	cwd   atomic.Value  // string
	limit time.Duration // the session's turn timeout (0: none)
	s     *agent.Session
	// sid labels the session's events: known before Start for a fresh or
	// resumed session, learned from system messages for a fork.
	sid atomic.Value // string
	// asked queues the session's permission requests for the recipe
	// thread in the order the CLI sent them: their callbacks start at once,
	// each on a goroutine of its own. called does the same for tool calls,
	// hooked for hook calls (sdk_steps.go).
	asked  postOrder
	called postOrder
	hooked postOrder
	// tools are the session's own tools by name (tools.go).
	tools map[string]*Tool
	// onMessage sees every message from the CLI; checkpoints says rewind_files
	// can work (sdk_control.go).
	onMessage   starlark.Callable
	checkpoints bool
	infoV       starlark.Value // Session.info, built on first use (recipe thread only)

	// What a durable run keeps of it (sdk_durable.go): the daemon process
	// id of its CLI, and, for a handle rebuilt from a journal until it
	// takes the session over, what it knows of the session.
	procID   string
	replayed *replayedSession
}

// postOrder posts callbacks to the loop in the order of their sequence
// numbers (1, 2, 3, ...), holding back one that overtook an earlier one.
// Every number must be posted once: agent.Request.Seq numbers the
// requests that reach the session's Permission, which posts each.
type postOrder struct {
	mu      sync.Mutex
	next    uint64 // the number posted next (0: 1)
	waiting map[uint64]func()
}

func (o *postOrder) post(seq uint64, f func(), post func(func())) {
	if seq == 0 {
		post(f)
		return
	}
	o.mu.Lock()
	defer o.mu.Unlock()
	if o.next == 0 {
		o.next = 1
	}
	if seq != o.next {
		if o.waiting == nil {
			o.waiting = make(map[uint64]func())
		}
		o.waiting[seq] = f
		return
	}
	post(f)
	for o.next++; ; o.next++ {
		g, ok := o.waiting[o.next]
		if !ok {
			return
		}
		delete(o.waiting, o.next)
		post(g)
	}
}

var (
	_ starlark.HasAttrs = (*Session)(nil)
	_ Awaitable         = (*Pending)(nil)
)

// addAgentEnv sets the run's AgentEnv in a session's environment, over
// what its env= says: a scripted model (--fake-model) must reach every
// session, or one would talk to the real model. Its values name this
// machine, so a session on a host elsewhere is refused.
func addAgentEnv(c *runtime.Call, opt *agent.Options) error {
	ae := c.Env.AgentEnv
	if ae == nil {
		return nil
	}
	if !opt.LocalHost {
		return c.Errorf("%s: the session's model is on this machine, which a CLI on %s could not reach; start the session on the embedded daemon or a unix:// host",
			ae.Source, c.Host.Target())
	}
	env := make(map[string]string, len(opt.Env)+len(ae.Vars))
	maps.Copy(env, opt.Env)
	maps.Copy(env, ae.Vars)
	opt.Env = env
	return nil
}

// startSession starts the CLI of a session: into s when it is given (a
// handle a resumed run rebuilt, sdk_durable.go), else a new Session.
func startSession(c *runtime.Call, o *sessionOptions, into *Session) (*Session, error) {
	kind, _, err := client.Kind(c.Host.Target())
	if err != nil {
		return nil, c.Errorf("%s: %v", c.Host.Target(), err)
	}
	// A unix socket daemon runs on this machine, so a CLI it starts can
	// reach sous's loopback endpoint; over ssh it could not.
	o.opt.LocalHost = kind == "embedded" || kind == "unix"
	if o.opt.Transport == agent.TransportWebSocket && !o.opt.LocalHost {
		return nil, c.Errorf("transport: \"websocket\" needs the CLI on this machine, and %s is not: the CLI could not "+
			"reach sous's loopback WebSocket endpoint; use transport=\"stdio\"", c.Host.Target())
	}
	if err := addAgentEnv(c, &o.opt); err != nil {
		return nil, err
	}
	if err := capSessionBudget(c.Env.Budget, &o.opt); err != nil {
		return nil, c.Errorf("%v", err)
	}
	d, err := hostClient(c, c.Host)
	if err != nil {
		return nil, err
	}
	cl := d.Client()
	if cl == nil {
		return nil, c.Errorf("%s: the host's connection cannot carry an agent session", c.Host.Target())
	}
	if o.opt.Cwd, err = hostPath(c, o.opt.Cwd); err != nil { // a relative cwd is the recipe's
		return nil, err
	}
	if err := o.cli.apply(c, &o.opt); err != nil {
		return nil, err
	}
	s := into
	if s == nil {
		s = &Session{}
	}
	s.env, s.host, s.thread, s.policy, s.limit = c.Env, c.Host, c.Thread, o.policy, o.opt.TurnTimeout
	s.onMessage, s.checkpoints = o.control.onMessage, o.control.checkpoints
	if id := c.NewProcessID(); id != "" {
		// In a durable run, a CLI a resume finds again (sdk_durable.go).
		o.opt.ProcessID = id
	}
	s.procID = o.opt.ProcessID
	if len(o.tools) > 0 {
		s.tools = make(map[string]*Tool, len(o.tools))
		for _, t := range o.tools {
			s.tools[t.name] = t
		}
		o.opt.CallTool = s.callTool
	}
	s.cwd.Store(o.opt.Cwd)
	// A fork's or a continued session's id is learned from the CLI.
	id := o.opt.Resume
	if o.opt.Fork {
		id = ""
	}
	if o.opt.Resume == "" && !o.opt.Continue {
		if o.opt.SessionID == "" { // set by a resumed run (sdk_durable.go)
			o.opt.SessionID = uuid.NewString()
		}
		id = o.opt.SessionID
	}
	s.sid.Store(id)
	o.opt.Permission = s.permission
	o.opt.Hooks = s.hookOptions(o.steps.hooks)
	o.opt.Observer = s.observe
	err = block(c.Env, c.Env.Ctx, func(ctx context.Context) error {
		as, err := agent.Start(ctx, cl, o.opt)
		if err != nil {
			return err
		}
		s.s = as
		if !agentsOf(c.Env).track(s) {
			// The run ended while the CLI started: nobody will close it.
			as.Close()
			return errors.New("the run is over")
		}
		return nil
	})
	if err != nil {
		return nil, c.Errorf("%s", agentMessage(err))
	}
	return s, nil
}

// agentMessage is an engine error without the engine's "agent: " prefixes
// (the builtin's name leads already) and with a daemon error's message
// rather than its JSON-RPC code.
func agentMessage(err error) string {
	msg := err.Error()
	var we *wire.Error
	if errors.As(err, &we) {
		msg = strings.Replace(msg, we.Error(), we.Message, 1)
	}
	return strings.ReplaceAll(strings.TrimPrefix(msg, "agent: "), ": agent: ", ": ")
}

// decided is the recipe thread's answer to one permission request, or
// the wait for a person that only a person can answer.
type decided struct {
	ans  runtime.Answer
	wait *runtime.Waiting
	err  error
}

// permission is the session's agent.Options.Permission. It runs on a
// goroutine of the engine; the approvers run on the recipe thread, at its
// next wait, while this goroutine waits for them. A request only a person
// can decide is waited for here, not on the recipe thread, so that many
// wait at once. A request withdrawn (or a session closed) meanwhile is
// dropped unanswered.
func (s *Session) permission(ctx context.Context, r agent.Request) (agent.Decision, error) {
	req := &runtime.ApprovalRequest{
		Kind: runtime.KindTool, Tool: r.Tool, Input: exactInput(r), ToolUseID: r.ToolUseID,
		Description: r.Description, SessionID: r.SessionID, Cwd: s.cwd.Load().(string), Local: s.host.Local(),
		Suggestions: r.Suggestions, BlockedPath: r.BlockedPath, DecisionReason: r.DecisionReason, AgentID: r.AgentID,
	}
	done := make(chan decided, 1)
	s.asked.post(r.Seq, func() {
		if ctx.Err() != nil {
			return // nobody waits for this answer any more
		}
		if s.env.Ctx.Err() != nil || s.env.RecipeEnded() {
			ans := runtime.Answer{Message: "the recipe is stopping", By: runtime.ByDefault}
			logApproval(s.env, req, ans)
			done <- decided{ans: ans}
			return
		}
		ans, w, err := decide(s.env, s.thread, req, s.policy)
		done <- decided{ans, w, err}
	}, s.env.Loop.Post)
	select {
	case d := <-done:
		if d.err != nil {
			return agent.Decision{}, d.err
		}
		if d.wait != nil {
			d.ans = waitForPerson(ctx, s.env, req, d.wait)
			if ctx.Err() != nil {
				return agent.Deny("the request was withdrawn", false), ctx.Err()
			}
		}
		return agentDecision(d.ans)
	case <-ctx.Done():
		return agent.Deny("the request was withdrawn", false), ctx.Err()
	}
}

// exactInput is the request's input decoded again from the raw message
// with numbers kept exact, so an integer stays an int in Starlark.
func exactInput(r agent.Request) map[string]any {
	var raw struct {
		Input json.RawMessage `json:"input"`
	}
	if json.Unmarshal(r.Raw, &raw) != nil || len(raw.Input) == 0 {
		return r.Input
	}
	dec := json.NewDecoder(bytes.NewReader(raw.Input))
	dec.UseNumber()
	var m map[string]any
	if dec.Decode(&m) != nil || m == nil {
		return r.Input
	}
	return m
}

func agentDecision(a runtime.Answer) (agent.Decision, error) {
	if !a.Allow {
		return agent.Deny(a.Message, a.Interrupt), nil
	}
	var perms []agent.PermissionUpdate
	if a.Remember != "" {
		u, err := agent.SessionRule(a.Remember)
		if err != nil {
			return agent.Decision{}, fmt.Errorf("remember: %w", err)
		}
		perms = append(perms, u)
	}
	updates, err := permissionUpdates(a.Updates) // sdk_control.go
	if err != nil {
		return agent.Decision{}, err
	}
	return agent.Allow(a.Input, append(perms, updates...)...), nil
}

// observe is the session's agent.Options.Observer: protocol messages become
// agent events. Decisions are logged by the approver chain instead, tool
// calls by callTool.
func (s *Session) observe(e agent.Event) {
	if e.Type == "permission" || e.Type == "tool" || e.Type == "keep_alive" {
		return
	}
	s.deliverMessage(e) // on_message (sdk_control.go)
	if e.Type == "stream_event" {
		return // partial messages are on_message's alone: they would flood --json and the views
	}
	sid, _ := s.sid.Load().(string)
	if e.Dir == agent.In && e.Type == "system" {
		// Seen before any request of its turn: the engine observes each
		// message before it acts on it.
		var m struct {
			Subtype   string `json:"subtype"`
			SessionID string `json:"session_id"`
			Cwd       string `json:"cwd"`
		}
		if json.Unmarshal(e.Message, &m) == nil {
			if sid == "" && m.SessionID != "" {
				sid = m.SessionID
				s.sid.Store(sid)
			}
			if m.Subtype == "init" && path.IsAbs(m.Cwd) {
				s.cwd.Store(m.Cwd)
			}
		}
	}
	s.env.Output.Agent(sid, e.Dir, e.Message)
}

func (s *Session) String() string {
	if s.s == nil {
		return fmt.Sprintf("<Session %s on %s>", s.replayed.sid, s.host.Target())
	}
	return fmt.Sprintf("<Session %s on %s>", s.s.ID(), s.host.Target())
}
func (s *Session) Type() string          { return "Session" }
func (s *Session) Freeze()               {} // a handle to a CLI the run owns
func (s *Session) Truth() starlark.Bool  { return starlark.True }
func (s *Session) Hash() (uint32, error) { return 0, fmt.Errorf("unhashable type: Session") }
func (s *Session) Attr(name string) (starlark.Value, error) {
	return s.env.Table.Attr(s.env, "Session", s, s.host, name)
}
func (s *Session) AttrNames() []string { return s.env.Table.AttrNames("Session") }

func sessionID(s *Session) starlark.Value {
	if s.s == nil {
		return starlark.String(s.replayed.sid)
	}
	if id := s.s.ID(); id != "" {
		return starlark.String(id)
	}
	return starlark.None
}

func sessionSend(c *runtime.Call, s *Session) (starlark.Value, error) {
	var prompt string
	var timeout *time.Duration
	if err := bind(c, 1, req("prompt", str(&prompt)), opt("timeout", optSeconds(&timeout))); err != nil {
		return nil, err
	}
	var limit time.Duration
	if timeout != nil {
		if *timeout <= 0 {
			return nil, c.Errorf("timeout: want more than 0 seconds")
		}
		limit = *timeout
	}
	if s.replayed != nil {
		// A handle a resumed run rebuilt (sdk_durable.go).
		if c.Rejoining {
			if t, err := s.rejoinTurn(c); t != nil || err != nil {
				return t, err
			}
			c.Notice(fmt.Sprintf("sous: no CLI of session %s finished the turn the runner died in: it is sent again", s.replayed.sid))
		}
		// Not journaled as a step: the send's record is in the journal
		// already (sdk_durable.go).
		if err := s.takeOverDiedIn(c); err != nil {
			return nil, err
		}
	}
	t, err := s.send(c, prompt, limit)
	if err != nil {
		return nil, err
	}
	t.cli, t.stdin = s.procID, s.s.StdinApplied()
	return t, nil
}

// send runs one turn; limit 0 means the session's timeout.
func (s *Session) send(c *runtime.Call, prompt string, limit time.Duration) (*Turn, error) {
	if err := s.s.Err(); err != nil {
		return nil, c.Errorf("%s", agentMessage(err))
	}
	if err := agentsOf(c.Env).turnWaitRefused(); err != nil {
		return nil, c.Errorf("%v", err)
	}
	if err := c.Env.Budget.Err(); err != nil {
		return nil, c.Errorf("%v", err) // no new turn past the run's --max-cost
	}
	p := s.s.StartWith(prompt, agent.TurnOptions{Timeout: limit})
	if limit == 0 {
		limit = s.limit
	}
	if err := wait(c.Env, p.Done(), nil); err != nil {
		return nil, c.Errorf("%v", err)
	}
	t, err := turnOutcome(c.Env, p, limit)
	if err != nil {
		return nil, c.Errorf("%v", err)
	}
	return t, nil
}

// turnOutcome is a finished turn's Turn, or why there is none.
func turnOutcome(env *runtime.Env, p *agent.Pending, limit time.Duration) (*Turn, error) {
	t, err := p.Result()
	switch {
	case errors.Is(err, agent.ErrCLIStuck):
		return nil, fmt.Errorf("the turn ran past its timeout of %s and the CLI did not stop when interrupted: the session was ended", formatSeconds(limit))
	case errors.Is(err, agent.ErrTurnTimeout):
		return nil, fmt.Errorf("the turn ran past its timeout of %s and was interrupted", formatSeconds(limit))
	case err != nil:
		if berr := env.Budget.Err(); berr != nil {
			return nil, berr // dropped because the run spent its --max-cost
		}
		return nil, errors.New(agentMessage(err))
	}
	if err := env.Budget.Err(); err != nil {
		// The turn spent the rest of the run's --max-cost, or was
		// interrupted because another did: the recipe fails with it
		// rather than go on with what the turn left undone.
		return nil, err
	}
	return &Turn{t: t, env: env}, nil
}

func sessionStart(c *runtime.Call, s *Session) (starlark.Value, error) {
	var prompt string
	if err := bind(c, 1, req("prompt", str(&prompt))); err != nil {
		return nil, err
	}
	if s.replayed != nil {
		// A handle a resumed run rebuilt (sdk_durable.go).
		if c.Rejoining {
			// The runner died in this start, on a daemon that outlives
			// it: the prompt may have reached the CLI, which then went on
			// with the turn. Its wait finds out.
			return s.startedBeforeResume(c, prompt), nil
		}
		if err := s.takeOverDiedIn(c); err != nil {
			return nil, err
		}
	}
	if err := s.s.Err(); err != nil {
		return nil, c.Errorf("%s", agentMessage(err))
	}
	if err := c.Env.Budget.Err(); err != nil {
		return nil, c.Errorf("%v", err) // no new turn past the run's --max-cost
	}
	before := s.s.StdinApplied()
	return &Pending{env: c.Env, session: s, prompt: prompt, p: s.s.Start(prompt), limit: s.limit,
		cli: s.procID, stdinBefore: before}, nil
}

// control sends a control request through the loop, bounded in time.
func (s *Session) control(c *runtime.Call, fn func(ctx context.Context) error) error {
	if err := s.s.Err(); err != nil {
		return c.Errorf("%s", agentMessage(err))
	}
	ctx, cancel := context.WithTimeout(c.Env.Ctx, controlTimeout)
	defer cancel()
	if err := block(c.Env, ctx, fn); err != nil {
		if c.Env.Ctx.Err() != nil {
			return c.Errorf("%v", errInterrupted)
		}
		if ctx.Err() != nil {
			return c.Errorf("the CLI gave no answer within %s: it is stuck (the session stays open; close() ends it)", controlTimeout)
		}
		return c.Errorf("%s", agentMessage(err))
	}
	return nil
}

func sessionInterrupt(c *runtime.Call, s *Session) (starlark.Value, error) {
	if err := bind(c, 0); err != nil {
		return nil, err
	}
	if s.s == nil {
		// A handle a resumed run rebuilt (sdk_durable.go).
		s.interruptAcrossResume(c)
		return starlark.None, nil
	}
	return starlark.None, s.control(c, s.s.Interrupt)
}

func sessionSetModel(c *runtime.Call, s *Session) (starlark.Value, error) {
	var model string
	if err := bind(c, 1, req("model", str(&model))); err != nil {
		return nil, err
	}
	if s.s == nil {
		// A handle a resumed run rebuilt, whose runner died in this call:
		// the CLI that takes the session over starts with it.
		s.replayed.keepSetting(c)
		return starlark.None, nil
	}
	return starlark.None, s.control(c, func(ctx context.Context) error { return s.s.SetModel(ctx, model) })
}

func sessionSetPermissionMode(c *runtime.Call, s *Session) (starlark.Value, error) {
	var mode string
	if err := bind(c, 1, req("mode", str(&mode))); err != nil {
		return nil, err
	}
	if s.s == nil {
		s.replayed.keepSetting(c) // as in sessionSetModel
		return starlark.None, nil
	}
	return starlark.None, s.control(c, func(ctx context.Context) error { return s.s.SetPermissionMode(ctx, mode) })
}

func sessionClose(c *runtime.Call, s *Session) (starlark.Value, error) {
	if err := bind(c, 0); err != nil {
		return nil, err
	}
	return starlark.None, s.close(c)
}

// close ends the CLI through the loop (it can take the kill grace).
func (s *Session) close(c *runtime.Call) error {
	if s.s == nil {
		s.closeReplayed(c) // sdk_durable.go
		return nil
	}
	err := block(c.Env, context.Background(), func(context.Context) error { return s.s.Close() })
	agentsOf(c.Env).untrack(s)
	if err != nil {
		return c.Errorf("%s", agentMessage(err))
	}
	return nil
}
