// Package agent drives the Claude Code CLI through its stream-json protocol
// (the CLI's own, summarised below; docs/PROTOCOL.md is the daemon's): it
// starts the CLI as a process on a claustrum daemon, sends
// user messages, answers tool permission requests with a Go callback, and
// turns each prompt's stream of messages into a Turn. It knows nothing of
// Starlark; builtins/ binds it to recipes.
//
// # API
//
//	s, err := agent.Start(ctx, c, agent.Options{Cwd: dir, Permission: policy})
//	defer s.Close()                         // always: ends the CLI's process tree
//	turn, err := s.Send(ctx, "fix the test") // blocks until the turn's result
//	p := s.Start("next prompt")              // or: send now, wait later
//	p = s.StartWith("p", agent.TurnOptions{Timeout: d}) // this turn's own limit
//	turn, err = p.Wait(ctx)                  // or select on p.Done()
//	s.Interrupt(ctx); s.SetModel(ctx, m); s.SetPermissionMode(ctx, m)
//	s.ID()                                   // the CLI's session id
//	turn.OK(); turn.StructuredOutput         // not an error_* result; the --json-schema value
//
//	// Tools of its own, served to the CLI (the model calls mcp__sous__add):
//	opt.Tools = []agent.Tool{{Name: "add", Description: d, InputSchema: schema}}
//	opt.CallTool = func(ctx context.Context, c agent.ToolCall) (string, error) { ... }
//
//	// The CLI's own configuration (the Agent SDKs' options):
//	opt.Agents = map[string]agent.AgentDef{"reviewer": {Description: d, Prompt: p}} // in initialize
//	opt.MCPServers = map[string]agent.MCPServer{"db": {Command: "db-mcp"}}        // --mcp-config
//	opt.ExtraFlags = []agent.Flag{{Name: "max-turns", Value: "1"}}                 // --max-turns 1
//
// Start returns once the CLI answered the initialize control request, so a
// CLI that cannot start fails Start with its exit code and stderr.
//
// Turns run one at a time: a prompt started while another turn runs is sent
// when that turn's result arrives, so every result belongs to exactly one
// prompt. A Turn holds the result's fields and every message the CLI sent
// during the turn, in order, the result last (keep_alive left out; unknown
// types and fields kept as sent). An interrupted turn is a Turn with subtype
// error_during_execution, not an error. Send's ctx ending interrupts the
// turn; Pending.Wait's ctx ending only stops waiting. Options.TurnTimeout
// interrupts a turn that runs too long and fails it with ErrTurnTimeout (the
// Turn is returned too); TurnOptions.Timeout (StartWith) sets one turn's
// limit instead. A CLI that does not stop within 15 s of that interrupt ends
// the session.
//
// Permission requests (control_request can_use_tool) each run the
// Permission callback on their own goroutine, so several can be pending. A
// control_cancel_request from the CLI cancels the callback's ctx and no
// answer is sent. A callback that fails (error or panic) never leaves the
// CLI waiting: the tool is denied with a message naming the error, the turn
// is interrupted once the denial is in the transcript, and Send returns the
// Turn together with the error.
//
// Hooks (Options.Hooks, by event name: PreToolUse, PostToolUse,
// UserPromptSubmit, Stop, SubagentStop, PreCompact, Notification) are
// registered in initialize, one matcher entry and one callback id each, as
// the Agent SDKs do: {"hooks": {"PreToolUse": [{"matcher": "Bash",
// "hookCallbackIds": ["hook_0"], "timeout": 5}]}}. The CLI calls them with
// hook_callback control requests; each runs its Func on a goroutine of its
// own, like a permission callback, and the answer is the Func's output as
// it is ({} for nil). A Func that fails is answered {"continue": false}
// with a PreToolUse deny, its tool use's turn is interrupted once the tool
// has a result, and Send returns the error with the Turn. The CLI's stdin
// stays open for the whole session, so hooks and permission requests are
// answered in every turn (closing it early is what gives the SDKs' "Stream
// closed" errors).
// The CLI's other control requests are answered with an error response.
//
// OutputSchema maps to --json-schema: the CLI offers the model a
// StructuredOutput tool with that input schema, validates what the model
// sends, and puts the value in the result's structured_output
// (Turn.StructuredOutput). MaxBudgetUSD maps to --max-budget-usd. Turn.OK
// is false for is_error and for every error_* subtype.
//
// Options.Tools are served by an in-process MCP server named "sous"
// (ServerName), announced in initialize as sdkMcpServers: ["sous"]. The CLI
// speaks JSON-RPC to it through mcp_message control requests, answered with
// {"mcp_response": <JSON-RPC response>}: initialize, ping and tools/list at
// once, tools/call by running Options.CallTool on a goroutine of its own
// (several can run at once; a withdrawn call's ctx is cancelled and it gets
// no answer). A CallTool error or panic is an isError result carrying its
// message: the model reads it and the turn goes on. A result text over
// MaxToolResult is cut with a note. The model calls the tools as
// mcp__sous__NAME (ToolName); they are added to --allowedTools unless
// DisallowedTools names them, and a can_use_tool for one is allowed without
// calling Permission.
//
// The Observer sees every message in and out (Dir In/Out, the raw message)
// and every permission decision, serialized, in order. It must return
// quickly and must not call back into the session.
//
// # Transports
//
// stdio (default): the CLI runs with --print --input-format stream-json
// --output-format stream-json --verbose --permission-prompt-tool stdio.
// Messages go to its stdin through process.stdin with offsets (a write
// retried after a reconnect is applied once) and come back as stdout
// frames, reassembled into lines (a line may span frames and a frame may
// split a UTF-8 character). A session on a remote daemon survives a dropped
// connection: the client reattaches and replays stdout from the last seq.
// The last 16 KiB of stderr are kept for error messages.
//
// websocket: sous listens on 127.0.0.1 (random port, random path) and starts
// the CLI, still as a daemon process, with --sdk-url ws://127.0.0.1:PORT/PATH
// and a fresh random token in CLAUDE_CODE_SESSION_ACCESS_TOKEN. An upgrade
// without "Authorization: Bearer <token>" gets 401 before any WebSocket
// exists. sous pings every 10 s and sends keep_alive; the CLI does the same.
// When the CLI reconnects, sous resends everything the CLI has not visibly
// acted on (see wsTransport). Only for a daemon on this machine
// (Options.LocalHost, or an embedded client). A CLI that refuses local
// --sdk-url hosts (2.1.121 and later) fails Start with ErrSDKURLRejected,
// which says to use transport "stdio".
//
// Options map to the CLI as --model, --permission-mode, --allowedTools and
// --disallowedTools (one argument per rule), --max-turns, --resume,
// --fork-session; a fresh session gets --session-id with a UUID sous
// generated (or Options.SessionID), so ID is known before the first turn. SystemPrompt and
// AppendSystemPrompt travel in initialize (no command-line size limit), as
// do Agents. MCPServers, StrictMCPConfig, AddDirs, Settings,
// SettingSources, FallbackModel and Continue map to --mcp-config,
// --strict-mcp-config, --add-dir, --settings, --setting-sources,
// --fallback-model and --continue; ExtraFlags come last, and one that sous
// passes itself (or that the protocol rests on) is refused.
//
// # Files
//
// One job each; transports and the session meet only through the transport
// and receiver interfaces (transport.go).
//
//	session.go     Session, Start, ID, Err, Close, fail; the reader loop that
//	               files each message with its turn and dispatches it by type
//	options.go     Options, their checks and defaults (prepare)
//	args.go        the CLI's command line (buildArgs) and initialize payload
//	turn.go        Turn, Pending, TurnOptions; Send/Start/StartWith, turn
//	               queueing, timeouts, abandoning, the result message
//	control.go     sous's control requests (Interrupt, SetModel,
//	               SetPermissionMode, Control) and matching their responses
//	incoming.go    the CLI's control requests: dispatch by subtype
//	               (handlerFor), cancellation, answering
//	permission.go  can_use_tool: Request, Decision, the Permission callback,
//	               interrupting after a failed callback
//	tools.go       Tool, ToolCall, ToolName: the session's own tools, their
//	               checks and which of them the CLI may use without asking
//	mcpserver.go   the in-process MCP server's JSON-RPC: handshake, ping,
//	               tools/list, tools/call
//	mcpmessage.go  mcp_message: running a tool call, cutting long results
//	hooks.go       hook_callback: Hook, HookCall, the events, registering
//	               them in initialize, answering with a hook's output
//	rules.go       PermissionUpdate, PermissionRule, ParseRule, SessionRule
//	info.go        Info, Version, Control and ControlError: the initialize
//	               answer and the CLI's refusals, naming its version
//	checkpoints.go RewindFiles: file checkpoints and rewind_files
//	subagents.go   AgentDef: subagents, their checks, initialize's agents
//	               and whether the CLI took them
//	mcpconfig.go   MCPServer: external MCP servers and --mcp-config
//	extraflags.go  Flag: ExtraFlags, which of them are refused
//	observe.go     Event and the Observer call
//	outbox.go      the writer goroutine: queueing, encoding, write errors
//	messages.go    the fields of the CLI's messages the package reads
//	errors.go      the errors callers test for with errors.Is
//	transport.go   the transport interface, launch, outbound messages
//	cliproc.go     the CLI as a daemon process: spawn, stderr tail, exit, stop
//	stdio.go       the stdio transport
//	websocket.go   the WebSocket transport: endpoint, auth, replay on reconnect
//	sdkurl.go      why a WebSocket start failed (CLIs refusing local --sdk-url)
//	lines.go       reassembling stdout frames into lines
//	queue.go       the unbounded FIFO between goroutines
//
// Answering a new subtype of the CLI's control requests (hook_callback,
// ...) is a handler in a file of its own and a case in
// handlerFor; incoming.go gives it a ctx the CLI can cancel, records its
// error on the turn, and sends its answer.
//
// # What the real CLI does (2.1.81 and 2.1.330, against runtime/agent/fakemodel)
//
// Beyond what the CLI documents:
//   - --max-turns and --permission-prompt-tool are accepted but hidden from
//     --help in both versions. --session-id UUID is honoured; a UUID already
//     used under the same config dir fails at once with "Session ID ... is
//     already in use." --resume ID keeps the id and sends the old history;
//     --fork-session with it gets a new id (learned from system/init).
//   - 2.1.330's --help lists permission modes acceptEdits, auto,
//     bypassPermissions, manual, dontAsk, plan; "default" is still accepted
//     (and "manual" reports itself as "default").
//   - initialize is answered before the first user message, over stdio and
//     over WebSocket, by both versions, and both honour its systemPrompt and
//     appendSystemPrompt. Its response lists commands, models, account, ...
//   - set_model: success (2.1.330 echoes {"model": ...}), preceded by a
//     synthetic user message "<local-command-stdout>Set model to
//     ...</local-command-stdout>" with isReplay true; on 2.1.330 that
//     response can come after the responses to later control requests.
//     The next model request carries the new model.
//   - set_permission_mode answers {"mode": ...} and emits system/status with
//     permissionMode. 2.1.81 accepts any string; 2.1.330 refuses unknown
//     modes with an error response.
//   - interrupt answers success (2.1.330: {"still_queued": []}). The CLI
//     reads control requests eagerly: an interrupt written after a
//     permission answer can overtake it, and then the tool's result is the
//     CLI's stock "The user doesn't want to proceed with this tool use..."
//     text. A deny with interrupt:true does the same: the deny message is
//     replaced by that text and "[Request interrupted by user for tool use]"
//     follows. A plain deny's message reaches the model verbatim.
//   - An unknown control request subtype gets an error response
//     "Unsupported control request subtype: X" (2.1.330 adds
//     "error_code": "unsupported_request").
//   - 2.1.330 sends command_lifecycle messages (state "queued", "started")
//     for each user message, and puts "type" late in its result message.
//   - A duplicate user message (same uuid) is skipped; a duplicate
//     control_response whose toolUseID was already resolved is ignored.
//     This is what makes resending after a WebSocket reconnect safe.
//   - With CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC=1 (and in these flows
//     even without it) both versions call only POST /v1/messages?beta=true,
//     streaming, with tools; no count_tokens, no side requests.
//   - Closing stdin after a result makes the CLI exit with code 0.
//   - 2.1.330 rejects --sdk-url ws://127.0.0.1 in about 0.5 s, exit code 1,
//     stderr "Error: --sdk-url rejected: host "127.0.0.1" is not an approved
//     Anthropic endpoint. This flag is reserved for Remote Control worker
//     processes connecting to Anthropic's backend."
//   - 2.1.81 over WebSocket: after sous closes the socket with 1001 it
//     reconnects about 1 s later (close codes 1002, 4001 and 4003 are
//     permanent: no reconnect), sending X-Last-Request-Id with the uuid of
//     the last message it sent. It writes nothing while disconnected (only
//     messages with a uuid are even buffered), and its node build does not
//     resend the buffer on reconnect (the replay keys off an upgradeReq the
//     node ws client does not have): what it sends into a dying socket is
//     lost. sous notes such a gap in the error tail when X-Last-Request-Id
//     names a message it never received; a lost can_use_tool leaves the
//     turn waiting until TurnTimeout.
//   - sdkMcpServers: ["sous"] in initialize is all both 2.1.81 and 2.1.332
//     need to connect to an SDK MCP server, over stdio and WebSocket; the
//     --mcp-config '{"mcpServers":{"sous":{"type":"sdk","name":"sous"}}}'
//     the Agent SDKs also pass is not needed (with both, 2.1.81 sends the
//     MCP initialize twice). 2.1.332 runs the MCP handshake (initialize,
//     notifications/initialized, tools/list) right after initialize, 2.1.81
//     after the first user message; both then list the server in
//     system/init's mcp_servers as {"name":"sous","status":"connected"} and
//     the tools as mcp__sous__NAME, and mcp_status reports its tools. A
//     tools/call carries the tool use's id in
//     params._meta["claudecode/toolUseId"]. The result's text content
//     becomes the tool_result's content; isError: true makes it an error
//     result. 2.1.332 sends MCP tools to the model as deferred (ToolSearch),
//     yet a call by name works.
//   - Hooks (2.1.81 and 2.1.332): hook_callback carries callback_id,
//     input (session_id, transcript_path, cwd, permission_mode,
//     hook_event_name and the event's fields: tool_name, tool_input,
//     tool_use_id, tool_response, prompt, stop_hook_active,
//     last_assistant_message, agent_id, ...) and tool_use_id (the tool
//     use's for tool events, a fresh uuid for the others). A PreToolUse
//     allow decides without can_use_tool; its updatedInput is what runs. A
//     deny's reason is the tool_result's content (2.1.332 prefixes
//     "PreToolUse:Bash hook error: "). PostToolUse's additionalContext
//     reaches the next model request. Order in a turn: UserPromptSubmit
//     (before system/init), PreToolUse, PostToolUse, Stop (before the
//     result). With two PreToolUse hooks on one tool use, 2.1.81 drops a
//     deny's reason and an allow's updatedInput when the other answers {}.
//     A hook past its timeout gets control_cancel_request: 2.1.81 goes on,
//     2.1.332 blocks a UserPromptSubmit that timed out. {"continue":
//     false} with a PreToolUse deny stops 2.1.332's turn; 2.1.81 denies
//     the tool and goes on. SubagentStop fires before Stop on 2.1.81;
//     2.1.332 runs Task subagents in the background and ends them after
//     the turn (with a turn of its own).
//   - --json-schema: the model gets a StructuredOutput tool; an invalid
//     payload comes back as an error tool_result ("Output does not match
//     required schema: /name: must be string") and the model tries again;
//     the result carries structured_output. 2.1.332 ends the turn right
//     after a valid payload (its result text is the JSON); 2.1.81 asks the
//     model once more.
//   - --max-budget-usd: the CLI prices usage itself (claude-sonnet-4-6:
//     $3 per million input tokens, $15 per million output tokens) and
//     checks after each model reply: the turn ends with
//     error_max_budget_usd, is_error false on 2.1.81 and true on 2.1.332.
//   - File checkpoints (2.1.81 and 2.1.332): with
//     CLAUDE_CODE_ENABLE_SDK_FILE_CHECKPOINTING=1 in its environment the CLI
//     snapshots what Write and Edit change, keyed by the uuid of the user
//     message sous sent for the turn (no --replay-user-messages needed).
//     rewind_files {user_message_id, dry_run: true} answers {canRewind,
//     filesChanged (absolute paths), insertions, deletions}; without
//     dry_run it answers {canRewind: true} and no list. Without the
//     variable: {canRewind: false, error: "File rewinding is not
//     enabled."}; an unknown id: "No file checkpoint found for this
//     message." A file the turn created is deleted by the rewind.
//   - 2.1.332's initialize answer carries claude_code_version (2.1.81's
//     does not: only its system/init does). get_context_usage exists on
//     2.1.332; 2.1.81 answers "Unsupported control request subtype".
//   - can_use_tool: 2.1.81 and 2.1.332 send decision_reason ("Path is
//     outside allowed working directories"; 2.1.332 adds
//     decision_reason_type "workingDir") for a Read or Write outside the
//     working directories, blocked_path for a Bash command writing a path
//     (touch FILE), and permission_suggestions (setMode acceptEdits,
//     addDirectories, addRules). An allow whose updatedPermissions adds
//     a directory or rule is applied for the rest of the session.
//     2.1.81 adds agent_id (e.g. "aa26134c90fc9febd") to a Task subagent's
//     requests; the main agent's have none.
//   - --include-partial-messages (both) adds stream_event messages
//     (message_start, content_block_delta, ...) before each assistant
//     message.
//   - initialize's agents (name → {description, prompt, tools, model}):
//     both versions take them and list them, with their own agents, in
//     the answer's agents; a malformed definition makes the CLI drop them
//     all with only a debug log (so sous checks description and prompt).
//     The Task tool (Agent on 2.1.332) with subagent_type NAME runs the
//     subagent: its model request's system prompt carries the agent's
//     prompt and only its tools. 2.1.81 runs it inside the tool call;
//     2.1.332 answers the tool call at once ("Async agent launched
//     successfully ...", the agent works in the background) and
//     SubagentStop comes later.
//   - --mcp-config '{"mcpServers": {...}}': both versions start a stdio
//     server with its env, reach a streamable HTTP one (a POST per
//     message answered with a JSON body; 405 for the GET stream is
//     fine) and an HTTP+SSE one (a GET stream whose "endpoint" event
//     names where to POST), and ask can_use_tool for mcp__NAME__TOOL as
//     for any tool. system/init's mcp_servers lists them (and a project
//     .mcp.json's, enabled by enableAllProjectMcpServers in --settings);
//     with --strict-mcp-config the .mcp.json ones are left out.
//   - --add-dir: the model is told of the directory under "Additional
//     working directories" (2.1.81 in the system prompt, 2.1.332 in the
//     first user message); a directory inside the cwd is not listed.
//     --settings JSON's env reaches the Bash tool. --setting-sources ""
//     is accepted; an unknown source exits at once with "Invalid setting
//     source: X. Valid options are: user, project, local". --continue
//     with no earlier conversation in the cwd starts a fresh one; with
//     one, the session keeps that conversation's id and history.
//     --max-turns 1 ends a turn that used a tool with error_max_turns
//     after the tool ran, without a second model request.
//   - --fallback-model: after three 529 overloaded answers in a row the
//     CLI asks the fallback model instead. 2.1.81 does so only when the
//     main model is an Opus one (claude-opus-4-6, ...) or
//     FALLBACK_FOR_ALL_PRIMARY_MODELS is set; 2.1.332 for any model.
//   - 2.1.330's npm package is a native binary; its bin/claude.exe is a stub
//     until the postinstall script copies the platform package's binary
//     over it (npm may skip install scripts). It needs no node.
package agent
