package agent

import (
	"encoding/json"
	"fmt"
	"maps"
	"net/url"
	"slices"
	"strings"
)

// MCP server types of Options.MCPServers.
const (
	MCPStdio = "stdio"
	MCPHTTP  = "http"
	MCPSSE   = "sse"
)

// MCPServer is an MCP server the CLI connects to itself (--mcp-config):
// a program it starts and speaks to over stdio, or a server at a URL
// (streamable HTTP or server-sent events). Unlike Options.Tools, its
// tools run outside sous; the model calls them as mcp__NAME__TOOL.
type MCPServer struct {
	// Type is MCPStdio (the default), MCPHTTP or MCPSSE.
	Type string
	// Command, Args and Env start a stdio server (Env is merged over the
	// CLI's environment by the CLI).
	Command string
	Args    []string
	Env     map[string]string
	// URL and Headers reach an http or sse server.
	URL     string
	Headers map[string]string
}

// checkMCPServers says why servers cannot be configured, naming the one at
// fault; the session's own tools' server name is taken when it has tools.
func checkMCPServers(servers map[string]MCPServer, hasTools bool) (map[string]MCPServer, error) {
	out := make(map[string]MCPServer, len(servers))
	for _, name := range slices.Sorted(maps.Keys(servers)) {
		s := servers[name]
		if strings.TrimSpace(name) == "" {
			return nil, fmt.Errorf("agent: mcp_servers: a server's name is empty")
		}
		if name == ServerName && hasTools {
			return nil, fmt.Errorf("agent: mcp_servers[%q]: the name is taken by the session's own tools (served as %q); pick another", name, ServerName)
		}
		if s.Type == "" {
			s.Type = MCPStdio
		}
		where := fmt.Sprintf("agent: mcp_servers[%q]", name)
		switch s.Type {
		case MCPStdio:
			switch {
			case s.Command == "":
				return nil, fmt.Errorf("%s: a stdio server needs a command", where)
			case s.URL != "" || len(s.Headers) > 0:
				return nil, fmt.Errorf("%s: a stdio server has a command, not a url or headers (give type \"http\" or \"sse\" for a server at a url)", where)
			}
		case MCPHTTP, MCPSSE:
			switch {
			case s.URL == "":
				return nil, fmt.Errorf("%s: an %s server needs a url", where, s.Type)
			case s.Command != "" || len(s.Args) > 0 || len(s.Env) > 0:
				return nil, fmt.Errorf("%s: an %s server has a url, not a command, args or env", where, s.Type)
			}
			u, err := url.Parse(s.URL)
			if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
				return nil, fmt.Errorf("%s: url %q: want an http:// or https:// URL", where, s.URL)
			}
		default:
			return nil, fmt.Errorf("%s: type %q: want %q, %q or %q", where, s.Type, MCPStdio, MCPHTTP, MCPSSE)
		}
		out[name] = s
	}
	return out, nil
}

// mcpConfigJSON is the --mcp-config argument for servers that went through
// checkMCPServers: the CLI's {"mcpServers": {name: config}} format.
func mcpConfigJSON(servers map[string]MCPServer) (string, error) {
	cfg := make(map[string]any, len(servers))
	for name, s := range servers {
		entry := map[string]any{"type": s.Type}
		if s.Type == MCPStdio {
			entry["command"] = s.Command
			entry["args"] = append([]string{}, s.Args...) // [] rather than null
			if len(s.Env) > 0 {
				entry["env"] = s.Env
			}
		} else {
			entry["url"] = s.URL
			if len(s.Headers) > 0 {
				entry["headers"] = s.Headers
			}
		}
		cfg[name] = entry
	}
	b, err := json.Marshal(map[string]any{"mcpServers": cfg})
	if err != nil {
		return "", fmt.Errorf("agent: mcp_servers: %w", err)
	}
	return string(b), nil
}
