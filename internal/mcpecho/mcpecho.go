// Package mcpecho is a small MCP server for tests: one tool, "echo", that
// answers "echo: TEXT" (prefixed with "[TAG] " when MCPECHO_TAG is set in
// its environment, so a test can tell an env reached it). It speaks
// JSON-RPC 2.0 over stdio (newline-delimited messages, as Claude Code's
// stdio MCP client does: the cmd/mcpecho program), over streamable HTTP
// (Handler: a POST of one message answered with one JSON body) and over
// the older HTTP+SSE transport (SSEHandler): the three ways an MCP server
// of --mcp-config is reached.
package mcpecho

import (
	"bufio"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"testing"
)

// ToolName is the server's one tool.
const ToolName = "echo"

// message is a JSON-RPC request, notification or response.
type message struct {
	ID     json.RawMessage `json:"id,omitempty"`
	Method string          `json:"method"`
	Params json.RawMessage `json:"params"`
}

// answer is the response to one message, or nil for a notification (or
// a response to a request this server never sends).
func answer(raw []byte, tag string) map[string]any {
	var m message
	if err := json.Unmarshal(raw, &m); err != nil {
		return rpcError(nil, -32700, "mcpecho: not JSON: "+err.Error())
	}
	if len(m.ID) == 0 || m.Method == "" {
		return nil
	}
	switch m.Method {
	case "initialize":
		var p struct {
			ProtocolVersion string `json:"protocolVersion"`
		}
		json.Unmarshal(m.Params, &p)
		if p.ProtocolVersion == "" {
			p.ProtocolVersion = "2025-06-18"
		}
		return result(m.ID, map[string]any{
			"protocolVersion": p.ProtocolVersion, // whatever the client speaks: one tool needs nothing newer
			"capabilities":    map[string]any{"tools": map[string]any{}},
			"serverInfo":      map[string]any{"name": "mcpecho", "version": "1.0.0"},
		})
	case "ping":
		return result(m.ID, map[string]any{})
	case "tools/list":
		return result(m.ID, map[string]any{"tools": []any{map[string]any{
			"name":        ToolName,
			"description": "Echoes its text back.",
			"inputSchema": map[string]any{"type": "object", "properties": map[string]any{"text": map[string]any{"type": "string"}}, "required": []any{"text"}},
		}}})
	case "tools/call":
		var p struct {
			Name      string `json:"name"`
			Arguments struct {
				Text string `json:"text"`
			} `json:"arguments"`
		}
		if err := json.Unmarshal(m.Params, &p); err != nil || p.Name != ToolName {
			return rpcError(m.ID, -32602, fmt.Sprintf("mcpecho: unknown tool %q", p.Name))
		}
		text := "echo: " + p.Arguments.Text
		if tag != "" {
			text = "[" + tag + "] " + text
		}
		return result(m.ID, map[string]any{"content": []any{map[string]any{"type": "text", "text": text}}})
	}
	return rpcError(m.ID, -32601, "mcpecho: no method "+m.Method)
}

func result(id json.RawMessage, r any) map[string]any {
	return map[string]any{"jsonrpc": "2.0", "id": id, "result": r}
}

func rpcError(id json.RawMessage, code int, msg string) map[string]any {
	var idv any = id
	if len(id) == 0 {
		idv = nil
	}
	return map[string]any{"jsonrpc": "2.0", "id": idv, "error": map[string]any{"code": code, "message": msg}}
}

// ServeStdio answers the messages of r on w, one JSON line each, until r
// ends.
func ServeStdio(r io.Reader, w io.Writer) error {
	in := bufio.NewScanner(r)
	in.Buffer(make([]byte, 64<<10), 16<<20)
	tag := os.Getenv("MCPECHO_TAG")
	for in.Scan() {
		a := answer(in.Bytes(), tag)
		if a == nil {
			continue
		}
		b, _ := json.Marshal(a)
		if _, err := w.Write(append(b, '\n')); err != nil {
			return fmt.Errorf("mcpecho: write: %w", err)
		}
	}
	return in.Err()
}

// Handler serves streamable HTTP: each POST carries one message and gets
// its response as a JSON body (202 for a notification); a GET, which asks
// for a stream of server-initiated messages, gets 405, which the protocol
// allows. tag prefixes the echoes as MCPECHO_TAG does.
func Handler(tag string) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Method != http.MethodPost {
			w.Header().Set("Allow", "POST")
			http.Error(w, "mcpecho: POST only", http.StatusMethodNotAllowed)
			return
		}
		body, err := io.ReadAll(io.LimitReader(r.Body, 16<<20))
		if err != nil {
			http.Error(w, err.Error(), http.StatusBadRequest)
			return
		}
		a := answer(body, tag)
		if a == nil {
			w.WriteHeader(http.StatusAccepted)
			return
		}
		w.Header().Set("Content-Type", "application/json")
		json.NewEncoder(w).Encode(a)
	})
}

// Build compiles the stdio server (cmd/mcpecho) into a temporary directory
// of the test and returns the program's path.
func Build(tb testing.TB) string {
	tb.Helper()
	bin := filepath.Join(tb.TempDir(), "mcpecho")
	cmd := exec.Command("go", "build", "-o", bin, "github.com/seed5ad92d46/sous/internal/mcpecho/cmd/mcpecho")
	if out, err := cmd.CombinedOutput(); err != nil {
		tb.Fatalf("build mcpecho: %v\n%s", err, out)
	}
	return bin
}
