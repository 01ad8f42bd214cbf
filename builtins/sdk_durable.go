package builtins

import (
	"bytes"
	"context"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"slices"
	"strings"
	"sync"
	"time"

	"go.starlark.net/starlark"

	"github.com/seed5ad92d46/sous/daemon/wire"
	"github.com/seed5ad92d46/sous/runtime"
	"github.com/seed5ad92d46/sous/runtime/agent"
)

// Agent sessions in a durable run (runtime/durablelive.go). The journal
// keeps a Session as its session id and the daemon process id of its CLI,
// and each Turn Session.send returned with the CLI that answered it. A
// resumed run answers the sends the journal holds from it, without the
// model seeing them again, and takes the session over at the first send it
// does not hold: the CLI that served the session is ended (on a daemon
// that outlives the runner it is still there, idle) and a new one resumes
// the session by its id (the CLI's --resume), with the sdk.session call's
// options.
//
// A send the runner died in (its answer missing) went on without it:
//
//   - On a daemon that outlives the runner, the CLI finishes the turn. The
//     resume reads the CLI's stdout from its first frame up to the result
//     of that turn, which is the send's answer: the model saw the prompt
//     once. (A permission request the turn makes meanwhile has nobody to
//     answer it: such a turn waits until its timeout.)
//   - On the embedded daemon the CLI died with the runner, and the prompt
//     may or may not have reached the model: the resume sends it again,
//     with a notice, as it runs a command again.
//
// Session.start is kept as its Pending: the CLI the prompt went to and
// that CLI's stdin mark before it. Pending.wait, and wait_all for each
// turn in it (as a Pending.wait step of its own), are kept as the Turn. A
// resumed run whose journal has the start but not the turn's result takes
// the result as a send the runner died in does: from the CLI that went on
// with it, on a daemon that outlives the runner, else by sending the
// prompt again.
//
// set_model and set_permission_mode are kept for the CLI that takes the
// session over to start with (replayedSession.model, mode), and the CLI's
// initialize answer with the session, for Session.info.
//
// control and rewind_files are kept with their answers; one the runner
// died in runs again on the CLI that takes the session over. What a
// control request set in the CLI it went to does not carry over to that
// CLI (set_model and set_permission_mode do).
//
// interrupt is kept too: a replayed one marks the session's pending turns
// interrupted, and one not replayed reaches the CLI that has them
// (interruptReplayed).
//
// parallel() journals its tasks' turns as wait_all does once every task
// ended, in item order (parallel.go). A turn handed to parallel() with
// fail_fast or a pool is still journaled as a live call: a journal holding
// one is not resumed. sdk.send, a whole
// session in one call, is kept as its Turn (sdk.go).

const (
	sessionKind = "Session"
	turnKind    = "Turn"
	pendingKind = "Pending"
)

var (
	_ runtime.Recordable = (*Session)(nil)
	_ runtime.Keyed      = (*Session)(nil)
	_ runtime.TakingOver = (*Session)(nil)
	_ runtime.Recordable = (*Turn)(nil)
	_ runtime.Recordable = (*Pending)(nil)
)

// turnCLI is a CLI on the daemon that may have a turn's result: its
// process id, which of its results it is (1: its first), and its stdin
// mark before the turn's prompt (-1: any; a CLI started for the turn).
type turnCLI struct {
	id    string
	n     int
	stdin int64
}

// replayedTurn is what a Pending rebuilt from a journal knows of the CLIs
// that may have its result.
type replayedTurn struct {
	clis []turnCLI
}

// replayedSession is what a handle rebuilt from a journal knows until it
// takes the session over.
type replayedSession struct {
	sid string
	cli string // the daemon process id of the CLI that served it last
	// turns counts the turns the journal says that CLI answered: the
	// result a send the runner died in waits for is the next one.
	turns int
	// stdin is the daemon's stdin mark of that CLI after its last turn (or
	// its start): one past it is a prompt that reached the CLI.
	stdin int64
	// talked says a turn of the session is in the journal: the CLI has
	// a conversation to resume. Without one a new CLI starts the session
	// afresh under its id (--resume would find nothing).
	talked bool
	// restart starts a CLI that resumes the session, into the handle.
	restart func(c *runtime.Call, into *Session) error
	closed  bool
	// model and mode are what set_model and set_permission_mode last set
	// (nil: never), which the CLI that takes the session over starts with.
	model, mode *string
	// info is the CLI's answer to initialize, which Session.info gives.
	info json.RawMessage
	// pending are the session's turns the journal has the start of and
	// not the Turn, oldest first.
	pending []*Pending
}

// done forgets p among the session's pending turns: its Turn is known.
func (rs *replayedSession) done(p *Pending) {
	rs.pending = slices.DeleteFunc(rs.pending, func(q *Pending) bool { return q == p })
}

type keptSession struct {
	SID   string          `json:"sid"`
	Proc  string          `json:"proc"`
	Stdin int64           `json:"stdin"`
	Info  json.RawMessage `json:"info,omitempty"`
}

// Record implements runtime.Recordable.
func (s *Session) Record() (string, any, error) {
	if s.s == nil {
		return sessionKind, keptSession{SID: s.replayed.sid, Proc: s.replayed.cli, Stdin: s.replayed.stdin, Info: s.replayed.info}, nil
	}
	sid := s.s.ID()
	if sid == "" {
		return "", nil, fmt.Errorf("a session whose id the CLI has not told yet (a fork)")
	}
	return sessionKind, keptSession{SID: sid, Proc: s.procID, Stdin: s.s.StdinApplied(), Info: s.s.Info()}, nil
}

func decodeSession(env *runtime.Env, data json.RawMessage) (starlark.Value, error) {
	var k keptSession
	if err := json.Unmarshal(data, &k); err != nil {
		return nil, fmt.Errorf("a Session: %w", err)
	}
	return &Session{env: env, host: env.DefaultHost(), replayed: &replayedSession{sid: k.SID, cli: k.Proc, stdin: k.Stdin, info: k.Info}}, nil
}

// JournalKey implements runtime.Keyed.
func (s *Session) JournalKey() string {
	if s.s == nil {
		return "<Session " + s.replayed.sid + ">"
	}
	return "<Session " + s.s.ID() + ">"
}

// sessionReplayed binds a replayed sdk.session's handle to its host and
// keeps how to resume it; it also ends, when the run ends, a CLI the
// resume never takes over.
func sessionReplayed(c *runtime.Call, v starlark.Value) {
	s, ok := v.(*Session)
	if !ok || s.replayed == nil {
		return
	}
	s.host = c.Host
	orig := *c
	rs := s.replayed
	rs.restart = func(now *runtime.Call, into *Session) error {
		o, err := sessionArgs(&orig)
		if err != nil {
			return err
		}
		o.opt.Resume, o.opt.SessionID, o.opt.Fork, o.opt.Continue = rs.sid, "", false, false
		if !rs.talked {
			o.opt.Resume, o.opt.SessionID = "", rs.sid
		}
		if rs.model != nil {
			o.opt.Model = *rs.model
			if o.opt.Model == "default" {
				o.opt.Model = "" // the CLI's own default, as set_model("default") asks
			}
		}
		if rs.mode != nil {
			o.opt.PermissionMode = *rs.mode
		}
		at := *now
		at.Host = s.host
		_, err = startSession(&at, o, into)
		if err != nil && !rs.talked && strings.Contains(err.Error(), "already in use") {
			// No turn of the session is in the journal, but a prompt
			// reached a CLI that died before its turn ended: that CLI
			// made the session, so the new one resumes it.
			o.opt.Resume, o.opt.SessionID = rs.sid, ""
			_, err = startSession(&at, o, into)
		}
		return err
	}
	agentsOf(c.Env).orphan(s)
}

// turnReplayed counts the turns each CLI answered.
func turnReplayed(c *runtime.Call, v starlark.Value) {
	s, ok := c.Recv.(*Session)
	t, isTurn := v.(*Turn)
	if !ok || !isTurn || s.replayed == nil {
		return
	}
	if t.cli == s.replayed.cli {
		s.replayed.turns++
	} else {
		s.replayed.cli, s.replayed.turns = t.cli, 1
	}
	s.replayed.stdin, s.replayed.talked = t.stdin, true
}

// TakeOver implements runtime.TakingOver: before a send the journal does
// not answer, a CLI resumes the session. That is a journaled step of its
// own (Session.resume, before the send's record), whose answer is the new
// CLI's process id and stdin mark: a resume of this run knows which CLI a
// send it died in went to. A resumed run replays the step where the
// journal has it.
func (s *Session) TakeOver(c *runtime.Call) error {
	rs := s.replayed
	if rs == nil || s.s != nil || c.Name == "Session.close" || c.Name == "Session.resume" || c.Name == "Session.interrupt" {
		return nil
	}
	step := &runtime.Call{Env: c.Env, Thread: c.Thread, Name: "Session.resume", Recv: s}
	if c.Resuming() {
		if fn, show := c.NextJournaled(); fn != step.Name || show != "; on "+s.JournalKey() {
			return nil
		}
	} else if rs.closed {
		return c.Errorf("session %s is closed", rs.sid)
	}
	v, err := runtime.JournalStep(step, runtime.JournalEffect, func(step *runtime.Call) (starlark.Value, error) {
		if err := s.restart(step); err != nil {
			return nil, err
		}
		d := starlark.NewDict(2)
		d.SetKey(starlark.String("cli"), starlark.String(s.procID))
		d.SetKey(starlark.String("stdin"), starlark.MakeInt64(s.s.StdinApplied()))
		return d, nil
	})
	if err != nil {
		return err
	}
	if s.s == nil {
		// Replayed: the CLI the run had resumed the session in.
		d, _ := v.(*starlark.Dict)
		if d != nil {
			cli, _, _ := d.Get(starlark.String("cli"))
			stdin, _, _ := d.Get(starlark.String("stdin"))
			if str, ok := cli.(starlark.String); ok {
				rs.cli, rs.turns = string(str), 0
			}
			if n, ok := stdin.(starlark.Int); ok {
				rs.stdin, _ = n.Int64()
			}
		}
	}
	return nil
}

// restart ends the CLI that served the session, if it is still there,
// and starts one that resumes the session into s.
func (s *Session) restart(c *runtime.Call) error {
	rs := s.replayed
	if s.host.Outlives() {
		endOrphanCLI(c, s.host, rs.cli)
	}
	if err := rs.restart(c, s); err != nil {
		return err
	}
	agentsOf(c.Env).adopted(s)
	return nil
}

// takeOverDiedIn starts a CLI that resumes the session for a call on a
// handle a resumed run rebuilt, not journaled as a step of its own: a
// call the runner died in (one the journal does not hold took the session
// over before it was recorded: TakeOver), or a wait that sends a turn
// again. The call then goes on with the new CLI.
func (s *Session) takeOverDiedIn(c *runtime.Call) error {
	if s.s != nil || s.replayed == nil {
		return nil
	}
	return s.restart(c)
}

// closeReplayed closes a handle that never took its session over: the
// CLI that served it, if still there, is ended.
func (s *Session) closeReplayed(c *runtime.Call) {
	if s.replayed.closed {
		return
	}
	s.replayed.closed = true
	if s.host.Outlives() {
		endOrphanCLI(c, s.host, s.replayed.cli)
	}
	agentsOf(c.Env).adopted(s)
}

// rejoinTurn finishes a send the runner died in from the stdout of the
// CLI that went on with it, on a daemon that outlives the runner: a CLI
// this send started itself (when it resumed the session after a resume
// found no CLI that had the turn), else the session's CLI, if the prompt
// reached it (the daemon's stdin mark is past the one after the last
// turn). nil when no CLI has the turn: the send is made again.
func (s *Session) rejoinTurn(c *runtime.Call) (*Turn, error) {
	rs := s.replayed
	if rs == nil || !s.host.Outlives() {
		return nil, nil
	}
	return s.collectFrom(c, "send", []turnCLI{{"sous-" + c.JournalID + "-1", 1, -1}, {rs.cli, rs.turns + 1, rs.stdin}})
}

// collectFrom takes a turn's result from the first of clis that has it,
// and ends that CLI: the session's next turn resumes it in a new one. nil
// when none has it. what names the call in the notice.
func (s *Session) collectFrom(c *runtime.Call, what string, clis []turnCLI) (*Turn, error) {
	rs := s.replayed
	for _, cand := range clis {
		if cand.id == "" {
			continue
		}
		t, err := collectTurn(c, s.host, cand.id, cand.n, cand.stdin)
		if err != nil {
			return nil, err
		}
		if t != nil {
			endOrphanCLI(c, s.host, cand.id)
			// The session has a turn now, if it had none in the journal:
			// a CLI that takes it over resumes it (--resume), where one
			// started afresh under its id would find it in use.
			rs.cli, rs.turns, rs.talked = cand.id, cand.n, true
			c.Notice(fmt.Sprintf("sous: session %s's CLI finished the turn the runner died in: its result is the %s's", rs.sid, what))
			return &Turn{t: t, env: c.Env, cli: cand.id, stdin: -1}, nil
		}
	}
	return nil, nil
}

// settingReplayed keeps what a replayed set_model or set_permission_mode
// set, for the CLI that takes the session over to start with.
func settingReplayed(c *runtime.Call, _ starlark.Value) {
	s, ok := c.Recv.(*Session)
	if !ok || s.replayed == nil {
		return
	}
	s.replayed.keepSetting(c)
}

// keepSetting keeps the setting call c makes of a session not taken over.
func (rs *replayedSession) keepSetting(c *runtime.Call) {
	var v string
	name, dst := "model", &rs.model
	if c.Name == "Session.set_permission_mode" {
		name, dst = "mode", &rs.mode
	}
	if bind(c, 1, req(name, str(&v))) == nil {
		*dst = &v
	}
}

// interruptReplayed keeps a replayed Session.interrupt: the session's
// pending turns were interrupted.
func interruptReplayed(c *runtime.Call, _ starlark.Value) {
	if s, ok := c.Recv.(*Session); ok && s.replayed != nil {
		s.replayed.markInterrupted()
	}
}

// markInterrupted marks the session's pending turns interrupted.
func (rs *replayedSession) markInterrupted() {
	for _, p := range rs.pending {
		p.interrupted = true
	}
}

// interruptAcrossResume interrupts the session's turns from a handle that has
// not taken the session over: a runner that died in Session.interrupt, or
// a resumed run that interrupts turns its runner had started. They are
// marked, and on a daemon that outlives the runner the interrupt goes to
// the CLI that has them, as a control request on its stdin: their results
// are then the CLI's interrupted ones. A session with no turn under way
// has nothing to interrupt.
func (s *Session) interruptAcrossResume(c *runtime.Call) {
	rs := s.replayed
	if len(rs.pending) == 0 {
		return
	}
	rs.markInterrupted()
	if !s.host.Outlives() {
		return // the CLIs died with the runner
	}
	d, err := hostClient(c, s.host)
	if err != nil {
		return
	}
	line := agent.ControlRequestLine("sous-"+c.JournalID+"-interrupt", "interrupt")
	data := base64.StdEncoding.EncodeToString(line)
	sent := map[string]bool{}
	for _, p := range rs.pending {
		if p.cli == "" || sent[p.cli] {
			continue
		}
		sent[p.cli] = true
		_ = block(c.Env, c.Env.Ctx, func(ctx context.Context) error {
			// Best effort: a CLI that is gone has no turn to interrupt.
			var res wire.StdinResult
			return d.Call(ctx, "process.stdin", map[string]any{"id": p.cli, "data": data}, &res)
		})
	}
}

// keptPending is a Pending as the journal keeps it.
type keptPending struct {
	SID    string `json:"sid"`
	CLI    string `json:"cli"`
	Stdin  int64  `json:"stdin"`
	Prompt string `json:"prompt"`
}

// Record implements runtime.Recordable.
func (p *Pending) Record() (string, any, error) {
	sid, _ := starlark.AsString(sessionID(p.session))
	if sid == "" {
		return "", nil, fmt.Errorf("a turn of a session whose id the CLI has not told yet (a fork)")
	}
	return pendingKind, keptPending{SID: sid, CLI: p.cli, Stdin: p.stdinBefore, Prompt: p.prompt}, nil
}

func decodePending(env *runtime.Env, data json.RawMessage) (starlark.Value, error) {
	var k keptPending
	if err := json.Unmarshal(data, &k); err != nil {
		return nil, fmt.Errorf("a Pending: %w", err)
	}
	return &Pending{env: env, prompt: k.Prompt, cli: k.CLI, stdinBefore: k.Stdin, replayed: &replayedTurn{}}, nil
}

// startReplayed binds a replayed Session.start's Pending to its session
// and counts its turn among those of the CLI it went to: the CLIs' results
// come in the order of their prompts.
func startReplayed(c *runtime.Call, v starlark.Value) {
	s, ok := c.Recv.(*Session)
	p, isPending := v.(*Pending)
	if !ok || !isPending || p.replayed == nil {
		return
	}
	p.session, p.limit = s, s.limit
	rs := s.replayed
	if rs == nil {
		return
	}
	if p.cli == rs.cli {
		rs.turns++
	} else {
		// The start resumed the session in a CLI of its own.
		rs.cli, rs.turns = p.cli, 1
	}
	p.replayed.clis = []turnCLI{{p.cli, rs.turns, p.stdinBefore}}
	rs.pending = append(rs.pending, p)
}

// startedBeforeResume is the Pending of a Session.start the runner died
// in: the prompt went to the session's CLI, or to one the start resumed
// the session in, or nowhere; the wait tries them in turn.
func (s *Session) startedBeforeResume(c *runtime.Call, prompt string) *Pending {
	rs := s.replayed
	rs.turns++
	p := &Pending{env: c.Env, session: s, prompt: prompt, limit: s.limit, cli: rs.cli, stdinBefore: rs.stdin,
		replayed: &replayedTurn{clis: []turnCLI{{"sous-" + c.JournalID + "-1", 1, -1}, {rs.cli, rs.turns, rs.stdin}}}}
	rs.pending = append(rs.pending, p)
	return p
}

// waitReplayed keeps what a replayed Pending.wait's Turn says of the
// session's CLI.
func waitReplayed(c *runtime.Call, v starlark.Value) {
	p, ok := c.Recv.(*Pending)
	t, isTurn := v.(*Turn)
	if !ok || !isTurn || p.session == nil || p.session.replayed == nil {
		return
	}
	rs := p.session.replayed
	rs.done(p)
	if t.cli != "" && t.cli != rs.cli {
		// The wait sent the prompt again, in a CLI it resumed the
		// session in.
		rs.cli, rs.turns = t.cli, 1
	}
	if t.stdin >= 0 {
		rs.stdin = t.stdin
	}
	rs.talked = true
}

// finishReplayed takes the result of a turn started before the run was
// resumed, which the journal does not have: from the CLI that went on
// with it, on a daemon that outlives the runner; else (no such CLI, or the
// embedded daemon, whose CLIs died with the runner) the prompt is sent
// again, with a notice, in a CLI that resumes the session.
func (p *Pending) finishReplayed(c *runtime.Call) (starlark.Value, error) {
	s := p.session
	if s.replayed != nil {
		defer s.replayed.done(p)
	}
	if s.s == nil && s.replayed != nil && s.host.Outlives() {
		// A CLI this wait resumed the session in, if a resume died in it
		// before, then those the start's prompt may have gone to.
		clis := append([]turnCLI{{"sous-" + c.JournalID + "-1", 1, -1}}, p.replayed.clis...)
		t, err := s.collectFrom(c, "wait", clis)
		if t != nil || err != nil {
			return t, err
		}
	}
	again := "it is sent again"
	if p.interrupted {
		again = "it is sent again and interrupted at once, as the run had interrupted it"
	}
	c.Notice(fmt.Sprintf("sous: no CLI of session %s finished the turn started with %q: %s", sessionIDString(s), shortPrompt(p.prompt), again))
	if err := s.takeOverDiedIn(c); err != nil {
		return nil, err
	}
	var t *Turn
	var err error
	if p.interrupted {
		t, err = s.sendInterrupted(c, p.prompt)
	} else {
		t, err = s.send(c, p.prompt, 0)
	}
	if err != nil {
		return nil, err
	}
	t.cli, t.stdin = s.procID, s.s.StdinApplied()
	return t, nil
}

// sendInterrupted sends prompt and interrupts its turn at once: the CLI
// reads the interrupt after the prompt, so the turn ends as interrupted,
// unless it ended before the interrupt arrived, as a live interrupt can
// come too late.
func (s *Session) sendInterrupted(c *runtime.Call, prompt string) (*Turn, error) {
	ap := s.s.Start(prompt)
	if err := s.control(c, s.s.Interrupt); err != nil {
		return nil, err
	}
	if err := wait(c.Env, ap.Done(), nil); err != nil {
		return nil, c.Errorf("%v", err)
	}
	t, err := turnOutcome(c.Env, ap, s.limit)
	if err != nil {
		return nil, c.Errorf("%v", err)
	}
	return t, nil
}

func sessionIDString(s *Session) string {
	sid, _ := starlark.AsString(sessionID(s))
	return sid
}

// freshTurnGrace bounds how long a resume waits for a CLI whose stdin mark
// before the prompt it does not know (one a call started for the turn, a
// resume before this one) to begin the turn. A CLI that got the prompt
// says it began within moments (system/init, before it asks the model);
// one that did not, because that resume died between the CLI's start and
// the prompt, never will, and without a bound the resume would wait for
// it forever.
const freshTurnGrace = 20 * time.Second

// collectTurn reads the stdout of CLI process id from its first frame
// until its n-th result message, and makes that turn's Turn; nil when the
// daemon has no such process or it ended before, or, for stdin -1, when
// the CLI did not begin its n-th turn within freshTurnGrace (it is ended
// then: nobody will write to it).
func collectTurn(c *runtime.Call, host *runtime.Host, id string, n int, stdin int64) (*agent.Turn, error) {
	d, err := hostClient(c, host)
	if err != nil {
		return nil, err
	}
	var (
		mu      sync.Mutex
		pending []byte
		msgs    []json.RawMessage
		results int
		begun   int  // the turns the CLI said it began (system/init)
		gaveUp  bool // the n-th turn did not begin in freshTurnGrace
		turn    *agent.Turn
		perr    error
		done    = make(chan struct{})
		once    sync.Once
	)
	finish := func() { once.Do(func() { close(done) }) }
	onFrame := func(f *wire.Frame) {
		mu.Lock()
		defer mu.Unlock()
		if f.Stream != wire.Stdout || turn != nil || perr != nil {
			return
		}
		pending = append(pending, f.Data...)
		for {
			i := bytes.IndexByte(pending, '\n')
			if i < 0 {
				return
			}
			line := bytes.TrimSpace(pending[:i])
			pending = pending[i+1:]
			var head struct {
				Type    string `json:"type"`
				Subtype string `json:"subtype"`
			}
			if json.Unmarshal(line, &head) != nil {
				continue
			}
			if head.Type == "system" && head.Subtype == "init" {
				begun++
			}
			switch head.Type {
			case "control_request", "control_response", "control_cancel_request", "keep_alive":
				continue
			}
			msgs = append(msgs, json.RawMessage(append([]byte(nil), line...)))
			if head.Type != "result" {
				continue
			}
			if results++; results == n {
				turn, perr = agent.ParseResult(line, msgs)
				finish()
				return
			}
			msgs = nil
		}
	}
	var proc runtime.Proc
	var res wire.ReattachResult
	err = block(c.Env, c.Env.Ctx, func(ctx context.Context) (err error) {
		proc, res, err = d.Reattach(ctx, id, 0, onFrame)
		return err
	})
	if err != nil {
		return nil, c.Errorf("take over session CLI %s: %s", id, daemonMessage(err))
	}
	if !res.Found || (stdin >= 0 && res.StdinApplied <= stdin) {
		// No such CLI, or the prompt never reached it.
		return nil, nil
	}
	if stdin < 0 {
		t := time.AfterFunc(freshTurnGrace, func() {
			mu.Lock()
			defer mu.Unlock()
			if begun < n && turn == nil && perr == nil {
				gaveUp = true
				finish()
			}
		})
		defer t.Stop()
	}
	if err := waitEither(c.Env, done, proc.Done()); err != nil {
		return nil, c.Errorf("%v", err)
	}
	mu.Lock()
	got, err, idle := turn, perr, gaveUp
	mu.Unlock()
	switch {
	case err != nil:
		return nil, c.Errorf("%v", err)
	case idle:
		endOrphanCLI(c, host, id)
		return nil, nil
	}
	return got, nil
}

// endOrphanCLI kills the CLI process id on host, if it is still there: a
// CLI the run no longer speaks to.
func endOrphanCLI(c *runtime.Call, host *runtime.Host, id string) {
	if id == "" {
		return
	}
	d, err := hostClient(c, host)
	if err != nil {
		return
	}
	_ = block(c.Env, c.Env.Ctx, func(ctx context.Context) error {
		return killOnDaemon(ctx, d, id)
	})
}

// killOnDaemon ends the process group of id with SIGKILL, waiting for it;
// a process that is not there is no error.
func killOnDaemon(ctx context.Context, d runtime.Daemon, id string) error {
	ctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	var res wire.KillAndWaitResult
	return d.Call(ctx, "process.killAndWait", map[string]any{"id": id, "signal": "KILL", "timeoutMs": 5000}, &res)
}

// keptTurn is a Turn as the journal keeps it.
type keptTurn struct {
	Turn  *agent.Turn `json:"turn"`
	CLI   string      `json:"cli,omitempty"`
	Stdin int64       `json:"stdin"`
}

// Record implements runtime.Recordable.
func (t *Turn) Record() (string, any, error) {
	return turnKind, keptTurn{Turn: t.t, CLI: t.cli, Stdin: t.stdin}, nil
}

func decodeTurn(env *runtime.Env, data json.RawMessage) (starlark.Value, error) {
	var k keptTurn
	if err := json.Unmarshal(data, &k); err != nil || k.Turn == nil {
		return nil, fmt.Errorf("a Turn: %v", err)
	}
	return &Turn{t: k.Turn, env: env, cli: k.CLI, stdin: k.Stdin}, nil
}
