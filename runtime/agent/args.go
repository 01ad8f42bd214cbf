package agent

import (
	"strconv"
	"strings"
)

// buildArgs is the CLI's command line after the program, for options that
// went through prepare. Flag names were checked against the --help of
// 2.1.81 and 2.1.330 (--max-turns and --permission-prompt-tool are accepted
// but hidden from --help). The WebSocket transport adds --sdk-url.
func buildArgs(opt Options) []string {
	args := append([]string(nil), opt.CLI[1:]...)
	args = append(args, "--print", "--input-format", "stream-json", "--output-format", "stream-json", "--verbose")
	if opt.Transport == TransportStdio {
		args = append(args, "--permission-prompt-tool", "stdio")
	}
	if opt.Model != "" {
		args = append(args, "--model", opt.Model)
	}
	if opt.PermissionMode != "" {
		args = append(args, "--permission-mode", opt.PermissionMode)
	}
	// One argument per rule: the flags are variadic and each value is split
	// on commas and spaces outside parentheses, so "Bash(go test:*)" stays
	// whole. The session's own tools are allowed unless disallowed.
	allowed := append(append([]string(nil), opt.AllowedTools...), toolsAllowed(opt.Tools, opt.DisallowedTools)...)
	if len(allowed) > 0 {
		args = append(args, "--allowedTools")
		args = append(args, allowed...)
	}
	if len(opt.DisallowedTools) > 0 {
		args = append(args, "--disallowedTools")
		args = append(args, opt.DisallowedTools...)
	}
	if opt.MaxTurns > 0 {
		args = append(args, "--max-turns", strconv.Itoa(opt.MaxTurns))
	}
	if opt.Resume != "" {
		args = append(args, "--resume", opt.Resume)
	}
	if opt.Continue {
		args = append(args, "--continue")
	}
	if opt.Fork && (opt.Resume != "" || opt.Continue) {
		args = append(args, "--fork-session")
	}
	if opt.schemaJSON != "" {
		args = append(args, "--json-schema", opt.schemaJSON)
	}
	if opt.PartialMessages {
		args = append(args, "--include-partial-messages")
	}
	if opt.MaxBudgetUSD > 0 {
		args = append(args, "--max-budget-usd", strconv.FormatFloat(opt.MaxBudgetUSD, 'f', -1, 64))
	}
	args = append(args, cliOptionArgs(opt)...)
	// A fresh session is started under the id sous chose (prepare); a
	// resumed or continued one keeps its own and a fork gets a new one
	// from the CLI.
	if opt.Resume == "" && !opt.Continue {
		args = append(args, "--session-id", opt.SessionID)
	}
	args = append(args, flagArgs(opt.ExtraFlags)...)
	return append(args, opt.ExtraArgs...)
}

// cliOptionArgs are the flags of the options that configure the CLI itself:
// MCP servers, directories, settings, the fallback model. Variadic flags
// (--mcp-config, --add-dir) take their values up to the next flag.
func cliOptionArgs(opt Options) []string {
	var args []string
	if opt.mcpJSON != "" {
		args = append(args, "--mcp-config", opt.mcpJSON)
	}
	if opt.StrictMCPConfig {
		args = append(args, "--strict-mcp-config")
	}
	if len(opt.AddDirs) > 0 {
		args = append(args, "--add-dir")
		args = append(args, opt.AddDirs...)
	}
	if opt.Settings != "" {
		args = append(args, "--settings", opt.Settings)
	}
	if opt.SettingSources != nil {
		args = append(args, "--setting-sources", strings.Join(opt.SettingSources, ","))
	}
	if opt.FallbackModel != "" {
		args = append(args, "--fallback-model", opt.FallbackModel)
	}
	return args
}

// initializeRequest is the payload of the initialize control request, the
// first thing sent to the CLI: what is too big or too structured for the
// command line. hooks is the hooks field (registerHooks; nil: none).
func initializeRequest(opt Options, hooks map[string]any) map[string]any {
	init := map[string]any{}
	if opt.SystemPrompt != "" {
		init["systemPrompt"] = opt.SystemPrompt
	}
	if opt.AppendSystemPrompt != "" {
		init["appendSystemPrompt"] = opt.AppendSystemPrompt
	}
	// The session's tools: naming the server here is all both 2.1.81 and
	// 2.1.332 need to connect to it (over stdio and WebSocket). The Agent
	// SDKs' --mcp-config {"type": "sdk"} entry is not needed, and with it
	// 2.1.81 connects to the server twice.
	if len(opt.Tools) > 0 {
		init["sdkMcpServers"] = []string{ServerName}
	}
	if hooks != nil {
		init["hooks"] = hooks
	}
	// Subagents travel here rather than as --agents: their prompts can be
	// longer than a command line may be.
	if len(opt.Agents) > 0 {
		init["agents"] = agentsField(opt.Agents)
	}
	return init
}
