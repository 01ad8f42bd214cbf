package agent

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"unicode/utf8"
)

// mcpMessage handles the CLI's mcp_message control request: one JSON-RPC
// message for the session's in-process MCP server. Everything but a tool
// call is answered at once; a tool call runs CallTool on a goroutine of
// its own, so calls (and permission requests) can be pending together. The
// answer is {"mcp_response": <the JSON-RPC response>}.
func (s *Session) mcpMessage(r *incomingRequest) {
	var req struct {
		ServerName string          `json:"server_name"`
		Message    json.RawMessage `json:"message"`
	}
	json.Unmarshal(r.payload, &req)
	if req.ServerName != ServerName || s.mcp == nil {
		// A server sous does not serve (an SDK server the CLI was told of
		// elsewhere): the CLI sees a JSON-RPC error, as from a server that
		// does not exist.
		var msg rpcMessage
		json.Unmarshal(req.Message, &msg)
		r.done(nil)
		r.respond(map[string]any{"mcp_response": rpcError(msg.ID, rpcMethodNotFound,
			fmt.Sprintf("sous: no in-process MCP server %q", req.ServerName))}, "")
		return
	}
	reply, call := s.mcp.handle(req.Message)
	if call == nil {
		r.done(nil)
		r.respond(map[string]any{"mcp_response": reply}, "")
		return
	}
	args := call.Arguments
	if len(args) == 0 || string(args) == "null" {
		args = json.RawMessage(`{}`)
	}
	s.toolSeq++
	tc := ToolCall{Tool: call.Name, Arguments: args, ToolUseID: call.Meta.ToolUseID, SessionID: s.ID(), Seq: s.toolSeq}
	go s.runTool(r, call.id, tc)
}

// runTool runs one tool call and answers it, unless the CLI withdrew the
// request meanwhile. The tool's failure is the model's to read (an isError
// result), not the turn's: the turn goes on.
func (s *Session) runTool(r *incomingRequest, id json.RawMessage, tc ToolCall) {
	text, err := s.callTool(r.ctx, tc)
	live := r.done(nil)
	s.observe(Event{Dir: Out, Type: "tool", Call: &tc, Err: err})
	if !live {
		return
	}
	if err != nil {
		text = err.Error()
	}
	r.respond(map[string]any{"mcp_response": rpcResult(id, toolResult(truncateResult(text), err != nil))}, tc.ToolUseID)
}

// callTool runs CallTool and turns a panic into an error: a call must
// never be left unanswered.
func (s *Session) callTool(ctx context.Context, tc ToolCall) (text string, err error) {
	defer func() {
		if p := recover(); p != nil {
			err = fmt.Errorf("tool %s panicked: %v", tc.Tool, p)
		}
	}()
	return s.opt.CallTool(ctx, tc)
}

// truncateResult cuts a text longer than MaxToolResult, note included:
// after the last line end that fits or, in a text without one in its second
// half, at a character boundary (no character is broken in two). A note at
// the end says so.
func truncateResult(text string) string {
	if len(text) <= MaxToolResult {
		return text
	}
	const room = 128 // for the note
	limit := MaxToolResult - room
	cut := strings.LastIndexByte(text[:limit], '\n') + 1
	if cut < limit/2 {
		cut = limit
		for cut > 0 && !utf8.RuneStart(text[cut]) {
			cut--
		}
	}
	kept := text[:cut]
	if !strings.HasSuffix(kept, "\n") {
		kept += "\n"
	}
	return kept + fmt.Sprintf("[sous: the tool's result was %d bytes; only the first %d are shown]", len(text), cut)
}
