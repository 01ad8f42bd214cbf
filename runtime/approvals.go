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
	"time"
	"unicode/utf8"

	"github.com/seed5ad92d46/sous/runtime/event"
	"github.com/seed5ad92d46/sous/runtime/rules"
)

// approver is the end of the approver chain, after the recipe's policies:
// the command line's --allow/--deny rules, the rules the prompt's "always"
// answers added, then a person when one can answer (the terminal prompt,
// or anyone through the queue with --ask or --ui), else the default deny.
// Approve runs on the recipe thread and decides what it can at once; the
// waiting for a person is Waiting's, on the caller's goroutine (asks.go).
type approver struct {
	// ctx is the run's, or the deferred call's that runs now (recipe
	// thread only): Approve hands it to the Waiting, and an interrupt
	// ends the wait.
	ctx    context.Context
	rules  rules.Set
	prompt *prompter // nil when stdin is not a terminal
	// ask says a person answers through the default daemon's queue (sous
	// run --ask: sous approvals); ui that the run's web page can answer
	// (--ui), whatever the queue.
	ask, ui bool
	// timeout bounds the wait for a person (--ask-timeout; 0: none).
	timeout time.Duration
	// run and recipe name the run in the requests it publishes.
	run, recipe string
	// hosts reaches the default daemon, whose queue the run publishes to
	// when it has the approval.queue feature; nil: a queue in sous.
	hosts Connector
	// bus redacts the run's secrets from what is published (nil: none).
	bus *event.Bus

	asks // the requests waiting for a person (asks.go)
}

var _ Approver = (*approver)(nil)

// Approve implements Approver.
func (a *approver) Approve(req *ApprovalRequest) (Answer, *Waiting) {
	switch v, rule := a.rules.Decide(req.RuleRequest()); v {
	case rules.Allowed:
		return Answer{Allow: true, By: ByFlag}, nil
	case rules.Denied:
		return Answer{Message: fmt.Sprintf("denied by sous run --deny %q", rule.String()), By: ByFlag}, nil
	}
	if a.prompt != nil && a.prompt.allows(req) {
		return Answer{Allow: true, By: ByPrompt}, nil
	}
	if a.prompt == nil && !a.ask && !a.ui {
		// Nobody could answer: a CI job must not hang.
		return Answer{Message: DefaultDenyMessage, By: ByDefault}, nil
	}
	req.ID = newAskID()
	ctx := a.ctx
	if ctx == nil {
		ctx = context.Background()
	}
	return Answer{}, &Waiting{a: a, req: req, runCtx: ctx}
}

// prompter asks the person at the terminal, one question at a time.
type prompter struct {
	out promptOutput
	in  io.Reader

	once  sync.Once
	lines chan string // answers; closed at end of input

	mu sync.Mutex
	// always holds the rules added by "always" answers: what they allow
	// is allowed without asking.
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

// allows says whether an "always" answer's rule allows req.
func (p *prompter) allows(req *ApprovalRequest) bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	v, _ := p.always.Decide(req.RuleRequest())
	return v == rules.Allowed
}

// addAlways adds the rule of an "always" answer.
func (p *prompter) addAlways(r rules.Rule) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.always.Allow = append(p.always.Allow, r)
}

// maxPromptTries is how many unreadable answers deny the request.
const maxPromptTries = 3

// promptEnd is how a question ended.
type promptEnd int

const (
	answered  promptEnd = iota // the person answered
	elsewhere                  // the request was decided by someone else
	gaveUp                     // the request waits no more (withdrawn, interrupted)
)

// ask shows the request and reads y, n or always, until a line answers
// it, decided closes (someone else answered) or over closes (nobody waits
// for the answer any more). "always" adds the narrowest rule that allows
// the request (rules.Suggest: Bash(go test:*) for `go test ./...`, the
// file's directory, the url's domain) to the run's rules, and the question
// names it; a request no such rule can describe (a Bash line that is not
// one simple command) is not offered "always". The end of input denies.
// The caller ends the question with PromptDone.
func (p *prompter) ask(req *ApprovalRequest, decided, over <-chan struct{}) (Answer, *rules.Rule, promptEnd) {
	deny := func(msg string) Answer { return Answer{Message: msg, By: ByPrompt} }
	allow := Answer{Allow: true, By: ByPrompt}
	p.once.Do(p.startReading)
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
		case <-decided:
			return Answer{}, nil, elsewhere
		case <-over:
			return Answer{}, nil, gaveUp
		}
		if !ok {
			p.out.Prompt("\n")
			return deny("denied: no answer at the prompt (end of input)"), nil, answered
		}
		switch strings.ToLower(strings.TrimSpace(line)) {
		case "y", "yes":
			return allow, nil, answered
		case "a", "always":
			if canAlways {
				p.addAlways(always)
				return allow, &always, answered
			}
		case "n", "no":
			return deny("denied at the prompt by the person running the recipe"), nil, answered
		}
	}
	return deny("denied: no clear answer at the prompt"), nil, answered
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
