package agent

import (
	"encoding/json"
	"fmt"
	"maps"
	"slices"
	"strings"
)

// AgentDef is a subagent the session defines: the model starts it with the
// Task tool (called Agent by later CLIs) and subagent_type set to its
// name. Definitions travel in initialize, not on the command line, so a
// long Prompt is not bounded by the kernel's limit on arguments.
type AgentDef struct {
	// Description tells the main agent when to use it (required).
	Description string
	// Prompt is the subagent's system prompt (required).
	Prompt string
	// Tools are the tools it may use (nil: the main agent's).
	Tools []string
	// Model is its model ("sonnet", "opus", "haiku", "inherit" or a model
	// id; "": the CLI's default for subagents).
	Model string
}

// checkAgents says why a set of subagents cannot be sent, naming the one at
// fault. The CLI drops every agent of initialize when one is malformed and
// only logs why, so sous checks what the CLI's schema requires first.
func checkAgents(agents map[string]AgentDef) error {
	for _, name := range slices.Sorted(maps.Keys(agents)) {
		a := agents[name]
		switch {
		case strings.TrimSpace(name) == "":
			return fmt.Errorf("agent: agents: an agent's name is empty")
		case strings.TrimSpace(a.Description) == "":
			return fmt.Errorf("agent: agents[%q]: the description is empty (the main agent picks a subagent by it)", name)
		case strings.TrimSpace(a.Prompt) == "":
			return fmt.Errorf("agent: agents[%q]: the prompt is empty", name)
		case a.Model != "" && strings.TrimSpace(a.Model) == "":
			return fmt.Errorf("agent: agents[%q]: the model is blank", name)
		}
		for i, t := range a.Tools {
			if strings.TrimSpace(t) == "" {
				return fmt.Errorf("agent: agents[%q]: tools[%d] is empty", name, i)
			}
		}
	}
	return nil
}

// agentsField is initialize's agents field: name → the CLI's definition.
func agentsField(agents map[string]AgentDef) map[string]any {
	out := make(map[string]any, len(agents))
	for name, a := range agents {
		def := map[string]any{"description": a.Description, "prompt": a.Prompt}
		if a.Tools != nil {
			def["tools"] = a.Tools
		}
		if a.Model != "" {
			def["model"] = a.Model
		}
		out[name] = def
	}
	return out
}

// agentsNotTaken are the names of agents that the CLI's answer to
// initialize does not list: a CLI too old to read initialize's agents
// ignores them, and a later Task call for one would fail obscurely. Both
// 2.1.81 and 2.1.332 list every agent they know, theirs and the session's.
func agentsNotTaken(agents map[string]AgentDef, resp json.RawMessage) []string {
	if len(agents) == 0 {
		return nil
	}
	var answer struct {
		Agents []struct {
			Name string `json:"name"`
		} `json:"agents"`
	}
	json.Unmarshal(resp, &answer)
	known := make(map[string]bool, len(answer.Agents))
	for _, a := range answer.Agents {
		known[a.Name] = true
	}
	var missing []string
	for _, name := range slices.Sorted(maps.Keys(agents)) {
		if !known[name] {
			missing = append(missing, name)
		}
	}
	return missing
}
