package agent

import "encoding/json"

// envelope is the part of every message from the CLI the reader looks at.
type envelope struct {
	Type      string          `json:"type"`
	Subtype   string          `json:"subtype"`
	SessionID string          `json:"session_id"`
	RequestID string          `json:"request_id"`
	Request   json.RawMessage `json:"request"`
	Response  json.RawMessage `json:"response"`
	// Version is system/init's claude_code_version.
	Version string `json:"claude_code_version"`
}

// toolResultIDs are the tool_use_ids of the tool_result blocks in a user
// message's content: the tools whose outcome the model has now seen.
func toolResultIDs(content json.RawMessage) []string {
	var blocks []struct {
		Type      string `json:"type"`
		ToolUseID string `json:"tool_use_id"`
	}
	json.Unmarshal(content, &blocks)
	var ids []string
	for _, b := range blocks {
		if b.Type == "tool_result" {
			ids = append(ids, b.ToolUseID)
		}
	}
	return ids
}

// userContent is a user message's message.content, unparsed.
func userContent(line []byte) json.RawMessage {
	var m struct {
		Message struct {
			Content json.RawMessage `json:"content"`
		} `json:"message"`
	}
	json.Unmarshal(line, &m)
	return m.Message.Content
}
