package builtins

import (
	"strings"
	"testing"
)

// TestCLIOptionArgumentsChecked: agent() and the sdk.session keywords of
// sdk_options.go refuse what they cannot use with an error naming the
// argument, before the CLI starts.
func TestCLIOptionArgumentsChecked(t *testing.T) {
	t.Parallel()
	tests := []struct{ src, want string }{
		{`agent("d")`, "agent: missing argument for prompt"},
		{`agent("", "p")`, "agent: description: empty (the main agent picks a subagent by it)"},
		{`agent("d", " ")`, "agent: prompt: empty"},
		{`agent("d", "p", tools="Read")`, "agent: tools: want list of strings, got string"},
		{`agent("d", "p", model=3)`, "agent: model: want string, got int"},
		{`sdk.session(agents=[agent("d", "p")])`, "sdk.session: agents: want dict, got list"},
		{`sdk.session(agents={"r": "be strict"})`, `sdk.session: agents["r"]: want agent(...), got string`},
		{`sdk.session(mcp_servers={"e": "mcpecho"})`, `sdk.session: mcp_servers["e"]: want dict ({"command": ...} or {"type": "http", "url": ...}), got string`},
		{`sdk.session(mcp_servers={"e": {"cmd": "x"}})`, `sdk.session: mcp_servers["e"] key "cmd": want one of type, command, args, env, url, headers`},
		{`sdk.session(mcp_servers={"e": {"command": "x", "args": "-v"}})`, `sdk.session: mcp_servers["e"]["args"]: want list of strings, got string`},
		{`sdk.session(mcp_servers={"e": {"command": "x", "env": {"K": 1}}})`, `sdk.session: mcp_servers["e"]["env"]["K"]: want string, got int`},
		{`sdk.session(mcp_servers={"e": {"args": []}})`, `sdk.session: mcp_servers["e"]: a stdio server needs a command`},
		{`sdk.session(mcp_servers={"w": {"type": "http"}})`, `sdk.session: mcp_servers["w"]: an http server needs a url`},
		{`sdk.session(strict_mcp_config=1)`, "sdk.session: strict_mcp_config: want bool, got int"},
		{`sdk.session(add_dirs="/x")`, "sdk.session: add_dirs: want list of strings, got string"},
		{`sdk.session(settings="")`, "sdk.session: settings: want a settings file's path, got an empty string"},
		{`sdk.session(settings=["x"])`, "sdk.session: settings: want dict (settings) or string (a settings file's path), got list"},
		{`sdk.session(settings={"env": {"K": print}})`, `sdk.session: settings["env"]["K"]: want a JSON value`},
		{`sdk.session(setting_sources="user")`, "sdk.session: setting_sources: want list of strings, got string"},
		{`sdk.session(setting_sources=["user,project"])`, `sdk.session: setting_sources[0]: "user,project": want a source name (user, project or local)`},
		{`sdk.session(continue_conversation=True, resume="x")`, "sdk.session: continue_conversation and resume: give one"},
		{`sdk.session(extra_args=["--x"])`, "sdk.session: extra_args: want dict (flag: value or None) or None, got list"},
		{`sdk.session(extra_args={"max-turns": 1})`, `sdk.session: extra_args["max-turns"]: want string or None (a bare flag), got int`},
		{`sdk.session(extra_args={"--max-turns": "1"})`, `sdk.session: extra_args: "--max-turns": give the flag without its leading dashes ("max-turns" is passed as --max-turns)`},
		{`sdk.session(extra_args={"output-format": "text"})`, `sdk.session: extra_args: "output-format": sous sets --output-format itself`},
		{`sdk.session(max_turns=2, extra_args={"max-turns": "1"})`, `sdk.session: extra_args: "max-turns": sous already passes --max-turns for this session: it is set by max_turns`},
		{`sdk.send("hi", extra_args={"resume": "x"})`, `sdk.send: extra_args: "resume": sous sets --resume itself`},
	}
	for _, tt := range tests {
		t.Run(tt.src, func(t *testing.T) {
			t.Parallel()
			f := newFixture(t)
			f.run(tt.src+"\n").expect(t, 1, "main.star:1:", "Error in "+strings.SplitN(tt.src, "(", 2)[0]+": "+tt.want)
			if sent := f.daemon.sent(); len(sent) > 0 {
				t.Errorf("reached the daemon: %q", sent)
			}
		})
	}
}

// TestAgentDefValue: agent() values show what they hold and cannot be
// dict keys.
func TestAgentDefValue(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	f.run(`
a = agent("Reviews code", "Be strict.", tools=["Read", "Grep"], model="haiku")
b = agent("Helps", "Help.")
print(a, type(a), a.description, a.prompt, a.tools, a.model)
print(b.tools, b.model)
{a: 1}
`).expect(t, 1, `<agent "Reviews code"> AgentDef Reviews code Be strict. ["Read", "Grep"] haiku`, "None None", "unhashable type: AgentDef")
}
