package agent

import (
	"fmt"
	"slices"
	"sort"
	"strings"
)

// The shapes of Claude Code's PermissionUpdate, for callers that build
// updates from loosely typed values (a recipe's dicts): the CLI ignores
// an update it does not understand, so a misspelt one is refused here
// instead of silently doing nothing.

// updateFields are the fields each update type takes besides type and
// destination.
var updateFields = map[string][]string{
	"addRules":          {"rules", "behavior"},
	"replaceRules":      {"rules", "behavior"},
	"removeRules":       {"rules", "behavior"},
	"setMode":           {"mode"},
	"addDirectories":    {"directories"},
	"removeDirectories": {"directories"},
}

// UpdateDestinations are where the CLI can apply a permission update.
var UpdateDestinations = []string{"session", "localSettings", "projectSettings", "userSettings", "cliArg"}

// ruleBehaviors are the behaviors of the rule updates.
var ruleBehaviors = []string{"allow", "deny", "ask"}

// ParsePermissionUpdate checks one permission update given as a JSON
// object ({"type": "addRules", "rules": [{"toolName": "Bash",
// "ruleContent": "git:*"}], "behavior": "allow", "destination":
// "session"}) and returns it. A rule may also be a string in Claude Code's
// syntax, "Bash(git:*)".
func ParsePermissionUpdate(m map[string]any) (PermissionUpdate, error) {
	var u PermissionUpdate
	typ, _ := m["type"].(string)
	fields, ok := updateFields[typ]
	if !ok {
		return u, fmt.Errorf("type %s: want one of %s", describe(m["type"]), strings.Join(sortedKeys(updateFields), ", "))
	}
	u.Type = typ
	for k := range m {
		if k != "type" && k != "destination" && !slices.Contains(fields, k) {
			return u, fmt.Errorf("%s: unknown field %q (a %s update takes type, destination, %s)", typ, k, typ, strings.Join(fields, ", "))
		}
	}
	dest, _ := m["destination"].(string)
	if !slices.Contains(UpdateDestinations, dest) {
		return u, fmt.Errorf("%s: destination %s: want one of %s", typ, describe(m["destination"]), strings.Join(UpdateDestinations, ", "))
	}
	u.Destination = dest
	var err error
	switch typ {
	case "setMode":
		mode, _ := m["mode"].(string)
		if mode == "" {
			return u, fmt.Errorf("setMode: mode %s: want a permission mode (\"acceptEdits\", \"default\", ...)", describe(m["mode"]))
		}
		u.Mode = mode
	case "addDirectories", "removeDirectories":
		u.Directories, err = stringList(m["directories"])
		if err != nil || len(u.Directories) == 0 {
			return u, fmt.Errorf("%s: directories %s: want a non-empty list of paths", typ, describe(m["directories"]))
		}
	default:
		b, _ := m["behavior"].(string)
		if !slices.Contains(ruleBehaviors, b) {
			return u, fmt.Errorf("%s: behavior %s: want one of %s", typ, describe(m["behavior"]), strings.Join(ruleBehaviors, ", "))
		}
		u.Behavior = b
		if u.Rules, err = parseRules(m["rules"]); err != nil {
			return u, fmt.Errorf("%s: %w", typ, err)
		}
	}
	return u, nil
}

// parseRules checks an update's rules: a non-empty list of {"toolName",
// "ruleContent"} objects or "Tool(content)" strings.
func parseRules(v any) ([]PermissionRule, error) {
	list, ok := v.([]any)
	if !ok || len(list) == 0 {
		return nil, fmt.Errorf("rules %s: want a non-empty list of rules", describe(v))
	}
	out := make([]PermissionRule, len(list))
	for i, e := range list {
		switch r := e.(type) {
		case string:
			pr, err := ParseRule(r)
			if err != nil {
				return nil, fmt.Errorf("rules[%d]: %w", i, err)
			}
			out[i] = pr
		case map[string]any:
			name, _ := r["toolName"].(string)
			content, isStr := r["ruleContent"].(string)
			if name == "" || r["ruleContent"] != nil && !isStr || len(r) > 2 || len(r) == 2 && r["ruleContent"] == nil {
				return nil, fmt.Errorf("rules[%d]: want {\"toolName\": ..., \"ruleContent\": ...} (ruleContent optional)", i)
			}
			out[i] = PermissionRule{ToolName: name, RuleContent: content}
		default:
			return nil, fmt.Errorf("rules[%d] %s: want a rule string (\"Bash(git:*)\") or {\"toolName\": ...}", i, describe(e))
		}
	}
	return out, nil
}

func stringList(v any) ([]string, error) {
	list, ok := v.([]any)
	if !ok {
		return nil, fmt.Errorf("not a list")
	}
	out := make([]string, len(list))
	for i, e := range list {
		s, ok := e.(string)
		if !ok || s == "" {
			return nil, fmt.Errorf("[%d] is not a path", i)
		}
		out[i] = s
	}
	return out, nil
}

// describe shows a value in an error: a string quoted, missing as such.
func describe(v any) string {
	switch x := v.(type) {
	case nil:
		return "missing"
	case string:
		return fmt.Sprintf("%q", x)
	case []any:
		return "a list"
	case map[string]any:
		return "a dict"
	}
	return fmt.Sprintf("%v", v)
}

func sortedKeys[V any](m map[string]V) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	return keys
}
