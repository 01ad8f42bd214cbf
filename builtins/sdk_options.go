package builtins

import (
	"encoding/json"
	"fmt"
	"slices"
	"strings"

	"go.starlark.net/starlark"

	"github.com/seed5ad92d46/sous/runtime"
	"github.com/seed5ad92d46/sous/runtime/agent"
)

// The sdk.session keywords that configure the CLI itself, as the Agent
// SDKs' options of the same names: subagents (agent() and agents=), MCP
// servers, directories, settings, continuing the last conversation and
// extra flags. runtime/agent checks them and builds the command line and
// initialize; here they are only converted.

// cliOptionsSig are these keywords in sdk.session's signature but the
// last, extra_args, which follows checkpoints and on_message
// (sdk_control.go) as in RECIPES.md's order: bindings, then lastBindings.
const cliOptionsSig = `agents=None, mcp_servers=None, strict_mcp_config=False, add_dirs=[], settings=None, ` +
	`setting_sources=None, fallback_model=None, continue_conversation=False`

func agentDefEntries() []runtime.Entry {
	return []runtime.Entry{
		{Name: "agent", Journal: runtime.JournalPure, Sig: "agent(description, prompt, *, tools=None, model=None) -> AgentDef",
			Doc: "A subagent for sdk.session(agents={name: agent(...)}). The main agent starts it with its Task tool " +
				"(called Agent by later CLIs), subagent_type set to the name; description tells it when to. prompt is the " +
				"subagent's system prompt; tools (a list of tool names: \"Read\", \"Bash\", \"mcp__sous__NAME\") limits " +
				"what it may use (None: the main agent's tools); model is \"sonnet\", \"opus\", \"haiku\", \"inherit\" or a " +
				"model id (None: the CLI's default for subagents). Its permission requests and hooks reach the session's " +
				"policy and hooks (SubagentStop fires when it ends).",
			Fn: agentBuiltin},
		{Name: "AgentDef", Sig: "AgentDef", Doc: "A subagent from agent(), for the agents of sdk.session."},
		{Name: "AgentDef.description", Sig: "AgentDef.description -> string", Doc: "When the main agent should use it.",
			Attr: attr(func(a *AgentDef) starlark.Value { return starlark.String(a.def.Description) })},
		{Name: "AgentDef.prompt", Sig: "AgentDef.prompt -> string", Doc: "The subagent's system prompt.",
			Attr: attr(func(a *AgentDef) starlark.Value { return starlark.String(a.def.Prompt) })},
		{Name: "AgentDef.tools", Sig: "AgentDef.tools -> list of strings or None", Doc: "The tools it may use (None: the main agent's).",
			Attr: attr(func(a *AgentDef) starlark.Value {
				if a.def.Tools == nil {
					return starlark.None
				}
				return frozen(toStarlark(a.def.Tools))
			})},
		{Name: "AgentDef.model", Sig: "AgentDef.model -> string or None", Doc: "Its model (None: the CLI's default).",
			Attr: attr(func(a *AgentDef) starlark.Value {
				if a.def.Model == "" {
					return starlark.None
				}
				return starlark.String(a.def.Model)
			})},
	}
}

// cliOptionsDoc is sdk.session's documentation of these keywords.
const cliOptionsDoc = "agents (a dict name: agent(...)) defines subagents, sent in initialize (so a long prompt is not bound by " +
	"the command line's size). mcp_servers (a dict name: config) are MCP servers the CLI runs or reaches itself " +
	"(--mcp-config): {\"command\": ..., \"args\": [...], \"env\": {...}} for a program over stdio, {\"type\": \"http\" or " +
	"\"sse\", \"url\": ..., \"headers\": {...}} for a server at a URL; the model calls their tools as mcp__NAME__TOOL, " +
	"asking for permission as for any tool. strict_mcp_config=True (--strict-mcp-config) ignores every other MCP " +
	"configuration (the user's, the project's). add_dirs (--add-dir) are directories beyond cwd the CLI's tools may " +
	"use. settings (--settings) is a dict (sent as JSON) or a settings file's path; setting_sources (--setting-sources) " +
	"lists the setting files the CLI loads, of \"user\", \"project\" and \"local\" (None: the CLI's default; []: none). " +
	"fallback_model (--fallback-model) is used when the model is overloaded. continue_conversation=True (--continue) " +
	"continues the most recent conversation in cwd (a fresh one when there is none); its id is known once its first " +
	"turn started. extra_args is a dict flag: value or None for flags sous has no keyword for, the flag without its " +
	"dashes: {\"max-turns\": \"1\"} is passed as --max-turns 1, None as a bare flag; a flag sous passes itself (the " +
	"stream-json protocol's, --session-id, --resume, --continue, and those of the keywords given) is refused. " +
	"Relative paths in add_dirs and settings are taken from the recipe's working directory, as cwd's."

// cliOptions are the keywords of this file.
type cliOptions struct {
	agents         map[string]*AgentDef
	mcpServers     map[string]agent.MCPServer
	strict         bool
	addDirs        []string
	settings       string // JSON text (from a dict) or a path
	settingsPath   bool   // settings is a path, resolved as the recipe's
	settingSources *[]string
	fallbackModel  string
	continueConv   bool
	extra          []agent.Flag
}

func (o *cliOptions) bindings() []binding {
	return []binding{
		opt("agents", agentMap(&o.agents)),
		opt("mcp_servers", mcpServers(&o.mcpServers)),
		opt("strict_mcp_config", boolean(&o.strict)),
		opt("add_dirs", strList(&o.addDirs)),
		opt("settings", settingsArg(&o.settings, &o.settingsPath)),
		opt("setting_sources", optStrList(&o.settingSources)),
		opt("fallback_model", optStr(&o.fallbackModel)),
		opt("continue_conversation", boolean(&o.continueConv)),
	}
}

// lastBindings are the keywords after checkpoints and on_message.
func (o *cliOptions) lastBindings() []binding {
	return []binding{opt("extra_args", extraArgs(&o.extra))}
}

// set puts the keywords into opt as given.
func (o *cliOptions) set(opt *agent.Options) {
	opt.Agents = nil
	if len(o.agents) > 0 {
		opt.Agents = make(map[string]agent.AgentDef, len(o.agents))
		for name, a := range o.agents {
			opt.Agents[name] = a.def
		}
	}
	opt.MCPServers, opt.StrictMCPConfig = o.mcpServers, o.strict
	opt.AddDirs, opt.Settings, opt.SettingSources = o.addDirs, o.settings, nil
	if o.settingSources != nil {
		opt.SettingSources = *o.settingSources
	}
	opt.FallbackModel, opt.Continue, opt.ExtraFlags = o.fallbackModel, o.continueConv, o.extra
}

// check makes the engine's checks of these keywords, with the session's
// other options, before anything starts.
func (o *cliOptions) check(c *runtime.Call, base agent.Options) error {
	o.set(&base)
	if err := base.CheckCLIOptions(); err != nil {
		return c.Errorf("%s", agentMessage(err))
	}
	return nil
}

// apply puts the keywords into opt with their paths resolved as the
// recipe's (hostPath) on a local host, as cwd is.
func (o *cliOptions) apply(c *runtime.Call, opt *agent.Options) error {
	o.set(opt)
	opt.AddDirs = nil
	for _, d := range o.addDirs {
		p, err := hostPath(c, d)
		if err != nil {
			return err
		}
		opt.AddDirs = append(opt.AddDirs, p)
	}
	if o.settingsPath {
		p, err := hostPath(c, o.settings)
		if err != nil {
			return err
		}
		opt.Settings = p
	}
	return nil
}

// AgentDef is what agent() returns.
type AgentDef struct {
	env *runtime.Env
	def agent.AgentDef
}

var _ starlark.HasAttrs = (*AgentDef)(nil)

func (a *AgentDef) String() string        { return fmt.Sprintf("<agent %q>", a.def.Description) }
func (a *AgentDef) Type() string          { return "AgentDef" }
func (a *AgentDef) Freeze()               {} // immutable
func (a *AgentDef) Truth() starlark.Bool  { return starlark.True }
func (a *AgentDef) Hash() (uint32, error) { return 0, fmt.Errorf("unhashable type: AgentDef") }
func (a *AgentDef) Attr(name string) (starlark.Value, error) {
	return a.env.Table.Attr(a.env, "AgentDef", a, nil, name)
}
func (a *AgentDef) AttrNames() []string { return a.env.Table.AttrNames("AgentDef") }

func agentBuiltin(c *runtime.Call) (starlark.Value, error) {
	a := &AgentDef{env: c.Env}
	var tools *[]string
	if err := bind(c, 2, req("description", str(&a.def.Description)), req("prompt", str(&a.def.Prompt)),
		opt("tools", optStrList(&tools)), opt("model", optStr(&a.def.Model))); err != nil {
		return nil, err
	}
	switch {
	case strings.TrimSpace(a.def.Description) == "":
		return nil, c.Errorf("description: empty (the main agent picks a subagent by it)")
	case strings.TrimSpace(a.def.Prompt) == "":
		return nil, c.Errorf("prompt: empty")
	}
	if tools != nil {
		a.def.Tools = *tools
	}
	return a, nil
}

// agentMap binds agents: a dict name → agent(...), or None.
func agentMap(dst *map[string]*AgentDef) param {
	return stringKeyed(dst, "agent(...)", func(v starlark.Value) (*AgentDef, bool) {
		a, ok := v.(*AgentDef)
		return a, ok
	})
}

// optStrList binds a list of strings or None (which leaves *dst nil): an
// empty list is set, unlike None.
func optStrList(dst **[]string) param {
	return paramFunc(func(v starlark.Value) error {
		if v == starlark.None {
			return nil
		}
		var l []string
		if err := strList(&l).set(v); err != nil {
			return err
		}
		if l == nil {
			l = []string{}
		}
		*dst = &l
		return nil
	})
}

// settingsArg binds settings: a dict, sent as its JSON text, or a path.
func settingsArg(dst *string, isPath *bool) param {
	return paramFunc(func(v starlark.Value) error {
		switch x := v.(type) {
		case starlark.NoneType:
			return nil
		case starlark.String:
			if x == "" {
				return fmt.Errorf("want a settings file's path, got an empty string")
			}
			*dst, *isPath = string(x), true
			return nil
		case *starlark.Dict:
			g, err := fromStarlark(x)
			if err != nil {
				s := err.Error()
				if i := strings.Index(s, ": want "); i >= 0 {
					return &argError{path: s[:i], msg: s[i+2:]}
				}
				return err
			}
			b, err := json.Marshal(g)
			if err != nil {
				return err
			}
			*dst, *isPath = string(b), false
			return nil
		}
		return want("dict (settings) or string (a settings file's path)", v)
	})
}

// mcpKeys are the keys of an mcp_servers entry.
var mcpKeys = []string{"type", "command", "args", "env", "url", "headers"}

// mcpServers binds mcp_servers: a dict name → config dict, or None. What
// the config must hold (a command, or a url) is the engine's to check.
func mcpServers(dst *map[string]agent.MCPServer) param {
	return paramFunc(func(v starlark.Value) error {
		if v == starlark.None {
			return nil
		}
		d, ok := v.(*starlark.Dict)
		if !ok {
			return want("dict (server name: config) or None", v)
		}
		out := make(map[string]agent.MCPServer, d.Len())
		for _, item := range d.Items() {
			name, ok := starlark.AsString(item[0])
			if !ok {
				return &argError{path: " key " + item[0].String(), msg: want("string (a server name)", item[0]).Error()}
			}
			s, err := mcpServer(item[1])
			if err != nil {
				if ae, ok := err.(*argError); ok {
					return &argError{path: fmt.Sprintf("[%q]%s", name, ae.path), msg: ae.msg}
				}
				return &argError{path: fmt.Sprintf("[%q]", name), msg: err.Error()}
			}
			out[name] = s
		}
		*dst = out
		return nil
	})
}

func mcpServer(v starlark.Value) (agent.MCPServer, error) {
	var s agent.MCPServer
	d, ok := v.(*starlark.Dict)
	if !ok {
		return s, want(`dict ({"command": ...} or {"type": "http", "url": ...})`, v)
	}
	for _, item := range d.Items() {
		k, ok := starlark.AsString(item[0])
		if !ok || !slices.Contains(mcpKeys, k) {
			return s, &argError{path: " key " + item[0].String(), msg: "want one of " + strings.Join(mcpKeys, ", ")}
		}
		var err error
		switch k {
		case "type":
			err = str(&s.Type).set(item[1])
		case "command":
			err = str(&s.Command).set(item[1])
		case "args":
			err = strList(&s.Args).set(item[1])
		case "env":
			err = strDict(&s.Env).set(item[1])
		case "url":
			err = str(&s.URL).set(item[1])
		case "headers":
			err = strDict(&s.Headers).set(item[1])
		}
		if err != nil {
			if ae, ok := err.(*argError); ok {
				return s, &argError{path: fmt.Sprintf("[%q]%s", k, ae.path), msg: ae.msg}
			}
			return s, &argError{path: fmt.Sprintf("[%q]", k), msg: err.Error()}
		}
	}
	return s, nil
}

// extraArgs binds extra_args: a dict flag → string or None (a bare flag),
// in the dict's order, or None. Which flags are allowed is the engine's
// to check.
func extraArgs(dst *[]agent.Flag) param {
	return paramFunc(func(v starlark.Value) error {
		if v == starlark.None {
			return nil
		}
		d, ok := v.(*starlark.Dict)
		if !ok {
			return want("dict (flag: value or None) or None", v)
		}
		var out []agent.Flag
		for _, item := range d.Items() {
			name, ok := starlark.AsString(item[0])
			if !ok {
				return &argError{path: " key " + item[0].String(), msg: want("string (a flag without its dashes)", item[0]).Error()}
			}
			f := agent.Flag{Name: name}
			switch x := item[1].(type) {
			case starlark.NoneType:
				f.Bare = true
			case starlark.String:
				f.Value = string(x)
			default:
				return &argError{path: fmt.Sprintf("[%q]", name), msg: want("string or None (a bare flag)", item[1]).Error()}
			}
			out = append(out, f)
		}
		*dst = out
		return nil
	})
}
