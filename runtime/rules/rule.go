package rules

import (
	"fmt"
	"strings"
	"unicode"
)

// Rule is one parsed rule.
type Rule struct {
	Tool string
	// Content is what is between the parentheses ("" with HasContent false:
	// any use of the tool).
	Content    string
	HasContent bool
}

// Parse parses "Tool" or "Tool(content)".
func Parse(s string) (Rule, error) {
	s = strings.TrimSpace(s)
	open := strings.IndexByte(s, '(')
	tool := s
	var r Rule
	if open >= 0 {
		if !strings.HasSuffix(s, ")") {
			return Rule{}, fmt.Errorf("rule %q: want Tool or Tool(content), with the content closed by a final ')'", s)
		}
		tool = s[:open]
		r.Content = strings.TrimSpace(s[open+1 : len(s)-1])
		r.HasContent = true
		if r.Content == "" {
			return Rule{}, fmt.Errorf("rule %q: empty parentheses; write %q for any use of the tool", s, tool)
		}
	}
	if tool == "" {
		return Rule{}, fmt.Errorf("rule %q: no tool name", s)
	}
	for _, c := range tool {
		if !(c == '_' || c == '-' || c == '.' || c < unicode.MaxASCII && (unicode.IsLetter(c) || unicode.IsDigit(c))) {
			return Rule{}, fmt.Errorf("rule %q: tool name %q: want letters, digits, '_', '-' or '.'", s, tool)
		}
	}
	r.Tool = tool
	return r, nil
}

// ParseList parses rule strings; errors name the list and index.
func ParseList(list string, rules []string) ([]Rule, error) {
	out := make([]Rule, len(rules))
	for i, s := range rules {
		r, err := Parse(s)
		if err != nil {
			return nil, fmt.Errorf("%s[%d]: %w", list, i, err)
		}
		out[i] = r
	}
	return out, nil
}

// String is the rule in Claude Code's syntax.
func (r Rule) String() string {
	if !r.HasContent {
		return r.Tool
	}
	return r.Tool + "(" + r.Content + ")"
}
