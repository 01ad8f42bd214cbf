package rules

import "testing"

// TestSuggest: the rule an "always" answer adds is as narrow as the
// request, and none is offered where no rule can say what the request is.
func TestSuggest(t *testing.T) {
	t.Parallel()
	in := func(tool string, kv ...string) Request {
		m := map[string]any{}
		for i := 0; i+1 < len(kv); i += 2 {
			m[kv[i]] = kv[i+1]
		}
		return Request{Tool: tool, Input: m, Cwd: "/wt"}
	}
	tests := []struct {
		req  Request
		want string // "" when none is offered
	}{
		{bash("go test ./..."), "Bash(go test:*)"},
		{bash("go"), "Bash(go:*)"},
		{bash("git commit -m 'fix it'"), "Bash(git commit:*)"},
		{bash("ls -la /tmp"), "Bash(ls:*)"},
		{bash("cat ./README.md"), "Bash(cat:*)"},
		{bash("npm run build"), "Bash(npm run:*)"},
		{bash("./build.sh --fast"), "Bash(./build.sh:*)"},
		{bash("'my tool' sub x"), "Bash('my tool' sub:*)"},
		{bash("go test ./... 2>&1"), "Bash(go test:*)"},
		{bash("sudo apt-get install jq"), "Bash(sudo apt-get install jq)"},
		{bash("sh -c 'curl x | sh'"), `Bash(sh -c 'curl x | sh')`},
		{bash("python3 -c 'print(1)'"), `Bash(python3 -c 'print(1)')`},
		{bash("env FOO=1 make"), "Bash(env FOO=1 make)"},
		{bash("xargs rm"), "Bash(xargs rm)"},
		{bash("sudo rm $HOME"), ""},
		{bash("go test ./... && go vet ./..."), ""},
		{bash("go test | tee log"), ""},
		{bash("go test $(ls)"), ""},
		{bash("go test > out.txt"), ""},
		{bash("FOO=1 go test"), ""},
		{bash("$GO test"), ""},
		{bash(""), ""},
		{in("Bash"), ""},
		{Request{Tool: "Sudo", Input: map[string]any{"command": []any{"apt-get", "install", "jq"}}}, "Sudo(apt-get install jq)"},
		{Request{Tool: "Sudo", Input: map[string]any{"command": []any{"sh", "-c", "a; b"}}}, "Sudo(sh -c 'a; b')"},
		{in("Write", "file_path", "/wt/src/a.go"), "Write(/wt/src/**)"},
		{in("Edit", "file_path", "src/a.go"), "Edit(/wt/src/**)"},
		{in("Write", "file_path", "/a.txt"), "Write(/a.txt)"},
		{in("NotebookEdit", "notebook_path", "/wt/nb/x.ipynb"), "NotebookEdit(/wt/nb/**)"},
		{in("Grep", "pattern", "x", "path", "/wt/pkg"), "Grep(/wt/pkg/**)"},
		{in("Write", "file_path", "/wt/.git/config"), "Write(/wt/.git/**)"},
		{in("Write", "file_path", "/wt/a*.go"), ""},
		{Request{Tool: "Write", Input: map[string]any{"file_path": "a.go"}}, ""},
		{in("Write"), ""},
		{in("WebFetch", "url", "https://Go.Dev./doc"), "WebFetch(domain:go.dev)"},
		{in("WebFetch", "url", "https://go.dev@evil.com/"), ""},
		{in("WebFetch"), ""},
		{in("mcp__docs__search", "q", "x"), "mcp__docs__search"},
		{in("Task", "prompt", "x"), "Task"},
	}
	for _, tt := range tests {
		r, ok := Suggest(tt.req)
		got := ""
		if ok {
			got = r.String()
		}
		if got != tt.want {
			t.Errorf("Suggest(%s %v) = %q, want %q", tt.req.Tool, tt.req.Input, got, tt.want)
		}
		if ok && !r.Covers(tt.req) {
			t.Errorf("Suggest(%s %v) = %s, which does not cover it", tt.req.Tool, tt.req.Input, r)
		}
	}
}
