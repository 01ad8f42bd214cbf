package agent

import (
	"encoding/json"
	"reflect"
	"testing"
)

func TestParsePermissionUpdate(t *testing.T) {
	for _, tc := range []struct {
		in   string
		want PermissionUpdate
		err  string
	}{
		{in: `{"type": "addRules", "rules": [{"toolName": "Bash", "ruleContent": "git:*"}, "Read", "Edit(/src/**)"], "behavior": "allow", "destination": "session"}`,
			want: PermissionUpdate{Type: "addRules", Behavior: "allow", Destination: "session",
				Rules: []PermissionRule{{ToolName: "Bash", RuleContent: "git:*"}, {ToolName: "Read"}, {ToolName: "Edit", RuleContent: "/src/**"}}}},
		{in: `{"type": "setMode", "mode": "acceptEdits", "destination": "session"}`,
			want: PermissionUpdate{Type: "setMode", Mode: "acceptEdits", Destination: "session"}},
		{in: `{"type": "addDirectories", "directories": ["/tmp/x"], "destination": "localSettings"}`,
			want: PermissionUpdate{Type: "addDirectories", Directories: []string{"/tmp/x"}, Destination: "localSettings"}},
		{in: `{"type": "addRule", "destination": "session"}`,
			err: `type "addRule": want one of addDirectories, addRules, removeDirectories, removeRules, replaceRules, setMode`},
		{in: `{"rules": []}`, err: `type missing: want one of addDirectories, addRules, removeDirectories, removeRules, replaceRules, setMode`},
		{in: `{"type": "setMode", "mode": "plan"}`, err: `setMode: destination missing: want one of session, localSettings, projectSettings, userSettings, cliArg`},
		{in: `{"type": "setMode", "mode": "plan", "destination": "session", "rules": []}`,
			err: `setMode: unknown field "rules" (a setMode update takes type, destination, mode)`},
		{in: `{"type": "addRules", "rules": ["Bash"], "behavior": "maybe", "destination": "session"}`,
			err: `addRules: behavior "maybe": want one of allow, deny, ask`},
		{in: `{"type": "addRules", "rules": [], "behavior": "deny", "destination": "session"}`,
			err: `addRules: rules a list: want a non-empty list of rules`},
		{in: `{"type": "addRules", "rules": [{"tool": "Bash"}], "behavior": "deny", "destination": "session"}`,
			err: `addRules: rules[0]: want {"toolName": ..., "ruleContent": ...} (ruleContent optional)`},
		{in: `{"type": "addRules", "rules": ["Bash("], "behavior": "deny", "destination": "session"}`,
			err: `addRules: rules[0]: rule "Bash(": want Tool or Tool(content)`},
		{in: `{"type": "removeDirectories", "directories": "/tmp", "destination": "session"}`,
			err: `removeDirectories: directories "/tmp": want a non-empty list of paths`},
		{in: `{"type": "setMode", "destination": "session"}`,
			err: `setMode: mode missing: want a permission mode ("acceptEdits", "default", ...)`},
	} {
		var m map[string]any
		if err := json.Unmarshal([]byte(tc.in), &m); err != nil {
			t.Fatal(err)
		}
		got, err := ParsePermissionUpdate(m)
		if tc.err != "" {
			if err == nil || err.Error() != tc.err {
				t.Errorf("%s: error %v, want %q", tc.in, err, tc.err)
			}
			continue
		}
		if err != nil || !reflect.DeepEqual(got, tc.want) {
			t.Errorf("%s: got %+v, %v; want %+v", tc.in, got, err, tc.want)
		}
	}
}
