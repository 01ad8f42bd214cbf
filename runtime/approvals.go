package runtime

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"sort"
	"strings"
	"sync"

	"github.com/seed5ad92d46/sous/builtins"
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

var _ builtins.Approver = (*approver)(nil)

// Approve implements builtins.Approver.
func (a *approver) Approve(req *builtins.ApprovalRequest) builtins.Answer {
	switch v, rule := a.rules.Decide(req.RuleRequest()); v {
	case rules.Allowed:
		return builtins.Answer{Allow: true, By: builtins.ByFlag}
	case rules.Denied:
		return builtins.Answer{Message: fmt.Sprintf("denied by sous run --deny %q", rule.String()), By: builtins.ByFlag}
	}
	if a.prompt != nil {
		return a.prompt.ask(a.ctx, req)
	}
	return builtins.Answer{Message: builtins.DefaultDenyMessage, By: builtins.ByDefault}
}

// prompter asks the person at the terminal.
type prompter struct {
	out interface{ Prompt(string) }
	in  io.Reader

	once  sync.Once
	lines chan string // answers; closed at end of input
	// always holds the tools answered "always" (recipe thread only).
	always map[string]bool
}

func newPrompter(out interface{ Prompt(string) }, in io.Reader) *prompter {
	return &prompter{out: out, in: in, always: make(map[string]bool)}
}

// maxPromptTries is how many unreadable answers deny the request.
const maxPromptTries = 3

// ask shows the request and reads y, n or always. "always" approves every
// later request for the same tool in this run, from any session. An
// interrupt or the end of input denies.
func (p *prompter) ask(ctx context.Context, req *builtins.ApprovalRequest) builtins.Answer {
	deny := func(msg string) builtins.Answer { return builtins.Answer{Message: msg, By: builtins.ByPrompt} }
	if p.always[req.Tool] {
		return builtins.Answer{Allow: true, By: builtins.ByPrompt}
	}
	p.once.Do(p.startReading)
	p.out.Prompt(describeRequest(req))
	for range maxPromptTries {
		p.out.Prompt(fmt.Sprintf("allow? [y]es, [n]o, [a]lways allow %s for this run: ", req.Tool))
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
			return builtins.Answer{Allow: true, By: builtins.ByPrompt}
		case "a", "always":
			p.always[req.Tool] = true
			return builtins.Answer{Allow: true, By: builtins.ByPrompt}
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
// which tool, and its input one field per line (long values cut).
func describeRequest(req *builtins.ApprovalRequest) string {
	var b strings.Builder
	switch req.Kind {
	case builtins.KindPrivileged:
		fmt.Fprintf(&b, "\nsous: the recipe asks to run a command as root\n")
	default:
		who := "an agent"
		if req.SessionID != "" {
			who = "the agent of session " + req.SessionID
		}
		fmt.Fprintf(&b, "\nsous: %s asks to use %s\n", who, req.Tool)
	}
	if req.Description != "" {
		fmt.Fprintf(&b, "  %s\n", oneLine(req.Description, 200))
	}
	keys := make([]string, 0, len(req.Input))
	for k := range req.Input {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	for _, k := range keys {
		v := req.Input[k]
		var s string
		if str, ok := v.(string); ok {
			s = str
		} else {
			bs, _ := json.Marshal(v)
			s = string(bs)
		}
		fmt.Fprintf(&b, "  %s: %s\n", k, oneLine(s, 200))
	}
	return b.String()
}

// oneLine shows s on one line: newlines escaped, cut after max runes with a
// note of how much was left out.
func oneLine(s string, max int) string {
	r := []rune(s)
	cut := ""
	if len(r) > max {
		cut = fmt.Sprintf("… (%d more characters)", len(r)-max)
		r = r[:max]
	}
	return strings.ReplaceAll(string(r), "\n", `\n`) + cut
}
