package fakemodel

import (
	"encoding/json"
	"net/http"
	"strings"
)

// Request is one recorded request.
type Request struct {
	Method string
	Path   string // without the query
	Query  string
	Header http.Header
	Body   []byte
	// Side reports whether it was answered as a side request.
	Side bool
	// Reply is the index in Options.Script of the reply that answered it,
	// or -1 (a side request, another endpoint, Options.Func, or no reply
	// was left).
	Reply int
	// Parsed is Body decoded (zero when Body is not a JSON message request).
	Parsed MessagesRequest
}

// MessagesRequest is the part of a Messages API request tests look at.
type MessagesRequest struct {
	Model     string            `json:"model"`
	Stream    bool              `json:"stream"`
	MaxTokens int               `json:"max_tokens"`
	System    json.RawMessage   `json:"system"`
	Messages  []Message         `json:"messages"`
	Tools     []json.RawMessage `json:"tools"`
}

// Message is one turn of the conversation sent to the model.
type Message struct {
	Role    string          `json:"role"`
	Content json.RawMessage `json:"content"` // a string or a list of blocks
}

// ContentBlock is one block of a message's content, as the model receives it.
type ContentBlock struct {
	Type      string          `json:"type"`
	Text      string          `json:"text,omitempty"`
	ID        string          `json:"id,omitempty"`
	Name      string          `json:"name,omitempty"`
	Input     json.RawMessage `json:"input,omitempty"`
	ToolUseID string          `json:"tool_use_id,omitempty"`
	Content   json.RawMessage `json:"content,omitempty"`
	IsError   bool            `json:"is_error,omitempty"`
}

// Blocks returns the message's content as blocks (a plain string becomes one
// text block).
func (m Message) Blocks() []ContentBlock {
	var s string
	if json.Unmarshal(m.Content, &s) == nil {
		return []ContentBlock{{Type: "text", Text: s}}
	}
	var bs []ContentBlock
	json.Unmarshal(m.Content, &bs)
	return bs
}

// ToolResult is a tool_result block the CLI sent back to the model.
type ToolResult struct {
	ToolUseID string
	// Content is the result's text (text parts joined with newlines).
	Content string
	IsError bool
}

// ToolResults lists the tool_result blocks of the request's last message
// (the results of the tools the previous reply asked for).
func (r *Request) ToolResults() []ToolResult {
	if len(r.Parsed.Messages) == 0 {
		return nil
	}
	var out []ToolResult
	for _, b := range r.Parsed.Messages[len(r.Parsed.Messages)-1].Blocks() {
		if b.Type != "tool_result" {
			continue
		}
		out = append(out, ToolResult{ToolUseID: b.ToolUseID, Content: blockText(b.Content), IsError: b.IsError})
	}
	return out
}

// cliContext reports whether a user message's text block is context the
// CLI adds on its own rather than what it was sent: a <system-reminder>,
// and the record of a local command such as the /model a set_model
// control request makes (<local-command-caveat>, <command-name>,
// <local-command-stdout>).
func cliContext(text string) bool {
	t := strings.TrimSpace(text)
	for _, p := range []string{"<system-reminder>", "<local-command-", "<command-name>", "<command-message>"} {
		if strings.HasPrefix(t, p) {
			return true
		}
	}
	return false
}

// UserText is the text of the request's last user message, with the CLI's
// own context blocks left out (cliContext).
func (r *Request) UserText() string {
	for i := len(r.Parsed.Messages) - 1; i >= 0; i-- {
		m := r.Parsed.Messages[i]
		if m.Role != "user" {
			continue
		}
		var parts []string
		for _, b := range m.Blocks() {
			if b.Type == "text" && !cliContext(b.Text) {
				parts = append(parts, b.Text)
			}
		}
		return strings.Join(parts, "\n")
	}
	return ""
}

// Prompt is the text of the conversation's latest prompt: the last user
// message that carries text and no tool results (the CLI answers a tool
// use with a user message of tool results), without the CLI's own context
// blocks (cliContext) and, in a message that merges an interrupted turn's
// prompt with the next, only what follows the "[Request interrupted" mark. Every request of one agent turn has the same
// prompt: the one the turn was sent.
func (r *Request) Prompt() string {
	for i := len(r.Parsed.Messages) - 1; i >= 0; i-- {
		m := r.Parsed.Messages[i]
		if m.Role != "user" {
			continue
		}
		var parts []string
		results := false
		for _, b := range m.Blocks() {
			switch {
			case b.Type == "tool_result":
				results = true
			case b.Type == "text" && strings.HasPrefix(b.Text, "[Request interrupted"):
				// The CLI merges an interrupted turn's prompt with the
				// next one: the prompt is what follows the mark.
				parts = parts[:0]
			case b.Type == "text" && !cliContext(b.Text):
				parts = append(parts, b.Text)
			}
		}
		if !results && len(parts) > 0 {
			return strings.Join(parts, "\n")
		}
	}
	return ""
}

// SystemText is the system prompt as one string (text blocks joined).
func (r *Request) SystemText() string {
	return blockText(r.Parsed.System)
}

func blockText(raw json.RawMessage) string {
	var s string
	if json.Unmarshal(raw, &s) == nil {
		return s
	}
	var bs []ContentBlock
	json.Unmarshal(raw, &bs)
	var parts []string
	for _, b := range bs {
		if b.Type == "text" {
			parts = append(parts, b.Text)
		}
	}
	return strings.Join(parts, "\n")
}
