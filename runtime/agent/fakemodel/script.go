package fakemodel

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"slices"
	"strings"
)

// The JSON form of a script, what `sous model serve --script` and `sous
// run --fake-model` read (docs/RECIPES.md, "Running agent recipes
// offline"): a list of replies, each an object with exactly one of
//
//	{"text": "..."}                                  a text reply that ends the turn
//	{"tool_use": {"name": "Bash", "input": {...}}}   the model asks for a tool ("id" optional)
//	{"structured_output": {...}}                     a StructuredOutput tool use (output_schema)
//	{"blocks": [{"text": "..."}, {"tool_use": ...}]} several blocks in one reply
//	{"error": {"status": 529, "type": "overloaded_error", "message": "..."}}
//
// and optionally "usage" ({"input_tokens": N, "output_tokens": M}),
// "stop_reason", "when" ({"prompt_contains": "..."}) and "comment" (any
// text, ignored).

// ReadScript reads a script file (see ParseScript); its errors name the
// file.
func ReadScript(path string) ([]Reply, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	return ParseScript(path, data)
}

// ParseScript reads the JSON form of a script. name (the file's) starts
// every error, with the line of the reply at fault and its number, the
// first reply being reply 1: `triage.json:12: reply 3: tool_use: "name"
// is missing`.
func ParseScript(name string, data []byte) ([]Reply, error) {
	dec := json.NewDecoder(bytes.NewReader(data))
	tok, err := dec.Token()
	if err != nil {
		return nil, syntaxError(name, data, err)
	}
	if d, ok := tok.(json.Delim); !ok || d != '[' {
		return nil, fmt.Errorf("%s:%d: want a JSON list of replies, got %s", name, lineAt(data, 0), jsonKind(tok))
	}
	var script []Reply
	for dec.More() {
		at := elementStart(data, dec.InputOffset())
		var raw json.RawMessage
		if err := dec.Decode(&raw); err != nil {
			return nil, syntaxError(name, data, err)
		}
		r, err := parseReply(raw)
		if err != nil {
			return nil, fmt.Errorf("%s:%d: reply %d: %v", name, lineAt(data, at), len(script)+1, err)
		}
		script = append(script, r)
	}
	if _, err := dec.Token(); err != nil { // the closing ]
		return nil, syntaxError(name, data, err)
	}
	end := elementStart(data, dec.InputOffset())
	if _, err := dec.Token(); err != io.EOF {
		line, col := lineCol(data, end)
		return nil, fmt.Errorf("%s:%d:%d: text after the list of replies", name, line, col)
	}
	if len(script) == 0 {
		return nil, fmt.Errorf("%s: the list of replies is empty", name)
	}
	return script, nil
}

// replyKinds are the keys of which a reply has exactly one.
var replyKinds = []string{"text", "tool_use", "structured_output", "blocks", "error"}

// replyKeys are every key a reply may have.
var replyKeys = append(slices.Clone(replyKinds), "usage", "stop_reason", "when", "comment")

// stopReasons are the API's stop reasons.
var stopReasons = []string{"end_turn", "tool_use", "max_tokens", "stop_sequence", "pause_turn", "refusal"}

func parseReply(raw json.RawMessage) (Reply, error) {
	obj, err := object(raw, replyKeys)
	if err != nil {
		return Reply{}, err
	}
	var kinds []string
	for _, k := range replyKinds {
		if _, ok := obj[k]; ok {
			kinds = append(kinds, k)
		}
	}
	if len(kinds) != 1 {
		return Reply{}, fmt.Errorf("want exactly one of %s, got %s", quoted(replyKinds, "or"), quotedOrNone(kinds))
	}
	var r Reply
	kind := kinds[0]
	switch kind {
	case "error":
		if r, err = parseError(obj[kind]); err != nil {
			return Reply{}, fmt.Errorf("error: %v", err)
		}
		for _, k := range []string{"usage", "stop_reason"} {
			if _, ok := obj[k]; ok {
				return Reply{}, fmt.Errorf("an error reply has no %q", k)
			}
		}
	case "blocks":
		var list []json.RawMessage
		if err := json.Unmarshal(obj[kind], &list); err != nil || list == nil {
			return Reply{}, fmt.Errorf("blocks: want a list of blocks, got %s", rawKind(obj[kind]))
		}
		if len(list) == 0 {
			return Reply{}, errors.New("blocks: the list is empty")
		}
		for i, b := range list {
			block, err := parseBlock(b)
			if err != nil {
				return Reply{}, fmt.Errorf("blocks[%d]: %v", i, err)
			}
			r.Blocks = append(r.Blocks, block)
		}
	default:
		block, err := parseBlock(json.RawMessage(`{"` + kind + `":` + string(obj[kind]) + `}`))
		if err != nil {
			return Reply{}, err
		}
		r.Blocks = []Block{block}
	}
	if raw, ok := obj["usage"]; ok {
		if r.InputTokens, r.OutputTokens, err = parseUsage(raw); err != nil {
			return Reply{}, fmt.Errorf("usage: %v", err)
		}
	}
	if raw, ok := obj["stop_reason"]; ok {
		if r.StopReason, _ = asString(raw); !slices.Contains(stopReasons, r.StopReason) {
			return Reply{}, fmt.Errorf("stop_reason: want %s, got %s", quoted(stopReasons, "or"), string(raw))
		}
	}
	if raw, ok := obj["when"]; ok {
		if r.When, err = parseWhen(raw); err != nil {
			return Reply{}, fmt.Errorf("when: %v", err)
		}
	}
	if raw, ok := obj["comment"]; ok {
		if _, ok := asString(raw); !ok {
			return Reply{}, fmt.Errorf("comment: want a string, got %s", rawKind(raw))
		}
	}
	return r, nil
}

// parseBlock reads one block: {"text": ...}, {"tool_use": ...} or
// {"structured_output": ...}.
func parseBlock(raw json.RawMessage) (Block, error) {
	obj, err := object(raw, []string{"text", "tool_use", "structured_output"})
	if err != nil {
		return Block{}, err
	}
	if len(obj) != 1 {
		return Block{}, fmt.Errorf(`want one of "text", "tool_use" or "structured_output", got %s`, quotedOrNone(sortedKeys(obj)))
	}
	switch {
	case obj["text"] != nil:
		s, ok := asString(obj["text"])
		if !ok {
			return Block{}, fmt.Errorf("text: want a string, got %s", rawKind(obj["text"]))
		}
		return TextBlock(s), nil
	case obj["structured_output"] != nil:
		input, err := inputObject(obj["structured_output"])
		if err != nil {
			return Block{}, fmt.Errorf("structured_output: %v (the StructuredOutput tool's input is the schema's object)", err)
		}
		return ToolUseBlock("StructuredOutput", input), nil
	}
	t, err := object(obj["tool_use"], []string{"name", "input", "id"})
	if err != nil {
		return Block{}, fmt.Errorf("tool_use: %v", err)
	}
	b := Block{Type: "tool_use"}
	if b.Name, _ = asString(t["name"]); b.Name == "" {
		return Block{}, fmt.Errorf(`tool_use: "name": want the tool's name, got %s`, rawOrMissing(t["name"]))
	}
	if raw, ok := t["id"]; ok {
		if b.ID, _ = asString(raw); b.ID == "" {
			return Block{}, fmt.Errorf(`tool_use: "id": want a non-empty string, got %s`, string(raw))
		}
	}
	b.Input = map[string]any{}
	if raw, ok := t["input"]; ok {
		if b.Input, err = inputObject(raw); err != nil {
			return Block{}, fmt.Errorf(`tool_use: "input": %v`, err)
		}
	}
	return b, nil
}

// asString decodes a JSON string (not null, which json.Unmarshal takes
// for any string).
func asString(raw json.RawMessage) (string, bool) {
	var s string
	if len(raw) == 0 || raw[0] != '"' || json.Unmarshal(raw, &s) != nil {
		return "", false
	}
	return s, true
}

// inputObject decodes a tool's input, keeping numbers as written.
func inputObject(raw json.RawMessage) (map[string]any, error) {
	var m map[string]any
	dec := json.NewDecoder(bytes.NewReader(raw))
	dec.UseNumber()
	if dec.Decode(&m) != nil || m == nil {
		return nil, fmt.Errorf("want an object, got %s", rawKind(raw))
	}
	return m, nil
}

func parseError(raw json.RawMessage) (Reply, error) {
	obj, err := object(raw, []string{"status", "type", "message"})
	if err != nil {
		return Reply{}, err
	}
	var r Reply
	if json.Unmarshal(obj["status"], &r.Status) != nil || r.Status < 400 || r.Status > 599 {
		return Reply{}, fmt.Errorf(`"status": want an HTTP error status (400 to 599), got %s`, rawOrMissing(obj["status"]))
	}
	r.ErrorType, r.Message = "api_error", "scripted error"
	for _, f := range []struct {
		key string
		dst *string
	}{{"type", &r.ErrorType}, {"message", &r.Message}} {
		if raw, ok := obj[f.key]; ok {
			if *f.dst, ok = asString(raw); !ok {
				return Reply{}, fmt.Errorf("%q: want a string, got %s", f.key, rawKind(raw))
			}
		}
	}
	return r, nil
}

func parseUsage(raw json.RawMessage) (in, out int, err error) {
	obj, err := object(raw, []string{"input_tokens", "output_tokens"})
	if err != nil {
		return 0, 0, err
	}
	for _, f := range []struct {
		key string
		dst *int
	}{{"input_tokens", &in}, {"output_tokens", &out}} {
		if raw, ok := obj[f.key]; ok && (json.Unmarshal(raw, f.dst) != nil || *f.dst < 0 || string(raw) == "null") {
			return 0, 0, fmt.Errorf("%q: want a whole number of tokens, 0 or more, got %s", f.key, string(raw))
		}
	}
	return in, out, nil
}

func parseWhen(raw json.RawMessage) (*When, error) {
	obj, err := object(raw, []string{"prompt_contains"})
	if err != nil {
		return nil, err
	}
	var w When
	if w.PromptContains, _ = asString(obj["prompt_contains"]); w.PromptContains == "" {
		return nil, fmt.Errorf(`"prompt_contains": want the text to look for, got %s`, rawOrMissing(obj["prompt_contains"]))
	}
	return &w, nil
}

// object decodes a JSON object whose keys must be among allowed.
func object(raw json.RawMessage, allowed []string) (map[string]json.RawMessage, error) {
	var obj map[string]json.RawMessage
	if json.Unmarshal(raw, &obj) != nil || obj == nil {
		return nil, fmt.Errorf("want an object, got %s", rawKind(raw))
	}
	for _, k := range sortedKeys(obj) {
		if !slices.Contains(allowed, k) {
			return nil, fmt.Errorf("unknown key %q (want %s)", k, quoted(allowed, "or"))
		}
	}
	return obj, nil
}

func sortedKeys(m map[string]json.RawMessage) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	return keys
}

// quoted lists names as "a", "b" or "c".
func quoted(names []string, conj string) string {
	q := make([]string, len(names))
	for i, n := range names {
		q[i] = fmt.Sprintf("%q", n)
	}
	if len(q) < 2 {
		return strings.Join(q, "")
	}
	return strings.Join(q[:len(q)-1], ", ") + " " + conj + " " + q[len(q)-1]
}

func quotedOrNone(names []string) string {
	if len(names) == 0 {
		return "none"
	}
	return quoted(names, "and")
}

// rawKind names the kind of a JSON value for an error: a string, a
// number, ...
func rawKind(raw json.RawMessage) string {
	if raw == nil {
		return "nothing"
	}
	var v any
	if json.Unmarshal(raw, &v) != nil {
		return "invalid JSON"
	}
	return jsonKind(v)
}

func rawOrMissing(raw json.RawMessage) string {
	if raw == nil {
		return "nothing"
	}
	return string(raw)
}

func jsonKind(v any) string {
	switch v := v.(type) {
	case nil:
		return "null"
	case string:
		return "a string"
	case float64, json.Number:
		return "a number"
	case bool:
		return "a boolean"
	case []any:
		return "a list"
	case map[string]any:
		return "an object"
	case json.Delim:
		if v == '{' {
			return "an object"
		}
		return "a list"
	}
	return fmt.Sprintf("%T", v)
}

// syntaxError places a JSON decoding error at its line and column. A
// Decoder's offsets are not the file's, so the file is parsed whole again
// for the error's place.
func syntaxError(name string, data []byte, err error) error {
	var v any
	if werr := json.Unmarshal(data, &v); werr != nil {
		err = werr
	}
	var se *json.SyntaxError
	if errors.As(err, &se) && se.Offset < int64(len(data)) {
		line, col := lineCol(data, se.Offset-1) // Offset counts the bad byte
		return fmt.Errorf("%s:%d:%d: %v", name, line, col, err)
	}
	if se != nil || errors.Is(err, io.EOF) || errors.Is(err, io.ErrUnexpectedEOF) {
		return fmt.Errorf("%s: unexpected end of JSON (a list of replies is [...])", name)
	}
	return fmt.Errorf("%s: %v", name, err)
}

// elementStart skips the separators after offset: where the next list
// element starts.
func elementStart(data []byte, offset int64) int64 {
	for offset < int64(len(data)) && strings.IndexByte(" \t\r\n,", data[offset]) >= 0 {
		offset++
	}
	return offset
}

func lineAt(data []byte, offset int64) int {
	line, _ := lineCol(data, offset)
	return line
}

// lineCol is the 1-based line and column of a byte offset.
func lineCol(data []byte, offset int64) (line, col int) {
	offset = min(max(offset, 0), int64(len(data)))
	before := data[:offset]
	line = bytes.Count(before, []byte("\n")) + 1
	col = len(before) - bytes.LastIndexByte(before, '\n')
	return line, col
}
