package runtime

import (
	"context"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"sort"
	"sync"
	"time"

	"github.com/seed5ad92d46/sous/daemon/approvals"
	"github.com/seed5ad92d46/sous/daemon/wire"
)

// The requests of a run that wait for a person. Each is published to a
// queue (askqueue.go) under a random id; one goroutine of the run loops
// approval.wait on the ids that wait, which also keeps them alive on the
// daemon, and hands each decision to its request. The answerers all go
// through the queue's Answer, so the first answer wins: the terminal
// prompt (one question at a time, oldest request first), the
// --ask-timeout timer (by "default"), and anyone else through the queue:
// `sous approvals`, the web page (by "remote").

// Bounds of the asks.
const (
	// askWaitSlice is how long one approval.wait lasts: well under the
	// minute after which a daemon takes a request nobody waits for as
	// abandoned.
	askWaitSlice = 25 * time.Second
	// askCallTimeout bounds a call made after the run or the request
	// ended (withdraw, the timeout's answer).
	askCallTimeout = 5 * time.Second
	// askRetry is the pause after a failed approval.wait (the client
	// reconnects meanwhile and resends the calls in flight).
	askRetry = 200 * time.Millisecond
)

// asks is the approver's state of waiting requests. The zero value is
// ready to use.
type asks struct {
	mu      sync.Mutex
	queue   askQueue
	waits   map[string]*askEntry
	seq     uint64
	changed chan struct{} // closed and replaced when a request starts waiting
	done    chan struct{} // closed when the run is over
	closed  bool
	// looping and prompting say the wait loop and the prompt loop run.
	looping, prompting bool
	active             sync.WaitGroup // the Waits in progress
}

// askEntry is one request waiting for a person.
type askEntry struct {
	id      string
	req     *ApprovalRequest
	seq     uint64
	decided chan struct{} // closed once answer is set
	answer  wire.AskAnswer
	over    chan struct{} // closed when its Wait returned
	// prompted says the prompt asked it already (prompt loop only).
	prompted bool
}

// initLocked makes the channels of the zero value. a.mu is held.
func (s *asks) initLocked() {
	if s.waits == nil {
		s.waits = make(map[string]*askEntry)
		s.changed = make(chan struct{})
		s.done = make(chan struct{})
	}
}

// Waiting is a request that waits for a person: Approve's answer when no
// rule decided it. Call Wait once.
type Waiting struct {
	a      *approver
	req    *ApprovalRequest
	runCtx context.Context // the run's: an interrupt ends the wait
}

// ID is the request's id, what a person answers it by.
func (w *Waiting) ID() string { return w.req.ID }

// Wait publishes the request, calls published (nil: nothing) once others
// can answer it, and waits for the first answer, the end of ctx (the
// agent withdrew the request), an interrupt of the run or the end of the
// run. The request is withdrawn from the queue before Wait returns, however
// it ends. It may be called on any goroutine but the recipe thread, which
// waits through Env.Loop.Wait instead.
func (w *Waiting) Wait(ctx context.Context, published func()) Answer {
	a := w.a
	e, q, deny := a.begin(ctx, w.req)
	if e == nil {
		return deny
	}
	defer a.end(q, e)
	var timer *time.Timer
	if a.timeout > 0 {
		timer = time.AfterFunc(a.timeout, func() {
			ctx, cancel := context.WithTimeout(context.Background(), askCallTimeout)
			defer cancel()
			// Refused when someone answered first: that answer stands.
			q.Answer(ctx, wire.AskAnswer{ID: e.id, Decision: wire.DecisionDeny, By: ByDefault,
				Message: fmt.Sprintf("no answer within %s (--ask-timeout): %s", a.timeout, DefaultDenyMessage)})
		})
		defer timer.Stop()
	}
	if published != nil {
		published()
	}
	select {
	case <-e.decided:
		return answerOf(e.answer)
	case <-ctx.Done():
		return Answer{Message: "the request was withdrawn", By: ByDefault}
	case <-w.runCtx.Done():
		if a.prompt != nil {
			return Answer{Message: "the run was interrupted at the prompt", By: ByPrompt}
		}
		return Answer{Message: "the run was interrupted while the request waited for a person", By: ByDefault}
	case <-a.done:
		return Answer{Message: "the recipe is stopping", By: ByDefault}
	}
}

// begin publishes req and registers it: nil and a denial when it cannot
// wait (the run is over, the queue refused it).
func (a *approver) begin(ctx context.Context, req *ApprovalRequest) (*askEntry, askQueue, Answer) {
	a.mu.Lock()
	a.initLocked()
	if a.closed {
		a.mu.Unlock()
		return nil, nil, Answer{Message: "the recipe is stopping", By: ByDefault}
	}
	if a.run == "" {
		a.run = newRunID()
	}
	a.active.Add(1)
	a.mu.Unlock()
	q := a.queueFor(ctx)
	if _, local := q.(localQueue); local && a.prompt == nil && !a.ui {
		// --ask alone, and the daemon holds no queue: nobody could answer.
		a.active.Done()
		return nil, nil, Answer{Message: DefaultDenyMessage + " (--ask: the default daemon has no approval queue, so nobody could answer)", By: ByDefault}
	}
	if err := q.Publish(ctx, a.askOf(req)); err != nil {
		a.active.Done()
		return nil, nil, Answer{Message: fmt.Sprintf("%s (no person could be asked: %v)", DefaultDenyMessage, err), By: ByDefault}
	}
	e := &askEntry{id: req.ID, req: req, decided: make(chan struct{}), over: make(chan struct{})}
	a.mu.Lock()
	defer a.mu.Unlock()
	a.seq++
	e.seq = a.seq
	a.waits[e.id] = e
	close(a.changed)
	a.changed = make(chan struct{})
	if !a.looping {
		a.looping = true
		go a.waitLoop(q)
	}
	if a.prompt != nil && !a.prompting {
		a.prompting = true
		go a.promptLoop(q)
	}
	return e, q, Answer{}
}

// end forgets a request whose Wait returns and withdraws it from the
// queue: decided or not, nobody waits for it now.
func (a *approver) end(q askQueue, e *askEntry) {
	a.mu.Lock()
	delete(a.waits, e.id)
	close(e.over)
	a.mu.Unlock()
	ctx, cancel := context.WithTimeout(context.Background(), askCallTimeout)
	defer cancel()
	q.Withdraw(ctx, []string{e.id})
	a.active.Done()
}

// askOf is req as the queue holds it, without the run's secrets: whoever
// holds the daemon's token reads it.
func (a *approver) askOf(req *ApprovalRequest) wire.Ask {
	summary := req.Summary
	if summary == "" {
		b, _ := json.Marshal(req.Input)
		summary = oneLine(string(b), 160)
	}
	ask := wire.Ask{ID: req.ID, Run: a.run, Recipe: a.recipe, Kind: req.Kind, Session: req.SessionID, Tool: req.Tool,
		Summary: summary, Description: req.Description, Input: req.Input, Since: time.Now()}
	if a.bus != nil {
		ask.Summary, ask.Description = a.bus.RedactText(ask.Summary), a.bus.RedactText(ask.Description)
		ask.Input, _ = a.bus.RedactValue(ask.Input).(map[string]any)
	}
	return ask
}

// queueFor is the run's queue, found on first use: the default daemon's
// when it has the approval.queue feature, else one in sous.
func (a *approver) queueFor(ctx context.Context) askQueue {
	a.mu.Lock()
	q := a.queue
	a.mu.Unlock()
	if q != nil {
		return q
	}
	q = localQueue{approvals.New(nil, 0)}
	if a.hosts != nil {
		if d, err := a.hosts.Default(ctx); err == nil {
			if ok, err := d.HasFeature(ctx, wire.FeatureApprovalQueue); err == nil && ok {
				q = daemonQueue{d}
			}
		}
	}
	a.mu.Lock()
	defer a.mu.Unlock()
	if a.queue == nil {
		a.queue = q
	}
	return a.queue
}

// waitLoop waits on the queue for the decisions of the waiting requests
// and hands each to its request. A request that starts waiting cuts the
// current wait short, so that its ids are all named. It ends when no
// request waits (begin starts it again) or the run is over.
func (a *approver) waitLoop(q askQueue) {
	for {
		a.mu.Lock()
		ids := make([]string, 0, len(a.waits))
		for id, e := range a.waits {
			select {
			case <-e.decided: // its Wait is ending: asking again would spin
			default:
				ids = append(ids, id)
			}
		}
		if a.closed || len(ids) == 0 {
			a.looping = false
			a.mu.Unlock()
			return
		}
		sort.Strings(ids)
		changed, done := a.changed, a.done
		a.mu.Unlock()
		ctx, cancel := context.WithCancel(context.Background())
		go func() {
			select {
			case <-changed:
			case <-done:
			case <-ctx.Done():
			}
			cancel()
		}()
		got, err := q.Wait(ctx, ids, askWaitSlice)
		cut := ctx.Err() != nil
		cancel()
		for _, ans := range got {
			a.deliver(ans)
		}
		if err != nil && !cut {
			select { // the connection is down: the client reconnects
			case <-time.After(askRetry):
			case <-done:
			}
		}
	}
}

// deliver hands a decision to the request waiting for it.
func (a *approver) deliver(ans wire.AskAnswer) {
	a.mu.Lock()
	defer a.mu.Unlock()
	e := a.waits[ans.ID]
	if e == nil {
		return
	}
	select {
	case <-e.decided:
	default:
		e.answer = ans
		close(e.decided)
	}
}

// answerOf is a queue's decision as the chain's Answer.
func answerOf(x wire.AskAnswer) Answer {
	ans := Answer{Allow: x.Decision == wire.DecisionAllow, Message: x.Message}
	switch x.By {
	case ByPrompt, ByDefault:
		ans.By = x.By
	case "withdrawn", "gone":
		ans.By = ByDefault // the queue closed it: nobody answered
	default:
		ans.By = ByRemote
	}
	if ans.Allow {
		ans.Message = ""
	} else if ans.Message == "" {
		ans.Message = approvals.Describe(x)
	}
	return ans
}

// promptLoop asks the person at the terminal about the waiting requests,
// one at a time, oldest first, and sends each answer to the queue. It
// ends when no request is left to ask about (begin starts it again).
func (a *approver) promptLoop(q askQueue) {
	for {
		e := a.nextToPrompt()
		if e == nil {
			return
		}
		a.promptOne(q, e)
	}
}

// nextToPrompt is the oldest waiting request the prompt has not asked
// about, nobody decided and no "always" rule allows (the prompt answered
// those already, and the answer may not have come back yet); nil (the
// loop stops) when there is none.
func (a *approver) nextToPrompt() *askEntry {
	a.mu.Lock()
	defer a.mu.Unlock()
	var next *askEntry
	for _, e := range a.waits {
		if e.prompted || a.closed || a.prompt.allows(e.req) {
			continue
		}
		select {
		case <-e.decided:
			continue
		default:
		}
		if next == nil || e.seq < next.seq {
			next = e
		}
	}
	if next == nil {
		a.prompting = false
		return nil
	}
	next.prompted = true
	return next
}

// promptOne asks about one request and answers it through the queue. An
// "always" answer also answers the other waiting requests its rule allows.
func (a *approver) promptOne(q askQueue, e *askEntry) {
	p := a.prompt
	defer p.out.PromptDone()
	ans, always, how := p.ask(e.req, e.decided, e.over)
	switch how {
	case elsewhere:
		p.out.Prompt(fmt.Sprintf("\n  decided elsewhere: %s\n", approvals.Describe(e.answer)))
		return
	case gaveUp:
		p.out.Prompt("\n")
		return
	}
	ctx, cancel := context.WithTimeout(context.Background(), askCallTimeout)
	defer cancel()
	if err := q.Answer(ctx, askAnswer(e.id, ans)); err != nil {
		var we *wire.Error
		if errors.As(err, &we) && we.Code == wire.CodeApprovalDecided {
			// Someone answered first: that decision stands.
			select {
			case <-e.decided:
				p.out.Prompt(fmt.Sprintf("  decided elsewhere first: %s\n", approvals.Describe(e.answer)))
			case <-e.over:
			}
		}
		return
	}
	if always == nil {
		return
	}
	a.mu.Lock()
	var others []*askEntry
	for _, o := range a.waits {
		if o != e {
			others = append(others, o)
		}
	}
	a.mu.Unlock()
	for _, o := range others {
		if p.allows(o.req) {
			q.Answer(ctx, askAnswer(o.id, Answer{Allow: true, By: ByPrompt})) // refused when decided: fine
		}
	}
}

// askAnswer is an Answer as the queue takes it.
func askAnswer(id string, ans Answer) wire.AskAnswer {
	d := wire.DecisionDeny
	if ans.Allow {
		d = wire.DecisionAllow
	}
	return wire.AskAnswer{ID: id, Decision: d, Message: ans.Message, By: ans.By}
}

// answer answers a waiting request by id through the run's queue, as a
// person elsewhere (By "remote" unless set): Options.Steer's answer.
func (a *approver) answer(ctx context.Context, x wire.AskAnswer) error {
	if x.By == "" {
		x.By = ByRemote
	}
	a.mu.Lock()
	q := a.queue
	a.mu.Unlock()
	if q == nil {
		return wire.Errorf(wire.CodeApprovalUnknown, "no pending request %q (answered and gone, or never asked)", x.ID)
	}
	return q.Answer(ctx, x)
}

// close ends the waits still in progress (the run is over: they are
// denied) and returns once each has withdrawn its request, so that
// nothing of the run stays pending on the daemon. It is called after the
// agent sessions closed, before the daemon connections do.
func (a *approver) close() {
	a.mu.Lock()
	a.initLocked()
	if !a.closed {
		a.closed = true
		close(a.done)
	}
	a.mu.Unlock()
	a.active.Wait()
}

// newAskID is a request's id: 8 random hex digits.
func newAskID() string { return randomHex(4) }

// newRunID is a run's id: 16 random hex digits.
func newRunID() string { return randomHex(8) }

// randomHex is n random bytes in hex (randomBytes).
func randomHex(n int) string {
	b := make([]byte, n)
	randomBytes(b)
	return hex.EncodeToString(b)
}
