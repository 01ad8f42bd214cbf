package agent

import (
	"encoding/json"
	"fmt"
	"slices"
)

// mcpServer is the JSON-RPC side of the session's in-process MCP server:
// the CLI is its client, and each of its messages arrives in an
// mcp_message control request (mcpmessage.go). It answers the handshake
// (initialize, notifications/initialized), ping and tools/list itself;
// tools/call it only checks, the session runs it (CallTool).
type mcpServer struct {
	tools []Tool
}

// JSON-RPC error codes (JSON-RPC 2.0; MCP uses -32602 for an unknown tool).
const (
	rpcInvalidRequest = -32600
	rpcMethodNotFound = -32601
	rpcInvalidParams  = -32602
)

// mcpProtocolVersions are the MCP revisions the server speaks, newest
// first. What it uses (tools without annotations or structured output, text
// content) reads the same in all of them, so it answers with the client's
// revision when it knows it, else its newest, as the spec asks.
var mcpProtocolVersions = []string{"2025-11-25", "2025-06-18", "2025-03-26", "2024-11-05"}

// rpcMessage is a JSON-RPC message from the CLI: a request (method and
// id), a notification (method, no id) or a response (no method).
type rpcMessage struct {
	JSONRPC string          `json:"jsonrpc"`
	ID      json.RawMessage `json:"id"`
	Method  string          `json:"method"`
	Params  json.RawMessage `json:"params"`
}

// isRequest says whether the message wants a response: it has an id.
func (m rpcMessage) isRequest() bool { return len(m.ID) > 0 && string(m.ID) != "null" }

// callParams are the params of tools/call, and its JSON-RPC id.
type callParams struct {
	id        json.RawMessage
	Name      string          `json:"name"`
	Arguments json.RawMessage `json:"arguments"`
	Meta      struct {
		// The CLI names the tool use a call serves here (2.1.x).
		ToolUseID string `json:"claudecode/toolUseId"`
	} `json:"_meta"`
}

// handle answers one message. A tools/call of a known tool is not answered
// here: call is set instead and the caller runs it (then answers with
// rpcResult). A notification or a response gets an empty result, which is
// what the control protocol wants for them (the CLI waits for an answer to
// every mcp_message).
func (m *mcpServer) handle(raw json.RawMessage) (reply any, call *callParams) {
	var msg rpcMessage
	if err := json.Unmarshal(raw, &msg); err != nil {
		return rpcError(nil, rpcInvalidRequest, "sous: not a JSON-RPC message: "+err.Error()), nil
	}
	if !msg.isRequest() {
		// notifications/initialized, notifications/cancelled, or a
		// response to a request this server never sends: nothing to do.
		return map[string]any{"jsonrpc": "2.0", "result": map[string]any{}}, nil
	}
	switch msg.Method {
	case "initialize":
		var p struct {
			ProtocolVersion string `json:"protocolVersion"`
		}
		json.Unmarshal(msg.Params, &p)
		version := mcpProtocolVersions[0]
		if slices.Contains(mcpProtocolVersions, p.ProtocolVersion) {
			version = p.ProtocolVersion
		}
		return rpcResult(msg.ID, map[string]any{
			"protocolVersion": version,
			"capabilities":    map[string]any{"tools": map[string]any{}},
			"serverInfo":      map[string]any{"name": ServerName, "version": "1.0.0"},
		}), nil
	case "ping":
		return rpcResult(msg.ID, map[string]any{}), nil
	case "tools/list":
		list := make([]map[string]any, len(m.tools))
		for i, t := range m.tools {
			list[i] = map[string]any{"name": t.Name, "description": t.Description, "inputSchema": t.InputSchema}
		}
		return rpcResult(msg.ID, map[string]any{"tools": list}), nil
	case "tools/call":
		var p callParams
		if err := json.Unmarshal(msg.Params, &p); err != nil {
			return rpcError(msg.ID, rpcInvalidParams, "sous: tools/call: bad params: "+err.Error()), nil
		}
		if !slices.ContainsFunc(m.tools, func(t Tool) bool { return t.Name == p.Name }) {
			return rpcError(msg.ID, rpcInvalidParams, fmt.Sprintf("sous: unknown tool %q", p.Name)), nil
		}
		p.id = msg.ID
		return nil, &p
	}
	return rpcError(msg.ID, rpcMethodNotFound, fmt.Sprintf("sous: method %q not found", msg.Method)), nil
}

func rpcResult(id json.RawMessage, result any) map[string]any {
	return map[string]any{"jsonrpc": "2.0", "id": id, "result": result}
}

func rpcError(id json.RawMessage, code int, msg string) map[string]any {
	var idv any = id
	if len(id) == 0 {
		idv = nil
	}
	return map[string]any{"jsonrpc": "2.0", "id": idv, "error": map[string]any{"code": code, "message": msg}}
}

// toolResult is the tools/call result for a tool's text: one text block,
// flagged as an error when the tool failed.
func toolResult(text string, isError bool) map[string]any {
	r := map[string]any{"content": []any{map[string]any{"type": "text", "text": text}}}
	if isError {
		r["isError"] = true
	}
	return r
}
