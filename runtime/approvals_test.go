package runtime

import (
	"context"
	"io"
	"strings"
	"sync"
	"testing"

	"github.com/seed5ad92d46/sous/builtins"
	"github.com/seed5ad92d46/sous/runtime/rules"
)

type promptBuffer struct {
	mu sync.Mutex
	b  strings.Builder
}

func (p *promptBuffer) Prompt(s string) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.b.WriteString(s)
}

func (p *promptBuffer) String() string {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.b.String()
}

func writeReq(path string) *builtins.ApprovalRequest {
	return &builtins.ApprovalRequest{Kind: builtins.KindTool, Tool: "Write", SessionID: "s-1", ToolUseID: "t-1",
		Input: map[string]any{"file_path": path, "content": "line 1\nline 2"}}
}

func TestApproverFlagsThenDefault(t *testing.T) {
	t.Parallel()
	parse := func(list string, ss ...string) []rules.Rule {
		rs, err := rules.ParseList(list, ss)
		if err != nil {
			t.Fatal(err)
		}
		return rs
	}
	a := &approver{ctx: context.Background(), rules: rules.Set{
		Allow: parse("--allow", "Write(/src/**)", "Bash"),
		Deny:  parse("--deny", "Bash(rm:*)"),
	}}
	tests := []struct {
		req  *builtins.ApprovalRequest
		want builtins.Answer
	}{
		{writeReq("/src/a.go"), builtins.Answer{Allow: true, By: builtins.ByFlag}},
		{writeReq("/etc/passwd"), builtins.Answer{Message: builtins.DefaultDenyMessage, By: builtins.ByDefault}},
		{&builtins.ApprovalRequest{Tool: "Bash", Input: map[string]any{"command": "make && rm -rf /"}},
			builtins.Answer{Message: `denied by sous run --deny "Bash(rm:*)"`, By: builtins.ByFlag}},
		{&builtins.ApprovalRequest{Tool: "Bash", Input: map[string]any{"command": "make"}}, builtins.Answer{Allow: true, By: builtins.ByFlag}},
	}
	for _, tt := range tests {
		got := a.Approve(tt.req)
		if got.Allow != tt.want.Allow || got.By != tt.want.By || got.Message != tt.want.Message {
			t.Errorf("%s %v: %+v, want %+v", tt.req.Tool, tt.req.Input, got, tt.want)
		}
	}
}

func TestPromptAnswers(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name, input string
		allow       bool
		message     string
		questions   int
	}{
		{"yes", "y\n", true, "", 1},
		{"no after nonsense", "maybe\n NO \n", false, "denied at the prompt by the person running the recipe", 2},
		{"three unclear answers", "?\n?\n?\ny\n", false, "denied: no clear answer at the prompt", 3},
		{"end of input", "", false, "denied: no answer at the prompt (end of input)", 1},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			out := &promptBuffer{}
			a := &approver{ctx: context.Background(), prompt: newPrompter(out, strings.NewReader(tt.input))}
			got := a.Approve(writeReq("/etc/motd"))
			if got.Allow != tt.allow || got.Message != tt.message || got.By != builtins.ByPrompt {
				t.Errorf("%+v, want allow=%v %q by prompt", got, tt.allow, tt.message)
			}
			text := out.String()
			for _, want := range []string{"sous: the agent of session s-1 asks to use Write\n", "  content: line 1\\nline 2\n", "  file_path: /etc/motd\n"} {
				if !strings.Contains(text, want) {
					t.Errorf("the prompt lacks %q:\n%s", want, text)
				}
			}
			if n := strings.Count(text, "allow? [y]es, [n]o, [a]lways allow Write for this run: "); n != tt.questions {
				t.Errorf("asked %d times, want %d:\n%s", n, tt.questions, text)
			}
		})
	}
}

func TestPromptAlwaysRemembersTheTool(t *testing.T) {
	t.Parallel()
	out := &promptBuffer{}
	a := &approver{ctx: context.Background(), prompt: newPrompter(out, strings.NewReader("always\n"))}
	for i, path := range []string{"/a", "/b", "/c"} {
		if got := a.Approve(writeReq(path)); !got.Allow || got.By != builtins.ByPrompt {
			t.Errorf("request %d: %+v", i, got)
		}
	}
	if n := strings.Count(out.String(), "allow?"); n != 1 {
		t.Errorf("asked %d times, want once", n)
	}
	bash := &builtins.ApprovalRequest{Tool: "Bash", Input: map[string]any{"command": "ls"}}
	if got := a.Approve(bash); got.Allow {
		t.Errorf("always for Write allowed Bash: %+v", got)
	}
}

func TestPromptEndsOnInterrupt(t *testing.T) {
	t.Parallel()
	pr, pw := io.Pipe() // a terminal nobody types into
	defer pw.Close()
	ctx, cancel := context.WithCancel(context.Background())
	a := &approver{ctx: ctx, prompt: newPrompter(&promptBuffer{}, pr)}
	done := make(chan builtins.Answer)
	go func() { done <- a.Approve(writeReq("/x")) }()
	cancel()
	if got := <-done; got.Allow || got.Message != "the run was interrupted at the prompt" {
		t.Errorf("%+v", got)
	}
}
