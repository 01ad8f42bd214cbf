package runtime

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"path"
	"sort"
	"strings"
	"sync"
	"unicode/utf8"

	"github.com/seed5ad92d46/sous/runtime/rules"
)

// approver is the end of the approver chain, after the recipe's policies:
// the command line's --allow/--deny rules, then a prompt on the terminal,
// then the default deny. The builtins call it on the recipe thread, one
// request at a time, so prompts never overlap.
type approver struct {
	ctx    context.Context // the run's: an interrupt ends a prompt
	rules  rules.Set
	prompt *prompter // nil when stdin is not a terminal
}

var _ Approver = (*approver)(nil)

// Approve implements Approver.
func (a *approver) Approve(req *ApprovalRequest) Answer {
	switch v, rule := a.rules.Decide(req.RuleRequest()); v {
	case rules.Allowed:
		return Answer{Allow: true, By: ByFlag}
	case rules.Denied:
		return Answer{Message: fmt.Sprintf("denied by sous run --deny %q", rule.String()), By: ByFlag}
	}
	if a.prompt != nil {
		return a.prompt.ask(a.ctx, req)
	}
	return Answer{Message: DefaultDenyMessage, By: ByDefault}
}

// prompter asks the person at the terminal.
type prompter struct {
	out promptOutput
	in  io.Reader

	once  sync.Once
	lines chan string // answers; closed at end of input
	// always holds the rules added by "always" answers (recipe thread
	// only): what they allow is allowed without asking.
	always rules.Set
}

// promptOutput is where a prompt asks: Prompt writes a question's text,
// PromptDone says it was answered (the status area comes back).
type promptOutput interface {
	Prompt(string)
	PromptDone()
}

func newPrompter(out promptOutput, in io.Reader) *prompter {
	return &prompter{out: out, in: in}
}

// maxPromptTries is how many unreadable answers deny the request.
const maxPromptTries = 3

// ask shows the request and reads y, n or always. "always" adds the
// narrowest rule that allows the request (rules.Suggest: Bash(go test:*)
// for `go test ./...`, the file's directory, the url's domain) to the run's
// rules, and the question names it; a request no such rule can describe
// (a Bash line that is not one simple command) is not offered "always".
// An interrupt or the end of input denies.
func (p *prompter) ask(ctx context.Context, req *ApprovalRequest) Answer {
	deny := func(msg string) Answer { return Answer{Message: msg, By: ByPrompt} }
	allow := Answer{Allow: true, By: ByPrompt}
	if v, _ := p.always.Decide(req.RuleRequest()); v == rules.Allowed {
		return allow
	}
	p.once.Do(p.startReading)
	defer p.out.PromptDone()
	p.out.Prompt(describeRequest(req))
	question := "allow? [y]es, [n]o: "
	always, canAlways := rules.Suggest(req.RuleRequest())
	if canAlways {
		question = fmt.Sprintf("allow? [y]es, [n]o, [a]lways allow %s for this run: ", oneLine(always.String(), 200))
	}
	for range maxPromptTries {
		p.out.Prompt(question)
		var line string
		var ok bool
		select {
		case line, ok = <-p.lines:
		case <-ctx.Done():
			p.out.Prompt("\n")
			return deny("the run was interrupted at the prompt")
		}
		if !ok {
			p.out.Prompt("\n")
			return deny("denied: no answer at the prompt (end of input)")
		}
		switch strings.ToLower(strings.TrimSpace(line)) {
		case "y", "yes":
			return allow
		case "a", "always":
			if canAlways {
				p.always.Allow = append(p.always.Allow, always)
				return allow
			}
		case "n", "no":
			return deny("denied at the prompt by the person running the recipe")
		}
	}
	return deny("denied: no clear answer at the prompt")
}

// startReading reads answers on a goroutine of its own, so that a prompt
// can give up on an interrupt. A read blocked on the terminal when the run
// ends stays blocked until the next line or the end of sous: a terminal
// read cannot be cancelled portably, and nothing else reads stdin.
func (p *prompter) startReading() {
	p.lines = make(chan string)
	go func() {
		defer close(p.lines)
		sc := bufio.NewScanner(p.in)
		for sc.Scan() {
			p.lines <- sc.Text()
		}
	}()
}

// describeRequest is the prompt's account of a request: who asks, for
// which tool, what the CLI says it does (unless that only repeats the
// input, as the CLI's description of a Bash command does), and its input
// one field per line. Everything that comes from the request is shown on
// one line with control characters escaped, long values cut.
func describeRequest(req *ApprovalRequest) string {
	var b strings.Builder
	switch req.Kind {
	case KindPrivileged:
		fmt.Fprintf(&b, "\nsous: the recipe asks to run a command as root\n")
	default:
		who := "an agent"
		if req.SessionID != "" {
			who = "the agent of session " + oneLine(req.SessionID, 80)
		}
		fmt.Fprintf(&b, "\nsous: %s asks to use %s\n", who, oneLine(req.Tool, 80))
	}
	if req.Description != "" && !repeatsInput(req.Description, req.Input) {
		fmt.Fprintf(&b, "  %s\n", oneLine(req.Description, 200))
	}
	keys := make([]string, 0, len(req.Input))
	for k := range req.Input {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	for _, k := range keys {
		fmt.Fprintf(&b, "  %s: %s\n", oneLine(k, 80), oneLine(inputText(req.Input[k]), 200))
	}
	return b.String()
}

// inputText is an input value as text: a string as it is, else its JSON.
func inputText(v any) string {
	if s, ok := v.(string); ok {
		return s
	}
	bs, _ := json.Marshal(v)
	return string(bs)
}

// repeatsInput reports a description that says nothing the input does not:
// one of its values (the CLI describes a Bash command by the command, cut
// with "…", or by the input's own description), or a path's base name.
func repeatsInput(desc string, input map[string]any) bool {
	cut, truncated := strings.CutSuffix(desc, "…")
	for _, v := range input {
		s := inputText(v)
		if s == desc || truncated && strings.HasPrefix(s, cut) || path.Base(s) == desc {
			return true
		}
	}
	return false
}

// oneLine shows s on one line with control characters escaped (visible),
// cut after max characters with a note of how much was left out.
func oneLine(s string, max int) string {
	i := 0
	for n := 0; i < len(s) && n < max; n++ {
		_, size := utf8.DecodeRuneInString(s[i:])
		i += size
	}
	if i == len(s) {
		return visible(s)
	}
	return visible(s[:i]) + fmt.Sprintf("… (%d more characters)", utf8.RuneCountInString(s[i:]))
}
