package agent

import (
	"fmt"
	"strings"
	"unicode"
)

// Flag is one command-line flag for the CLI that sous has no option for
// (Options.ExtraFlags), as the Agent SDKs' extra_args: Name without the
// leading dashes ("max-turns" is passed as --max-turns), and Value unless
// Bare.
type Flag struct {
	Name  string
	Value string
	Bare  bool // a flag without a value (--verbose)
}

// protocolFlags are flags the session's protocol rests on, refused in
// ExtraFlags whether or not this session's command line has them: the
// stream-json plumbing, the transport, and which session the CLI runs
// (sous must know it: --session-id, resume, fork and continue have
// options of their own).
var protocolFlags = []string{
	"print", "input-format", "output-format", "verbose", "permission-prompt-tool", "sdk-url",
	"replay-user-messages", "session-id", "resume", "continue", "fork-session",
}

// flagKey is how the CLI's flags compare: case and dashes aside, so that
// the CLI's aliases (--allowedTools, --allowed-tools) are one flag.
func flagKey(name string) string {
	return strings.ToLower(strings.ReplaceAll(name, "-", ""))
}

// checkExtraFlags says why flags cannot be added to base, the command line
// sous builds for the session (the program's arguments after its name): a
// malformed name, a protocol flag, or a flag sous passes itself, which
// would be passed twice (the option that sets it is named instead).
func checkExtraFlags(flags []Flag, base []string) error {
	own := map[string]string{}
	for _, a := range base {
		if name, ok := strings.CutPrefix(a, "--"); ok && name != "" {
			own[flagKey(name)] = a
		}
	}
	seen := map[string]bool{}
	for _, f := range flags {
		switch {
		case f.Name == "":
			return fmt.Errorf("agent: extra_args: a flag's name is empty")
		case strings.HasPrefix(f.Name, "-"):
			return fmt.Errorf("agent: extra_args: %q: give the flag without its leading dashes (%q is passed as --%s)",
				f.Name, strings.TrimLeft(f.Name, "-"), strings.TrimLeft(f.Name, "-"))
		case strings.ContainsFunc(f.Name, func(r rune) bool { return r == '=' || unicode.IsSpace(r) }):
			return fmt.Errorf("agent: extra_args: %q: a flag's name has no '=' or spaces (its value is the dict's value)", f.Name)
		}
		k := flagKey(f.Name)
		for _, p := range protocolFlags {
			if flagKey(p) == k {
				return fmt.Errorf("agent: extra_args: %q: sous sets --%s itself (the session's protocol depends on it)", f.Name, p)
			}
		}
		if a, ok := own[k]; ok {
			return fmt.Errorf("agent: extra_args: %q: sous already passes %s for this session%s", f.Name, a, optionOf(k))
		}
		if seen[k] {
			return fmt.Errorf("agent: extra_args: %q: given twice", f.Name)
		}
		seen[k] = true
	}
	return nil
}

// flagOptions name the option (as the Agent SDKs and recipes spell it)
// behind each flag sous passes, for errors.
var flagOptions = map[string]string{
	"model": "model", "permissionmode": "permission_mode", "allowedtools": "allowed_tools (or tools)",
	"disallowedtools": "disallowed_tools", "maxturns": "max_turns", "jsonschema": "output_schema",
	"maxbudgetusd": "max_budget_usd", "mcpconfig": "mcp_servers", "strictmcpconfig": "strict_mcp_config",
	"adddir": "add_dirs", "settings": "settings", "settingsources": "setting_sources", "fallbackmodel": "fallback_model",
	"includepartialmessages": "on_message",
}

func optionOf(key string) string {
	if o, ok := flagOptions[key]; ok {
		return ": it is set by " + o
	}
	return ""
}

// flagArgs is flags as command-line arguments.
func flagArgs(flags []Flag) []string {
	var args []string
	for _, f := range flags {
		args = append(args, "--"+f.Name)
		if !f.Bare {
			args = append(args, f.Value)
		}
	}
	return args
}
