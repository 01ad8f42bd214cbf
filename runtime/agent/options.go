package agent

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"strings"
	"time"

	"github.com/google/uuid"
)

// Transports.
const (
	TransportStdio     = "stdio"
	TransportWebSocket = "websocket"
)

// Options describe a session. The zero value (plus a Permission callback)
// starts "claude" on the daemon in the daemon's working directory.
type Options struct {
	// Cwd is the CLI's working directory on the daemon's host (default: the
	// daemon's).
	Cwd string
	// Model, PermissionMode, AllowedTools, DisallowedTools and MaxTurns map
	// to the CLI's --model, --permission-mode, --allowedTools,
	// --disallowedTools and --max-turns.
	Model           string
	PermissionMode  string
	AllowedTools    []string
	DisallowedTools []string
	MaxTurns        int
	// SystemPrompt replaces the CLI's system prompt; AppendSystemPrompt is
	// added to its end. Both travel in the initialize control request, so
	// their size is not bounded by the command line.
	SystemPrompt       string
	AppendSystemPrompt string
	// CLI is the program and leading arguments: {"claude"} (the default),
	// {"/path/to/claude"} or {"node", "/path/cli.js"}.
	CLI []string
	// Env is merged over the daemon host's environment.
	Env map[string]string
	// Resume continues a previous session by id; with Fork the CLI starts a
	// new session id from a copy of it.
	Resume string
	Fork   bool
	// SessionID is the id of a fresh session, a UUID (default: a random
	// one). Choosing it lets a caller label what it observes before Start
	// returns.
	SessionID string
	// TurnTimeout bounds each turn (0: none). When it passes the turn is
	// interrupted and Send fails with ErrTurnTimeout.
	TurnTimeout time.Duration
	// Transport is TransportStdio (default) or TransportWebSocket.
	Transport string
	// LocalHost says the daemon runs on this machine, so a CLI it starts can
	// reach a WebSocket endpoint on this machine's loopback. An embedded
	// client is always local. The WebSocket transport refuses anything else.
	LocalHost bool
	// Permission answers the CLI's tool permission requests. Several may run
	// at once (one goroutine each). Its ctx is cancelled when the CLI
	// withdraws the request or the session ends. Returning an error denies
	// the request, interrupts the turn, and makes the turn's Send fail with
	// that error. Nil denies every request.
	Permission func(ctx context.Context, req Request) (Decision, error)
	// Tools are served to the CLI by an in-process MCP server named
	// ServerName; the model calls them as ToolName(name). They are allowed
	// without asking unless DisallowedTools names them (mcp__sous__NAME,
	// or the server: mcp__sous).
	Tools []Tool
	// CallTool runs a call of one of Tools, each on a goroutine of its own
	// (several may run at once). Its ctx is cancelled when the CLI
	// withdraws the request or the session ends. The text is the result
	// the model sees (cut to MaxToolResult); an error becomes an isError
	// result carrying its message. Either way the turn goes on. Required
	// with Tools.
	CallTool func(ctx context.Context, call ToolCall) (string, error)
	// Observer sees every message in and out and every permission decision,
	// one call at a time, in order. It must return quickly.
	Observer func(Event)
	// ProcessID names the CLI's process on the daemon (default: "claude-"
	// and a random suffix).
	ProcessID string
	// StartTimeout bounds the wait for the CLI to come up and answer
	// initialize (default 60 s).
	StartTimeout time.Duration
	// ExtraArgs are appended to the CLI's command line as they are,
	// unchecked (ExtraFlags are checked).
	ExtraArgs []string
	// OutputSchema is a JSON Schema (--json-schema): every turn must end
	// with a value valid against it, which the CLI checks and reports as
	// Turn.StructuredOutput. Nil: free text.
	OutputSchema map[string]any
	// MaxBudgetUSD stops a turn once the session has spent that many
	// dollars (--max-budget-usd; the CLI prices the model's usage). The
	// turn then ends with subtype error_max_budget_usd. 0: no limit.
	MaxBudgetUSD float64
	// Hooks are callbacks for the CLI's hook events, by event name (see
	// HookEvents), registered in initialize (hooks.go).
	Hooks map[string][]Hook
	// Checkpoints turns on the CLI's file checkpointing (the environment
	// variable CLAUDE_CODE_ENABLE_SDK_FILE_CHECKPOINTING, as the Agent SDKs
	// set it), so RewindFiles can restore what Write, Edit and NotebookEdit
	// changed since a turn's user message (checkpoints.go).
	Checkpoints bool
	// PartialMessages makes the CLI stream the model's reply as it comes
	// (--include-partial-messages): stream_event messages reach the
	// Observer and Turn.Messages.
	PartialMessages bool

	// Agents are subagents by name, sent in initialize (subagents.go).
	Agents map[string]AgentDef
	// MCPServers are MCP servers the CLI starts or reaches itself, by name
	// (--mcp-config; mcpconfig.go). With StrictMCPConfig
	// (--strict-mcp-config) the CLI uses no MCP server of the user's or
	// project's configuration, only these (and the session's Tools).
	MCPServers      map[string]MCPServer
	StrictMCPConfig bool
	// AddDirs are directories beyond Cwd that the CLI's tools may use
	// (--add-dir).
	AddDirs []string
	// Settings is a settings file's path or a JSON object's text
	// (--settings), over the CLI's setting files.
	Settings string
	// SettingSources are the setting files the CLI loads, of "user",
	// "project" and "local" (--setting-sources). Nil: the CLI's default;
	// empty but not nil: none.
	SettingSources []string
	// FallbackModel is the model the CLI switches to when Model is
	// overloaded (--fallback-model).
	FallbackModel string
	// Continue continues the most recent conversation in Cwd (--continue);
	// its session id is learned from the CLI, as a fork's is.
	Continue bool
	// ExtraFlags are flags sous has no option for, after the ones it
	// builds (extraflags.go); a flag sous passes itself is refused.
	ExtraFlags []Flag

	// schemaJSON is OutputSchema encoded by prepare, mcpJSON MCPServers.
	schemaJSON string
	mcpJSON    string
}

// defaultStartTimeout is StartTimeout's default.
const defaultStartTimeout = 60 * time.Second

// prepare checks opt and fills in its defaults. local says the daemon runs
// on this machine (an embedded client). A fresh session gets its id here,
// so ID is known before the first turn.
func (opt Options) prepare(local bool) (Options, error) {
	if opt.Transport == "" {
		opt.Transport = TransportStdio
	}
	if opt.Transport != TransportStdio && opt.Transport != TransportWebSocket {
		return opt, fmt.Errorf("agent: transport %q: want %q or %q", opt.Transport, TransportStdio, TransportWebSocket)
	}
	if opt.Transport == TransportWebSocket && !opt.LocalHost && !local {
		return opt, errors.New("agent: transport \"websocket\" needs the CLI on this machine (the daemon is remote, so the CLI could not reach sous's loopback endpoint); use transport=\"stdio\"")
	}
	if len(opt.CLI) == 0 {
		opt.CLI = []string{"claude"}
	}
	if opt.CLI[0] == "" {
		return opt, errors.New("agent: cli: empty program name")
	}
	if opt.Continue && opt.Resume != "" {
		return opt, errors.New("agent: continue_conversation and resume: give one (continue_conversation picks the most recent conversation in the working directory, resume names one)")
	}
	if opt.Fork && opt.Resume == "" && !opt.Continue {
		return opt, errors.New("agent: fork needs resume (the session id to fork) or continue_conversation")
	}
	if opt.SessionID != "" {
		if opt.Resume != "" || opt.Continue {
			return opt, errors.New("agent: a session id is for a fresh session; a resumed or continued one keeps its id and a fork gets a new one from the CLI")
		}
		if _, err := uuid.Parse(opt.SessionID); err != nil {
			return opt, fmt.Errorf("agent: session id %q: the CLI wants a UUID: %w", opt.SessionID, err)
		}
	}
	if opt.MaxTurns < 0 {
		return opt, fmt.Errorf("agent: max turns %d: want a positive number", opt.MaxTurns)
	}
	tools, err := checkTools(opt.Tools, opt.CallTool != nil)
	if err != nil {
		return opt, err
	}
	opt.Tools = tools
	if opt.MaxBudgetUSD < 0 || math.IsNaN(opt.MaxBudgetUSD) || math.IsInf(opt.MaxBudgetUSD, 0) {
		return opt, fmt.Errorf("agent: max budget %v: want a positive number of dollars", opt.MaxBudgetUSD)
	}
	if opt.OutputSchema != nil {
		b, err := json.Marshal(opt.OutputSchema)
		if err != nil {
			return opt, fmt.Errorf("agent: output schema: %w", err)
		}
		opt.schemaJSON = string(b)
	}
	if err := checkHooks(opt.Hooks); err != nil {
		return opt, err
	}
	if opt, err = opt.prepareCLIOptions(); err != nil {
		return opt, err
	}
	if opt.Checkpoints {
		opt.Env = withEnv(opt.Env, checkpointEnv, "1")
	}
	if opt.Resume == "" && !opt.Continue && opt.SessionID == "" {
		opt.SessionID = uuid.NewString()
	}
	if opt.ProcessID == "" {
		opt.ProcessID = "claude-" + uuid.NewString()
	}
	if opt.StartTimeout <= 0 {
		opt.StartTimeout = defaultStartTimeout
	}
	// Last: the command line sous builds must be complete to tell which
	// extra flags it already has.
	base := opt
	base.ExtraFlags = nil
	if err := checkExtraFlags(opt.ExtraFlags, buildArgs(base)); err != nil {
		return opt, err
	}
	return opt, nil
}

// CheckCLIOptions makes Start's checks of the options that configure the
// CLI itself (Agents, MCPServers, AddDirs, Settings, SettingSources,
// FallbackModel, ExtraFlags) without starting anything, for a caller that
// wants their errors before it reaches a daemon. Start checks them again.
func (opt Options) CheckCLIOptions() error {
	p, err := opt.prepareCLIOptions()
	if err != nil {
		return err
	}
	// Which flags the command line has is what matters here, not their
	// values.
	if p.OutputSchema != nil {
		p.schemaJSON = "{}"
	}
	if len(p.CLI) == 0 {
		p.CLI = []string{"claude"}
	}
	p.ExtraFlags = nil
	return checkExtraFlags(opt.ExtraFlags, buildArgs(p))
}

// prepareCLIOptions checks the options that map to the CLI's own flags
// and configuration: subagents, MCP servers, directories and settings.
func (opt Options) prepareCLIOptions() (Options, error) {
	if err := checkAgents(opt.Agents); err != nil {
		return opt, err
	}
	if len(opt.MCPServers) > 0 {
		servers, err := checkMCPServers(opt.MCPServers, len(opt.Tools) > 0)
		if err != nil {
			return opt, err
		}
		opt.MCPServers = servers
		if opt.mcpJSON, err = mcpConfigJSON(servers); err != nil {
			return opt, err
		}
	}
	for i, d := range opt.AddDirs {
		switch {
		case d == "":
			return opt, fmt.Errorf("agent: add_dirs[%d]: empty path", i)
		case strings.HasPrefix(d, "-"):
			return opt, fmt.Errorf("agent: add_dirs[%d]: %q would read as a flag; write ./%s", i, d, d)
		}
	}
	if strings.HasPrefix(opt.Settings, "-") {
		return opt, fmt.Errorf("agent: settings: %q would read as a flag; write ./%s", opt.Settings, opt.Settings)
	}
	for i, src := range opt.SettingSources {
		if src == "" || strings.ContainsAny(src, ", ") {
			return opt, fmt.Errorf("agent: setting_sources[%d]: %q: want a source name (user, project or local)", i, src)
		}
	}
	if strings.HasPrefix(opt.FallbackModel, "-") {
		return opt, fmt.Errorf("agent: fallback_model %q: not a model name", opt.FallbackModel)
	}
	return opt, nil
}

// knownID is the session id before the CLI reports one: the id a fresh
// session was given, or the resumed one's; "" for a fork or a continued
// session, which learn their id from the CLI's system/init.
func (opt Options) knownID() string {
	switch {
	case opt.Continue:
		return ""
	case opt.Resume == "":
		return opt.SessionID
	case !opt.Fork:
		return opt.Resume
	}
	return ""
}
