package fakemodel

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"net/http"
)

// rendered is a reply with its ids assigned.
type rendered struct {
	id         string
	model      string
	blocks     []Block
	stopReason string
	in, out    int
}

func (s *Server) render(r Reply, model string) rendered {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.nextMsg++
	m := rendered{id: fmt.Sprintf("msg_scripted_%04d", s.nextMsg), model: model, stopReason: r.StopReason, in: r.InputTokens, out: r.OutputTokens}
	if m.in == 0 {
		m.in = 10
	}
	if m.out == 0 {
		m.out = 5
	}
	hasTool := false
	for _, b := range r.Blocks {
		if b.Type == "tool_use" {
			hasTool = true
			if b.ID == "" {
				s.nextTool++
				b.ID = fmt.Sprintf("toolu_scripted_%04d", s.nextTool)
			}
			if b.Input == nil {
				b.Input = map[string]any{}
			}
		}
		m.blocks = append(m.blocks, b)
	}
	if m.stopReason == "" {
		m.stopReason = "end_turn"
		if hasTool {
			m.stopReason = "tool_use"
		}
	}
	return m
}

func (m rendered) usage(out int) map[string]any {
	return map[string]any{"input_tokens": m.in, "output_tokens": out, "cache_creation_input_tokens": 0, "cache_read_input_tokens": 0}
}

func (b Block) wire() map[string]any {
	if b.Type == "tool_use" {
		return map[string]any{"type": "tool_use", "id": b.ID, "name": b.Name, "input": b.Input}
	}
	return map[string]any{"type": "text", "text": b.Text}
}

// full is the non-streaming form of the reply.
func (m rendered) full() map[string]any {
	content := make([]any, 0, len(m.blocks))
	for _, b := range m.blocks {
		content = append(content, b.wire())
	}
	return map[string]any{
		"id": m.id, "type": "message", "role": "assistant", "model": m.model,
		"content": content, "stop_reason": m.stopReason, "stop_sequence": nil,
		"usage": m.usage(m.out),
	}
}

func (s *Server) stream(w http.ResponseWriter, ctx context.Context, r Reply, m rendered) {
	h := w.Header()
	h.Set("Content-Type", "text/event-stream")
	h.Set("Cache-Control", "no-cache")
	h.Set("request-id", "req_"+m.id)
	w.WriteHeader(http.StatusOK)
	fl, _ := w.(http.Flusher)
	var buf bytes.Buffer
	send := func(event string, data any) bool {
		buf.Reset()
		b, _ := json.Marshal(data)
		buf.WriteString("event: ")
		buf.WriteString(event)
		buf.WriteString("\ndata: ")
		buf.Write(b)
		buf.WriteString("\n\n")
		if _, err := w.Write(buf.Bytes()); err != nil {
			return false
		}
		if fl != nil {
			fl.Flush()
		}
		return true
	}
	start := map[string]any{
		"id": m.id, "type": "message", "role": "assistant", "model": m.model,
		"content": []any{}, "stop_reason": nil, "stop_sequence": nil, "usage": m.usage(1),
	}
	if !send("message_start", map[string]any{"type": "message_start", "message": start}) {
		return
	}
	if r.Hold != nil {
		select {
		case <-r.Hold:
		case <-ctx.Done():
			return
		}
	}
	for i, b := range m.blocks {
		var cb map[string]any
		if b.Type == "tool_use" {
			cb = map[string]any{"type": "tool_use", "id": b.ID, "name": b.Name, "input": map[string]any{}}
		} else {
			cb = map[string]any{"type": "text", "text": ""}
		}
		if !send("content_block_start", map[string]any{"type": "content_block_start", "index": i, "content_block": cb}) {
			return
		}
		var deltas []map[string]any
		if b.Type == "tool_use" {
			in, _ := json.Marshal(b.Input)
			deltas = append(deltas, map[string]any{"type": "input_json_delta", "partial_json": string(in)})
		} else {
			for _, piece := range chunks(b.Text, r.ChunkText) {
				deltas = append(deltas, map[string]any{"type": "text_delta", "text": piece})
			}
		}
		for _, d := range deltas {
			if !send("content_block_delta", map[string]any{"type": "content_block_delta", "index": i, "delta": d}) {
				return
			}
		}
		if !send("content_block_stop", map[string]any{"type": "content_block_stop", "index": i}) {
			return
		}
	}
	if !send("message_delta", map[string]any{
		"type":  "message_delta",
		"delta": map[string]any{"stop_reason": m.stopReason, "stop_sequence": nil},
		"usage": map[string]any{"output_tokens": m.out},
	}) {
		return
	}
	send("message_stop", map[string]any{"type": "message_stop"})
}

// chunks splits s into pieces of n bytes without splitting a UTF-8
// character (n <= 0: s whole).
func chunks(s string, n int) []string {
	if n <= 0 || len(s) <= n {
		return []string{s}
	}
	var out []string
	for len(s) > n {
		cut := n
		for cut > 0 && cut < len(s) && !utf8RuneStart(s[cut]) {
			cut--
		}
		if cut == 0 {
			cut = n
		}
		out = append(out, s[:cut])
		s = s[cut:]
	}
	if s != "" {
		out = append(out, s)
	}
	return out
}

func utf8RuneStart(b byte) bool { return b&0xC0 != 0x80 }

// estimateTokens is a fixed function of the body so count_tokens answers
// deterministically: about four bytes per token.
func estimateTokens(body []byte) int { return len(body)/4 + 1 }

func writeJSON(w http.ResponseWriter, v any) {
	b, _ := json.Marshal(v)
	w.Header().Set("Content-Type", "application/json")
	w.Write(b)
}

func writeError(w http.ResponseWriter, status int, typ, msg string) {
	b, _ := json.Marshal(map[string]any{"type": "error", "error": map[string]any{"type": typ, "message": msg}})
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	w.Write(b)
}
