package fakemodel

import (
	"encoding/json"
	"os"
	"path/filepath"
	"reflect"
	"testing"
)

func TestParseScript(t *testing.T) {
	src := `[
  {"comment": "first the model looks", "text": "let me look"},
  {"tool_use": {"name": "Bash", "input": {"command": "go test ./...", "timeout": 120000}}, "usage": {"input_tokens": 1000, "output_tokens": 20}},
  {"tool_use": {"name": "mcp__sous__run_tests", "id": "toolu_mine"}},
  {"blocks": [{"text": "two at once"}, {"tool_use": {"name": "Read", "input": {"file_path": "/x"}}}, {"structured_output": {"plan": "p"}}],
   "stop_reason": "tool_use"},
  {"structured_output": {"failing": ["TestAdd"], "score": 7}, "when": {"prompt_contains": "triage"}},
  {"error": {"status": 529, "type": "overloaded_error", "message": "busy"}},
  {"error": {"status": 500}}
]`
	got, err := ParseScript("s.json", []byte(src))
	if err != nil {
		t.Fatal(err)
	}
	want := []Reply{
		Text("let me look"),
		{Blocks: []Block{ToolUseBlock("Bash", map[string]any{"command": "go test ./...", "timeout": json.Number("120000")})}, InputTokens: 1000, OutputTokens: 20},
		{Blocks: []Block{{Type: "tool_use", ID: "toolu_mine", Name: "mcp__sous__run_tests", Input: map[string]any{}}}},
		{Blocks: []Block{TextBlock("two at once"), ToolUseBlock("Read", map[string]any{"file_path": "/x"}),
			ToolUseBlock("StructuredOutput", map[string]any{"plan": "p"})}, StopReason: "tool_use"},
		{Blocks: []Block{ToolUseBlock("StructuredOutput", map[string]any{"failing": []any{"TestAdd"}, "score": json.Number("7")})},
			When: &When{PromptContains: "triage"}},
		APIError(529, "overloaded_error", "busy"),
		APIError(500, "api_error", "scripted error"),
	}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("parsed\n%#v\nwant\n%#v", got, want)
	}
}

// TestParseScriptErrors: every mistake is one line naming the file, the
// line of the reply at fault, its number (from 1) and what is wrong.
func TestParseScriptErrors(t *testing.T) {
	tests := []struct{ src, want string }{
		{``, "s.json: unexpected end of JSON (a list of replies is [...])"},
		{`{"text": "hi"}`, "s.json:1: want a JSON list of replies, got an object"},
		{`"hi"`, "s.json:1: want a JSON list of replies, got a string"},
		{`[]`, "s.json: the list of replies is empty"},
		{"[\n  {\"text\": \"a\"},\n  {\"text\": \"b\",}\n]", "s.json:3:16: invalid character '}' looking for beginning of object key string"},
		{`[{"text": "a"}`, "s.json: unexpected end of JSON (a list of replies is [...])"},
		{`[{"text": "a"}] [`, "s.json:1:17: text after the list of replies"},
		{"[\n {\"text\": \"a\"},\n\n {\"txt\": \"b\"}]",
			`s.json:4: reply 2: unknown key "txt" (want "text", "tool_use", "structured_output", "blocks", "error", "usage", "stop_reason", "when" or "comment")`},
		{`["hi"]`, "s.json:1: reply 1: want an object, got a string"},
		{`[{}]`, `s.json:1: reply 1: want exactly one of "text", "tool_use", "structured_output", "blocks" or "error", got none`},
		{`[{"text": "a", "tool_use": {"name": "Bash"}}]`,
			`s.json:1: reply 1: want exactly one of "text", "tool_use", "structured_output", "blocks" or "error", got "text" and "tool_use"`},
		{`[{"text": 3}]`, "s.json:1: reply 1: text: want a string, got a number"},
		{`[{"text": null}]`, "s.json:1: reply 1: text: want a string, got null"},
		{`[{"tool_use": "Bash"}]`, "s.json:1: reply 1: tool_use: want an object, got a string"},
		{`[{"tool_use": {"input": {}}}]`, `s.json:1: reply 1: tool_use: "name": want the tool's name, got nothing`},
		{`[{"tool_use": {"name": ""}}]`, `s.json:1: reply 1: tool_use: "name": want the tool's name, got ""`},
		{`[{"tool_use": {"name": "Bash", "input": ["ls"]}}]`, `s.json:1: reply 1: tool_use: "input": want an object, got a list`},
		{`[{"tool_use": {"name": "Bash", "args": {}}}]`, `s.json:1: reply 1: tool_use: unknown key "args" (want "name", "input" or "id")`},
		{`[{"tool_use": {"name": "Bash", "id": 7}}]`, `s.json:1: reply 1: tool_use: "id": want a non-empty string, got 7`},
		{`[{"structured_output": ["a"]}]`, "s.json:1: reply 1: structured_output: want an object, got a list (the StructuredOutput tool's input is the schema's object)"},
		{`[{"blocks": {"text": "a"}}]`, "s.json:1: reply 1: blocks: want a list of blocks, got an object"},
		{`[{"blocks": []}]`, "s.json:1: reply 1: blocks: the list is empty"},
		{`[{"blocks": [{"text": "a"}, {"error": {"status": 500}}]}]`,
			`s.json:1: reply 1: blocks[1]: unknown key "error" (want "text", "tool_use" or "structured_output")`},
		{`[{"blocks": [{"text": "a", "tool_use": {"name": "x"}}]}]`,
			`s.json:1: reply 1: blocks[0]: want one of "text", "tool_use" or "structured_output", got "text" and "tool_use"`},
		{`[{"error": {"status": 200}}]`, `s.json:1: reply 1: error: "status": want an HTTP error status (400 to 599), got 200`},
		{`[{"error": {"type": "overloaded_error"}}]`, `s.json:1: reply 1: error: "status": want an HTTP error status (400 to 599), got nothing`},
		{`[{"error": {"status": 529, "message": 1}}]`, `s.json:1: reply 1: error: "message": want a string, got a number`},
		{`[{"error": {"status": 529}, "usage": {"input_tokens": 1}}]`, `s.json:1: reply 1: an error reply has no "usage"`},
		{`[{"text": "a", "usage": {"input_tokens": -1}}]`, `s.json:1: reply 1: usage: "input_tokens": want a whole number of tokens, 0 or more, got -1`},
		{`[{"text": "a", "usage": {"output_tokens": 1.5}}]`, `s.json:1: reply 1: usage: "output_tokens": want a whole number of tokens, 0 or more, got 1.5`},
		{`[{"text": "a", "usage": {"input": 1}}]`, `s.json:1: reply 1: usage: unknown key "input" (want "input_tokens" or "output_tokens")`},
		{`[{"text": "a", "stop_reason": "done"}]`,
			`s.json:1: reply 1: stop_reason: want "end_turn", "tool_use", "max_tokens", "stop_sequence", "pause_turn" or "refusal", got "done"`},
		{`[{"text": "a", "when": {"prompt_contains": ""}}]`, `s.json:1: reply 1: when: "prompt_contains": want the text to look for, got ""`},
		{`[{"text": "a", "when": {"prompt": "x"}}]`, `s.json:1: reply 1: when: unknown key "prompt" (want "prompt_contains")`},
		{`[{"text": "a", "comment": ["x"]}]`, "s.json:1: reply 1: comment: want a string, got a list"},
	}
	for _, tt := range tests {
		_, err := ParseScript("s.json", []byte(tt.src))
		if err == nil || err.Error() != tt.want {
			t.Errorf("%s:\n got %v\nwant %s", tt.src, err, tt.want)
		}
	}
}

func TestReadScript(t *testing.T) {
	p := filepath.Join(t.TempDir(), "s.json")
	if _, err := ReadScript(p); !os.IsNotExist(err) {
		t.Errorf("a missing file: %v", err)
	}
	os.WriteFile(p, []byte(`[{"text": "hi"}]`), 0o644)
	if s, err := ReadScript(p); err != nil || !reflect.DeepEqual(s, []Reply{Text("hi")}) {
		t.Errorf("got %v, %v", s, err)
	}
	os.WriteFile(p, []byte(`[{"text": 1}]`), 0o644)
	if _, err := ReadScript(p); err == nil || err.Error() != p+":1: reply 1: text: want a string, got a number" {
		t.Errorf("got %v", err)
	}
}
