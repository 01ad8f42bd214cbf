package fakemodel

import "strings"

// Block is one content block of a reply: text or tool_use.
type Block struct {
	// Type is "text" or "tool_use".
	Type string
	// Text is the text of a text block.
	Text string
	// ID is the tool_use id; empty gets a deterministic one
	// (toolu_scripted_0001, ...).
	ID string
	// Name and Input are the tool and its arguments for a tool_use block.
	Name  string
	Input map[string]any
}

// Reply is what the model says to one request.
type Reply struct {
	Blocks []Block
	// StopReason defaults to "tool_use" when a tool_use block is present,
	// else "end_turn".
	StopReason string
	// InputTokens and OutputTokens are reported as usage (defaults 10 and
	// 5), so cost figures in results are predictable.
	InputTokens, OutputTokens int
	// Status, when non-zero, makes the server answer with an API error of
	// this HTTP status instead (ErrorType and Message fill the body). Beware:
	// the CLI retries 429 and 5xx with backoff.
	Status    int
	ErrorType string
	Message   string
	// Hold, when non-nil, pauses the streamed reply after message_start
	// until Hold is closed or the client gives up on the request (as an
	// interrupted CLI does). Tests use it to catch a turn mid-flight.
	Hold <-chan struct{}
	// ChunkText splits text deltas into pieces of this many bytes (0: one
	// delta per block), to exercise the client's reassembly.
	ChunkText int
	// When, when set, keeps the reply for the requests it matches (a
	// script's replies only: Options.Func decides for itself).
	When *When
}

// When says which requests a reply of a script is for, so that sessions
// running at once each get their own replies whatever order their
// requests arrive in.
type When struct {
	// PromptContains matches a request whose prompt (Request.Prompt)
	// contains this text.
	PromptContains string
}

// matches reports whether a request with this prompt may get the reply;
// a nil When matches every request.
func (w *When) matches(prompt string) bool {
	return w == nil || strings.Contains(prompt, w.PromptContains)
}

// Text is a reply with one text block that ends the turn.
func Text(s string) Reply { return Reply{Blocks: []Block{TextBlock(s)}} }

// ToolUse is a reply with one tool_use block: the model asks to run name with
// input.
func ToolUse(name string, input map[string]any) Reply {
	return Reply{Blocks: []Block{ToolUseBlock(name, input)}}
}

// Blocks is a reply made of several blocks (e.g. text then tool_use, or two
// tool uses in one reply).
func Blocks(b ...Block) Reply { return Reply{Blocks: b} }

// TextBlock is a text content block.
func TextBlock(s string) Block { return Block{Type: "text", Text: s} }

// ToolUseBlock is a tool_use content block with a generated id.
func ToolUseBlock(name string, input map[string]any) Block {
	return Block{Type: "tool_use", Name: name, Input: input}
}

// APIError is a reply that fails the request with an HTTP status and an
// Anthropic-style error body.
func APIError(status int, typ, msg string) Reply {
	return Reply{Status: status, ErrorType: typ, Message: msg}
}
