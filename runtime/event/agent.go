package event

import (
	"encoding/json"
	"fmt"
	"strings"
	"time"
)

// agentMessage is what State reads of a Claude Code stream-json message.
type agentMessage struct {
	Type    string `json:"type"`
	Subtype string `json:"subtype"`
	Model   string `json:"model"`
	Message struct {
		Content json.RawMessage `json:"content"`
	} `json:"message"`
	IsError    bool    `json:"is_error"`
	DurationMS float64 `json:"duration_ms"`
	CostUSD    float64 `json:"total_cost_usd"`
}

type contentBlock struct {
	Type  string         `json:"type"`
	Text  string         `json:"text"`
	Name  string         `json:"name"`
	Input map[string]any `json:"input"`
}

// noteAgent follows a session through its messages: a user message out
// starts a turn, an assistant's tool use says what it does, a result ends
// the turn with its cost. Messages before the CLI said the session's id
// carry no session and are left out.
func (s *State) noteAgent(at time.Time, e *Agent) {
	if e.Session == "" {
		return
	}
	var m agentMessage
	if json.Unmarshal(e.Message, &m) != nil {
		return
	}
	switch m.Type {
	case "user", "assistant", "system", "result":
	default:
		return // control messages, partial stream events, keep-alives
	}
	ss := s.sessions[e.Session]
	if ss == nil {
		ss = &Session{ID: e.Session, Started: at, OK: true}
		s.sessions[e.Session] = ss
		s.Sessions = append(s.Sessions, ss)
	}
	if m.Type == "result" {
		ss.InTurn = false
		ss.Activity = ""
		ss.Turns++
		c := ss.turnCost(m.CostUSD)
		ss.Cost += c
		s.cost += c
		ss.Duration += time.Duration(m.DurationMS * float64(time.Millisecond))
		ss.Subtype = m.Subtype
		ss.OK = !m.IsError && !strings.HasPrefix(m.Subtype, "error")
		return
	}
	if !ss.InTurn {
		ss.InTurn, ss.TurnStarted, ss.Activity = true, at, "thinking"
	}
	switch {
	case m.Type == "system" && m.Model != "":
		ss.Model = m.Model
	case m.Type == "assistant":
		var blocks []contentBlock
		if json.Unmarshal(m.Message.Content, &blocks) != nil {
			return
		}
		for _, b := range blocks {
			switch b.Type {
			case "text":
				if t := firstLine(b.Text); t != "" {
					ss.LastText = t
				}
			case "tool_use":
				ss.Tools++
				ss.Activity = b.Name
				if what := toolTarget(b.Input); what != "" {
					ss.Activity += ": " + what
				}
			}
		}
	case m.Type == "user" && e.Dir == "in":
		ss.Activity = "thinking" // tool results went back to the model
	}
}

func firstLine(s string) string {
	s = strings.TrimSpace(s)
	if i := strings.IndexByte(s, '\n'); i >= 0 {
		s = strings.TrimSpace(s[:i])
	}
	return s
}

// toolTarget is what a tool use acts on, in one line: the command, the
// path, the pattern or the url.
func toolTarget(input map[string]any) string {
	for _, k := range []string{"command", "file_path", "notebook_path", "path", "pattern", "url", "query", "description"} {
		if v, ok := input[k]; ok {
			return firstLine(fmt.Sprint(v))
		}
	}
	return ""
}

// turnCost is what a turn whose result says total_cost_usd cost. The CLI
// reports the total of its process so far, not the turn's own: a
// session's second turn says the first turn's cost plus its own. A total
// below the last one is a new CLI process (a session resumed after its CLI
// ended), which counts from zero again.
func (ss *Session) turnCost(total float64) float64 {
	last := ss.cliTotal
	ss.cliTotal = total
	if total < last {
		return total
	}
	return total - last
}
