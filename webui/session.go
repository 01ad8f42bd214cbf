package webui

import (
	"encoding/json"
	"unicode/utf8"

	"github.com/seed5ad92d46/sous/runtime/event"
)

// sessionView is one agent session: what the run's state says of it and
// its recent protocol messages, which the page shows as text, tool uses,
// tool results and turn results.
type sessionView struct {
	summary  event.Session
	messages []messageJSON
	bytes    int
	dropped  bool // older messages are gone
}

type sessionJSON struct {
	ID       string        `json:"id"`
	Model    string        `json:"model,omitempty"`
	Turns    int           `json:"turns"`
	CostUSD  float64       `json:"cost_usd"`
	InTurn   bool          `json:"in_turn"`
	Activity string        `json:"activity,omitempty"`
	Denials  int           `json:"denials"`
	Messages []messageJSON `json:"messages"`
	// Dropped says older messages are no longer kept.
	Dropped bool `json:"messages_dropped"`
}

// messageJSON is one protocol message as the agent event carries it.
type messageJSON struct {
	Dir     string          `json:"dir"`
	Message json.RawMessage `json:"message"`
}

func (s *sessionView) json() sessionJSON {
	m := s.summary
	return sessionJSON{ID: m.ID, Model: m.Model, Turns: m.Turns, CostUSD: m.Cost, InTurn: m.InTurn,
		Activity: m.Activity, Denials: m.Denials, Messages: append([]messageJSON{}, s.messages...),
		Dropped: s.dropped}
}

// Message types the page shows; the rest (partial stream events, control
// messages, keep-alives) only add weight.
var shownTypes = map[string]bool{"user": true, "assistant": true, "result": true, "system": true}

// noteAgent keeps an agent message of a session that has an id.
func (h *Hub) noteAgent(e *event.Agent) {
	if e.Session == "" {
		return
	}
	var head struct {
		Type string `json:"type"`
	}
	if json.Unmarshal(e.Message, &head) != nil || !shownTypes[head.Type] {
		return
	}
	s := h.sessIndex[e.Session]
	if s == nil {
		s = &sessionView{summary: event.Session{ID: e.Session}}
		h.sessIndex[e.Session] = s
		h.sessions = append(h.sessions, s)
		if len(h.sessions) > MaxSessions {
			delete(h.sessIndex, h.sessions[0].summary.ID)
			h.sessions = h.sessions[1:]
		}
	}
	msg := boundMessage(e.Message)
	s.messages = append(s.messages, messageJSON{Dir: e.Dir, Message: msg})
	s.bytes += len(msg)
	for len(s.messages) > SessionMessages || (s.bytes > SessionBytes && len(s.messages) > 1) {
		s.bytes -= len(s.messages[0].Message)
		s.messages = s.messages[1:]
		s.dropped = true
	}
	h.refreshSession(e.Session)
}

// refreshSession copies the run's account of a session (turns, cost,
// activity), which the bus brought up to date before this event.
func (h *Hub) refreshSession(id string) {
	s := h.sessIndex[id]
	if s == nil || h.state == nil {
		return
	}
	if ss := h.state.Session(id); ss != nil {
		s.summary = *ss
	}
}

// Bounds of one kept message.
const (
	bigMessage = 32 << 10 // a message larger than this has its long strings cut
	longString = 4 << 10  // to this many bytes
)

// boundMessage copies a message to keep, cutting the long strings of a
// large one (a tool result that is a whole file) so that it stays valid
// JSON of the same shape.
func boundMessage(raw json.RawMessage) json.RawMessage {
	if len(raw) <= bigMessage {
		return append(json.RawMessage(nil), raw...)
	}
	var v any
	if json.Unmarshal(raw, &v) != nil {
		return json.RawMessage(`{"type":"unknown"}`)
	}
	b, err := json.Marshal(cutStrings(v))
	if err != nil {
		return json.RawMessage(`{"type":"unknown"}`)
	}
	return b
}

func cutStrings(v any) any {
	switch v := v.(type) {
	case string:
		if len(v) > longString {
			cut := longString
			for cut > 0 && !utf8.RuneStart(v[cut]) {
				cut--
			}
			return v[:cut] + "… [cut by sous]"
		}
	case []any:
		for i := range v {
			v[i] = cutStrings(v[i])
		}
	case map[string]any:
		for k := range v {
			v[k] = cutStrings(v[k])
		}
	}
	return v
}
