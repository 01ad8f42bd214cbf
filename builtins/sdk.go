package builtins

import (
	"slices"
	"time"

	"go.starlark.net/starlark"

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
		{Name: "Session.start", Journal: runtime.JournalEffect, Rejoin: true, Replayed: startReplayed, Sig: "Session.start(prompt) -> Pending",
			Doc: "Sends a user message without waiting; Pending.wait() or wait_all() gives the Turn.",
			Fn:  method(sessionStart)},
		{Name: "Session.interrupt", Journal: runtime.JournalEffect, Rejoin: true, Replayed: interruptReplayed, Sig: "Session.interrupt()",
			Doc: "Stops the running turn: its send or wait returns a Turn with subtype \"error_during_execution\".",
			Fn:  method(sessionInterrupt)},
		{Name: "Session.set_model", Journal: runtime.JournalEffect, Rejoin: true, Replayed: settingReplayed, Sig: "Session.set_model(model)",
			Doc: "Switches the model for what follows (\"default\" resets it).", Fn: method(sessionSetModel)},
		{Name: "Session.set_permission_mode", Journal: runtime.JournalEffect, Rejoin: true, Replayed: settingReplayed, Sig: "Session.set_permission_mode(mode)",
			Doc: "Changes the permission mode (default, acceptEdits, plan, bypassPermissions, ...; the CLI decides " +
				"which it accepts).", Fn: method(sessionSetPermissionMode)},
		{Name: "Session.close", Journal: runtime.JournalEffect, Rejoin: true, Sig: "Session.close()",
			Doc: "Ends the CLI and its whole process tree (SIGTERM, then SIGKILL after 3 s). Later calls fail; " +
				"closing twice is fine.", Fn: method(sessionClose)},
		{Name: "Pending", Sig: "Pending", Doc: "A turn under way, from Session.start. wait_all accepts it."},
		pendingWaitEntry(),
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
