package agent

import (
	"fmt"
	"strings"
)

// PermissionUpdate is one entry of updatedPermissions (Claude Code's
// PermissionUpdate): e.g. {Type: "addRules", Rules: ..., Behavior: "allow",
// Destination: "session"}.
type PermissionUpdate struct {
	Type        string           `json:"type"`
	Rules       []PermissionRule `json:"rules,omitempty"`
	Behavior    string           `json:"behavior,omitempty"`
	Destination string           `json:"destination"`
	Mode        string           `json:"mode,omitempty"`
	Directories []string         `json:"directories,omitempty"`
}

// PermissionRule is a tool and an optional rule content: "Bash(git:*)" is
// {ToolName: "Bash", RuleContent: "git:*"}.
type PermissionRule struct {
	ToolName    string `json:"toolName"`
	RuleContent string `json:"ruleContent,omitempty"`
}

// ParseRule splits a rule string in Claude Code's syntax, "Tool" or
// "Tool(content)".
func ParseRule(s string) (PermissionRule, error) {
	s = strings.TrimSpace(s)
	open := strings.IndexByte(s, '(')
	if open < 0 {
		if s == "" || strings.ContainsAny(s, ")") {
			return PermissionRule{}, fmt.Errorf("rule %q: want Tool or Tool(content)", s)
		}
		return PermissionRule{ToolName: s}, nil
	}
	if !strings.HasSuffix(s, ")") || open == 0 {
		return PermissionRule{}, fmt.Errorf("rule %q: want Tool or Tool(content)", s)
	}
	return PermissionRule{ToolName: s[:open], RuleContent: s[open+1 : len(s)-1]}, nil
}

// SessionRule is the permission update that allows a rule for the rest of
// the session ("remember" in recipes). Whether the CLI applies it is its
// decision.
func SessionRule(rule string) (PermissionUpdate, error) {
	r, err := ParseRule(rule)
	if err != nil {
		return PermissionUpdate{}, err
	}
	return PermissionUpdate{Type: "addRules", Rules: []PermissionRule{r}, Behavior: "allow", Destination: "session"}, nil
}
