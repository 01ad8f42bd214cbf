package rules

import "testing"

// TestEditRulesCoverEveryEditTool: as in Claude Code, an Edit rule applies
// to every tool that edits files (Write, MultiEdit, NotebookEdit), for
// allow and for deny; a Write rule stays a Write rule.
func TestEditRulesCoverEveryEditTool(t *testing.T) {
	t.Parallel()
	set := Set{
		Allow: mustRules(t, "allow", "Edit(/wt/**)", "Write(/out/**)"),
		Deny:  mustRules(t, "deny", "Edit(/wt/secret/**)"),
	}
	req := func(tool, key, p string) Request {
		return Request{Tool: tool, Input: map[string]any{key: p}, Cwd: "/wt"}
	}
	tests := []struct {
		req  Request
		want Verdict
	}{
		{req("Edit", "file_path", "/wt/a.go"), Allowed},
		{req("Write", "file_path", "/wt/a.go"), Allowed},
		{req("MultiEdit", "file_path", "/wt/a.go"), Allowed},
		{req("NotebookEdit", "notebook_path", "/wt/n.ipynb"), Allowed},
		{req("Write", "file_path", "/wt/secret/key"), Denied},
		{req("MultiEdit", "file_path", "secret/key"), Denied},
		{req("NotebookEdit", "notebook_path", "/wt/secret/n.ipynb"), Denied},
		{req("Edit", "file_path", "/out/a.go"), NoMatch},
		{req("Read", "file_path", "/wt/a.go"), NoMatch},
	}
	for _, tt := range tests {
		if got, _ := set.Decide(tt.req); got != tt.want {
			t.Errorf("%s %v: %s, want %s", tt.req.Tool, tt.req.Input, got, tt.want)
		}
	}
}

// TestWebFetchDomains: hosts compare without case and trailing dots; a url
// whose host cannot be told for sure matches every deny domain rule and no
// allow rule.
func TestWebFetchDomains(t *testing.T) {
	t.Parallel()
	deny := Set{Deny: mustRules(t, "deny", "WebFetch(domain:evil.com)")}
	allow := Set{Allow: mustRules(t, "allow", "WebFetch(domain:go.dev)")}
	fetch := func(u string) Request { return Request{Tool: "WebFetch", Input: map[string]any{"url": u}} }
	for _, u := range []string{
		"https://evil.com/x", "https://evil.com./x", "https://EVIL.com/", "https://Evil.Com.:443/", "http://sub.evil.com../",
		"https://evil%2Ecom/", "https://go.dev@evil.com/",
	} {
		if v, _ := deny.Decide(fetch(u)); v != Denied {
			t.Errorf("deny domain:evil.com %s %q", v, u)
		}
	}
	unsure := []string{
		"https://evil.com:port/", "http://[::1", "https://go.dev\\@evil.com/", "https://user@go.dev/", "file:///etc/passwd",
		"go.dev/doc", "https://go.dev /doc", "https://go.dev\t/", "https://ex\u00e4mple.com/", "https:go.dev", "https://%67o.dev/", "",
	}
	for _, u := range unsure {
		if v, _ := deny.Decide(fetch(u)); v != Denied {
			t.Errorf("deny domain:evil.com %s %q, a url whose host is not sure", v, u)
		}
		if v, _ := allow.Decide(fetch(u)); v == Allowed {
			t.Errorf("allow domain:go.dev allows %q, a url whose host is not sure", u)
		}
	}
	for _, u := range []string{"https://go.dev/doc", "https://GO.DEV./doc", "http://pkg.go.dev/x", "https://go.dev:443/"} {
		if v, _ := allow.Decide(fetch(u)); v != Allowed {
			t.Errorf("allow domain:go.dev %s %q", v, u)
		}
		if v, _ := deny.Decide(fetch(u)); v == Denied {
			t.Errorf("deny domain:evil.com denies %q", u)
		}
	}
	for _, u := range []string{"https://go.dev.evil.com/", "https://notgo.dev/"} {
		if v, _ := allow.Decide(fetch(u)); v == Allowed {
			t.Errorf("allow domain:go.dev allows %q", u)
		}
	}
}
