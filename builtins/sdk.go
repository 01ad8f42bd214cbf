package builtins

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"maps"
	"path"
	"slices"
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

// The agent builtins bind runtime/agent's sessions to recipes. The engine
// runs each session on goroutines of its own; what touches Starlark (a
// policy) is posted to the recipe thread through the event loop, and every
// wait goes through the loop so that those callbacks run.

// controlTimeout bounds a control request (interrupt, set_model, ...): a
// CLI that does not answer in that time is stuck.
const controlTimeout = 30 * time.Second

const sessionSig = `sdk.session(*, cwd=None, model=None, permission_mode=None, system_prompt=None, append_system_prompt=None, ` +
	`allowed_tools=[], disallowed_tools=[], max_turns=None, policy=None, transport="stdio", cli="claude", env=None, ` +
	`resume=None, fork=False, timeout=None, tools=[], output_schema=None, hooks=None, max_budget_usd=None, ` +
	cliOptionsSig + `, checkpoints=False, on_message=None, extra_args=None) -> Session`

func sdkEntries() []runtime.Entry {
	return []runtime.Entry{
		{Name: "sdk", Sig: "sdk", Host: true,
			Doc: "Claude Code sessions on the host: sdk.session(...) and sdk.send(prompt, ...). h.sdk starts them on the Host h."},
		{Name: "sdk.session", Journal: runtime.JournalEffect, Rejoin: true, Replayed: sessionReplayed, Sig: sessionSig,
			Doc: "Starts the Claude Code CLI on the host and returns once it answered the protocol's initialize. " +
				"transport=\"stdio\": the CLI is a daemon process (--print --input-format stream-json --output-format " +
				"stream-json --verbose --permission-prompt-tool stdio) spoken to through its stdin (with offsets) and " +
				"stdout, so a session on a remote host survives a dropped connection. transport=\"websocket\": sous " +
				"serves a loopback WebSocket (random port, bearer token) and starts the CLI with --sdk-url; only for " +
				"the embedded daemon or a unix socket daemon on this machine (Claude Code 2.1.121 and later refuse it). " +
				"cli is a program name, a path or a list ([\"node\", \"/path/cli.js\"]). env (dict of strings) is " +
				"merged over the host's environment (e.g. ANTHROPIC_BASE_URL); under sous run --fake-model the " +
				"scripted model's ANTHROPIC_BASE_URL and key win over both, and a session on an ssh or ws host is " +
				"refused. model, permission_mode, allowed_tools, disallowed_tools and max_turns map to the CLI's " +
				"flags, system_prompt and append_system_prompt to " +
				"initialize. resume continues a session by id; fork=True forks it. timeout (seconds) bounds every " +
				"turn: the turn is interrupted and send fails saying so. policy(req) answers the session's permission " +
				"requests first (see approvals). tools (a list of tool(...)) are served to the CLI by sous (an " +
				"in-process MCP server named sous, announced in initialize) and allowed without asking unless " +
				"disallowed_tools names them (mcp__sous__NAME, or mcp__sous for all); their functions run on the " +
				"recipe thread, like policies. " +
				"output_schema (a dict, a JSON Schema) maps to --json-schema: every turn " +
				"ends with a value the CLI validated against it, Turn.structured_output (the model gets a StructuredOutput " +
				"tool; an invalid payload goes back to it as an error to retry). hooks is a dict from event name " +
				"(PreToolUse, PostToolUse, UserPromptSubmit, Stop, SubagentStop, PreCompact, Notification) to a list of " +
				"hook(...) values, registered with the CLI and called on the recipe thread (see hook). max_budget_usd " +
				"maps to --max-budget-usd: a turn that spends past it ends with subtype \"error_max_budget_usd\" (not ok). " +
				cliOptionsDoc + " " +
				"checkpoints=True turns on the CLI's file checkpoints (see Session.rewind_files). on_message(msg) is " +
				"called on the recipe thread, like a policy, with every protocol message from the CLI as it arrives " +
				"(a frozen dict; keep_alive left out), the partial stream_event messages included " +
				"(--include-partial-messages); those of a turn all run before its send or wait returns; one that " +
				"fails fails the recipe with its traceback. " +
				"The CLI's process tree is ended by close(), when the recipe ends, fails or is interrupted.",
			Fn: sdkSession},
		// A whole session in one call: a durable run keeps its Turn, and
		// a resume that reaches it again on the embedded daemon (whose CLI
		// died with the runner) sends it again, as it runs a command
		// again; on a daemon that outlives the runner, whose CLI may still
		// be answering, the resume stops instead.
		{Name: "sdk.send", Journal: runtime.JournalEffect, Sig: "sdk.send(prompt, **session_kwargs) -> Turn",
			Doc: "Starts a session with the keywords of sdk.session, sends one prompt, closes the session and " +
				"returns the Turn.",
			Fn: sdkSend},
		{Name: "Session", Sig: "Session",
			Doc: "A running Claude Code CLI from sdk.session. Turns run one at a time: a prompt sent while a turn runs " +
				"is sent when that turn ends."},
		{Name: "Session.id", Sig: "Session.id -> string or None",
			Doc:  "The CLI's session id (a fresh session's is known at once; a fork's or a continued one's once its first turn started).",
			Attr: attr(sessionID)},
		{Name: "Session.send", Journal: runtime.JournalEffect, Rejoin: true, Replayed: turnReplayed, Sig: "Session.send(prompt, *, timeout=None) -> Turn",
			Doc: "Sends a user message and blocks until its result. Permission requests are answered meanwhile. " +
				"timeout (seconds; default the session's) bounds the turn: when it passes, the turn is interrupted and " +
				"send fails saying so. An interrupted turn (interrupt(), deny(..., interrupt=True)) returns a Turn.",
			Fn: method(sessionSend)},
		{Name: "Session.start", Sig: "Session.start(prompt) -> Pending",
			Doc: "Sends a user message without waiting; Pending.wait() or wait_all() gives the Turn.",
			Fn:  method(sessionStart)},
		{Name: "Session.interrupt", Sig: "Session.interrupt()",
			Doc: "Stops the running turn: its send or wait returns a Turn with subtype \"error_during_execution\".",
			Fn:  method(sessionInterrupt)},
		{Name: "Session.set_model", Sig: "Session.set_model(model)",
			Doc: "Switches the model for what follows (\"default\" resets it).", Fn: method(sessionSetModel)},
		{Name: "Session.set_permission_mode", Sig: "Session.set_permission_mode(mode)",
			Doc: "Changes the permission mode (default, acceptEdits, plan, bypassPermissions, ...; the CLI decides " +
				"which it accepts).", Fn: method(sessionSetPermissionMode)},
		{Name: "Session.close", Journal: runtime.JournalEffect, Rejoin: true, Sig: "Session.close()",
			Doc: "Ends the CLI and its whole process tree (SIGTERM, then SIGKILL after 3 s). Later calls fail; " +
				"closing twice is fine.", Fn: method(sessionClose)},
		{Name: "Pending", Sig: "Pending", Doc: "A turn under way, from Session.start. wait_all accepts it."},
		{Name: "Pending.wait", Sig: "Pending.wait(timeout=None) -> Turn",
			Doc: "Blocks until the turn's result. When timeout (seconds) passes first, wait fails and the turn keeps " +
				"running; a turn that ran past the session's timeout fails as send does.",
			Fn: method(pendingWait)},
		{Name: "Turn", Sig: "Turn", Doc: "The outcome of one prompt."},
		{Name: "Turn.text", Sig: "Turn.text -> string", Doc: `The result text ("" when the CLI gives none).`,
			Attr: attr(func(t *Turn) starlark.Value { return starlark.String(t.t.Text) })},
		{Name: "Turn.ok", Sig: "Turn.ok -> bool",
			Doc: "Whether the turn succeeded: False when the result is an error (is_error) or has an error_* subtype " +
				"(error_during_execution, error_max_turns, error_max_budget_usd, ...; some CLI versions send " +
				"is_error false with those).",
			Attr: attr(func(t *Turn) starlark.Value { return starlark.Bool(t.t.OK()) })},
		{Name: "Turn.subtype", Sig: "Turn.subtype -> string",
			Doc:  `The result's subtype: "success", "error_during_execution" (interrupted), "error_max_turns", ...`,
			Attr: attr(func(t *Turn) starlark.Value { return starlark.String(t.t.Subtype) })},
		{Name: "Turn.cost_usd", Sig: "Turn.cost_usd -> float", Doc: "The CLI's total_cost_usd: what the session's CLI has spent so far (this turn and those before it in the same CLI process), not this turn alone.",
			Attr: attr(func(t *Turn) starlark.Value { return starlark.Float(t.t.CostUSD) })},
		{Name: "Turn.num_turns", Sig: "Turn.num_turns -> int", Doc: "The CLI's num_turns (model round trips).",
			Attr: attr(func(t *Turn) starlark.Value { return starlark.MakeInt(t.t.NumTurns) })},
		{Name: "Turn.duration_ms", Sig: "Turn.duration_ms -> int", Doc: "The CLI's duration_ms.",
			Attr: attr(func(t *Turn) starlark.Value { return starlark.MakeInt64(t.t.DurationMs) })},
		{Name: "Turn.session_id", Sig: "Turn.session_id -> string", Doc: "The session id the result names.",
			Attr: attr(func(t *Turn) starlark.Value { return starlark.String(t.t.SessionID) })},
		{Name: "Turn.usage", Sig: "Turn.usage -> dict", Doc: "The result's usage (tokens), as the CLI sent it (frozen).",
			Attr: attr((*Turn).usage)},
		{Name: "Turn.denials", Sig: "Turn.denials -> list of struct(tool, tool_use_id, input)",
			Doc: "The tool uses denied during the turn (the result's permission_denials).", Attr: attr((*Turn).denials)},
		{Name: "Turn.messages", Sig: "Turn.messages -> list of dicts",
			Doc:  "Every protocol message of the turn as received, in order, the result last (frozen).",
			Attr: attr((*Turn).messages)},
	}
}

// sessionOptions are the keywords of sdk.session.
type sessionOptions struct {
	opt      agent.Options
	policy   starlark.Callable
	timeout  *time.Duration
	maxTurns *int64
	tools    []*Tool
	steps    stepOptions    // output_schema, hooks, max_budget_usd (sdk_steps.go)
	control  controlOptions // checkpoints, on_message (sdk_control.go)
	cli      cliOptions     // agents, mcp_servers, settings, ..., extra_args (sdk_options.go)
}

func newSessionOptions() *sessionOptions {
	return &sessionOptions{opt: agent.Options{Transport: agent.TransportStdio, CLI: []string{"claude"}}}
}

func (o *sessionOptions) bindings() []binding {
	return append([]binding{
		opt("cwd", optStr(&o.opt.Cwd)),
		opt("model", optStr(&o.opt.Model)),
		opt("permission_mode", optStr(&o.opt.PermissionMode)),
		opt("system_prompt", optStr(&o.opt.SystemPrompt)),
		opt("append_system_prompt", optStr(&o.opt.AppendSystemPrompt)),
		opt("allowed_tools", strList(&o.opt.AllowedTools)),
		opt("disallowed_tools", strList(&o.opt.DisallowedTools)),
		opt("max_turns", optInteger(&o.maxTurns, 1)),
		opt("policy", optCallable(&o.policy)),
		opt("transport", str(&o.opt.Transport)),
		opt("cli", command(&o.opt.CLI, nil)),
		opt("env", strDict(&o.opt.Env)),
		opt("resume", optStr(&o.opt.Resume)),
		opt("fork", boolean(&o.opt.Fork)),
		opt("timeout", optSeconds(&o.timeout)),
		opt("tools", toolList(&o.tools)),
	}, slices.Concat(o.steps.bindings(), o.cli.bindings(), o.control.bindings(), o.cli.lastBindings())...)
}

// check validates what binding could not.
func (o *sessionOptions) check(c *runtime.Call) error {
	switch {
	case o.opt.Transport != agent.TransportStdio && o.opt.Transport != agent.TransportWebSocket:
		return c.Errorf("transport: want %q or %q, got %q", agent.TransportStdio, agent.TransportWebSocket, o.opt.Transport)
	case len(o.opt.CLI) == 0 || o.opt.CLI[0] == "":
		return c.Errorf("cli: empty command")
	case o.opt.Fork && o.opt.Resume == "" && !o.cli.continueConv:
		return c.Errorf("fork: needs resume (the id of the session to fork) or continue_conversation")
	case o.cli.continueConv && o.opt.Resume != "":
		return c.Errorf("continue_conversation and resume: give one (continue_conversation picks the most recent conversation in cwd, resume names one)")
	case o.timeout != nil && *o.timeout <= 0:
		return c.Errorf("timeout: want more than 0 seconds")
	}
	if o.maxTurns != nil {
		o.opt.MaxTurns = int(*o.maxTurns)
	}
	if o.timeout != nil {
		o.opt.TurnTimeout = *o.timeout
	}
	o.opt.Tools = agentTools(o.tools)
	o.steps.apply(&o.opt)
	o.control.apply(&o.opt)
	return o.cli.check(c, o.opt)
}

func sdkSession(c *runtime.Call) (starlark.Value, error) {
	o, err := sessionArgs(c)
	if err != nil {
		return nil, err
	}
	if c.Rejoining {
		// The runner died while this CLI started (sdk_durable.go).
		endOrphanCLI(c, c.Host, "sous-"+c.JournalID+"-1")
	}
	return startSession(c, o, nil)
}

// sessionArgs reads sdk.session's arguments.
func sessionArgs(c *runtime.Call) (*sessionOptions, error) {
	o := newSessionOptions()
	if err := bind(c, 0, o.bindings()...); err != nil {
		return nil, err
	}
	if err := o.check(c); err != nil {
		return nil, err
	}
	return o, nil
}

func sdkSend(c *runtime.Call) (starlark.Value, error) {
	var prompt string
	o := newSessionOptions()
	if err := bind(c, 1, append([]binding{req("prompt", str(&prompt))}, o.bindings()...)...); err != nil {
		return nil, err
	}
	if err := o.check(c); err != nil {
		return nil, err
	}
	s, err := startSession(c, o, nil)
	if err != nil {
		return nil, err
	}
	turn, err := s.send(c, prompt, 0)
	if cerr := s.close(c); err == nil && cerr != nil {
		return nil, cerr
	}
	if err != nil {
		return nil, err
	}
	return turn, nil
}

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

// agents is the run's agent state, the agents plugin's (runtime.Env.State).
// The recipe-wide policy is only touched on the recipe thread; the
// sessions are also closed from the runtime's goroutine at the end, hence
// the lock.
type agents struct {
	policy starlark.Callable // set by approvals(); nil: none
	// inPolicy counts the policies and hooks running on the recipe thread
	// (they can nest through a builtin that waits), inTool the tool
	// functions. Waiting for a turn then would never end: the loop runs no
	// other callback while one runs, so the turn's own permission requests,
	// hooks and tool calls could not be answered.
	inPolicy, inTool int

	mu       sync.Mutex
	sessions map[*Session]struct{}
	closed   bool
	// orphans are the sessions a resumed run rebuilt and has not taken
	// over: their CLI, on a daemon that outlives the runner, is ended
	// with the run (sdk_durable.go).
	orphans map[*Session]struct{}
}

func (a *agents) orphan(s *Session) {
	a.mu.Lock()
	defer a.mu.Unlock()
	if a.orphans == nil {
		a.orphans = make(map[*Session]struct{})
	}
	a.orphans[s] = struct{}{}
}

func (a *agents) adopted(s *Session) {
	a.mu.Lock()
	defer a.mu.Unlock()
	delete(a.orphans, s)
}

var _ io.Closer = (*agents)(nil)

// track registers a session so that the run closes it; false when the run
// is over.
func (a *agents) track(s *Session) bool {
	a.mu.Lock()
	defer a.mu.Unlock()
	if a.closed {
		return false
	}
	if a.sessions == nil {
		a.sessions = make(map[*Session]struct{})
	}
	a.sessions[s] = struct{}{}
	return true
}

func (a *agents) untrack(s *Session) {
	a.mu.Lock()
	defer a.mu.Unlock()
	delete(a.sessions, s)
}

// Close ends every agent session of the run, whose CLI process tree is
// killed and reaped. The runtime calls it when the recipe ends, however it
// ends, before it closes the daemon connections (a CLI on a socket daemon
// would outlive them).
func (a *agents) Close() error {
	a.mu.Lock()
	a.closed = true
	sessions := a.sessions
	a.sessions = nil
	orphans := a.orphans
	a.orphans = nil
	a.mu.Unlock()
	for s := range orphans {
		if s.s == nil && !s.replayed.closed && s.host.Outlives() {
			ctx, cancel := context.WithTimeout(context.Background(), 15*time.Second)
			if d, err := s.host.Connect(ctx); err == nil {
				_ = killOnDaemon(ctx, d, s.replayed.cli)
			}
			cancel()
		}
	}
	var (
		wg   sync.WaitGroup
		mu   sync.Mutex
		errs []error
	)
	for s := range sessions {
		wg.Add(1)
		go func() {
			defer wg.Done()
			if err := s.s.Close(); err != nil {
				mu.Lock()
				errs = append(errs, fmt.Errorf("session %s: %w", s.s.ID(), err))
				mu.Unlock()
			}
		}()
	}
	wg.Wait()
	if err := errors.Join(errs...); err != nil {
		return fmt.Errorf("closing agent sessions: %w", err)
	}
	return nil
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
		if s.s == nil {
			// Not journaled as a step: the send's record is in the
			// journal already (sdk_durable.go).
			if err := s.restart(c); err != nil {
				return nil, err
			}
		}
	}
	t, err := s.send(c, prompt, limit)
	if err != nil {
		return nil, err
	}
	t.cli, t.stdin = s.procID, s.s.StdinApplied()
	return t, nil
}

// Why a callback cannot wait for an agent's turn.
var (
	errInPolicy = errors.New("a policy or hook cannot wait for an agent's turn: no permission request or hook could be answered meanwhile")
	errInTool   = errors.New("a tool's function cannot wait for an agent's turn: no tool call or permission request could be answered meanwhile")
)

// turnWaitRefused says why the recipe thread cannot wait for a turn now
// (it runs a callback), or nil.
func (a *agents) turnWaitRefused() error {
	switch {
	case a.inPolicy > 0:
		return errInPolicy
	case a.inTool > 0:
		return errInTool
	}
	return nil
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
	if err := s.s.Err(); err != nil {
		return nil, c.Errorf("%s", agentMessage(err))
	}
	if err := c.Env.Budget.Err(); err != nil {
		return nil, c.Errorf("%v", err) // no new turn past the run's --max-cost
	}
	return &Pending{env: c.Env, session: s, prompt: prompt, p: s.s.Start(prompt), limit: s.limit}, nil
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
	return starlark.None, s.control(c, s.s.Interrupt)
}

func sessionSetModel(c *runtime.Call, s *Session) (starlark.Value, error) {
	var model string
	if err := bind(c, 1, req("model", str(&model))); err != nil {
		return nil, err
	}
	return starlark.None, s.control(c, func(ctx context.Context) error { return s.s.SetModel(ctx, model) })
}

func sessionSetPermissionMode(c *runtime.Call, s *Session) (starlark.Value, error) {
	var mode string
	if err := bind(c, 1, req("mode", str(&mode))); err != nil {
		return nil, err
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
