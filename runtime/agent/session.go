package agent

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/google/uuid"

	"github.com/seed5ad92d46/sous/daemon/client"
)

// Errors callers can test for with errors.Is.
var (
	// ErrTurnTimeout is wrapped by Send and Pending.Wait when a turn ran
	// past Options.TurnTimeout and was interrupted.
	ErrTurnTimeout = errors.New("turn timed out")
	// ErrCLIStuck is wrapped with ErrTurnTimeout when the CLI did not stop
	// the timed-out turn when interrupted: the session was ended.
	ErrCLIStuck = errors.New("the CLI did not stop")
	// ErrClosed is wrapped by calls on a closed session.
	ErrClosed = errors.New("agent session closed")
	// ErrCLIExited is wrapped when the CLI process ended while the session
	// still needed it.
	ErrCLIExited = errors.New("claude CLI exited")
	// ErrSDKURLRejected is wrapped when the CLI refuses --sdk-url for a
	// local endpoint (Claude Code 2.1.121 and later).
	ErrSDKURLRejected = errors.New("the Claude Code CLI refused --sdk-url for a local endpoint")
)

// Default timings.
const (
	defaultStartTimeout = 60 * time.Second
	killGrace           = 3 * time.Second
	// interruptGrace is how long a timed-out turn may take to stop after
	// the interrupt before the session gives up on the CLI.
	interruptGrace = 15 * time.Second
	stderrTailSize = 16 << 10
	// maxStray bounds the messages kept between turns.
	maxStray = 256
)

// Session is one running Claude Code CLI. Its methods are safe for
// concurrent use.
type Session struct {
	opt   Options
	tr    transport
	inbox *queue[inbound]
	out   *queue[outbound]
	outMu sync.Mutex // orders enqueue's observe+push
	obsMu sync.Mutex

	ctx    context.Context // cancelled when the session ends: stops permission callbacks
	cancel context.CancelFunc
	reqSeq atomic.Uint64
	// permSeq numbers permission requests as they arrive (Request.Seq);
	// only the reader goroutine takes numbers.
	permSeq uint64

	mu       sync.Mutex
	id       string
	turns    []*turnState // FIFO; turns[0] has been sent once sent is set
	stray    []json.RawMessage
	controls map[string]chan controlResult
	perms    map[string]*permState
	dead     error // why the session no longer works
	// interruptAfter holds the tool uses whose tool_result should be
	// followed by an interrupt (a failed permission callback).
	interruptAfter map[string]bool
	closing        bool

	loopDone   chan struct{}
	writerDone chan struct{}
	closeOnce  sync.Once
	closeErr   error
}

// inbound is one line from the CLI, or the end of its output.
type inbound struct {
	line []byte
	end  error // non-nil: the CLI is gone (its error says how)
}

// outbound is one line for the CLI with what the WebSocket transport needs
// to know to replay it after a reconnect.
type outbound struct {
	line []byte
	meta outMeta
}

type outKind int

const (
	outOther   outKind = iota // never replayed (keep_alive)
	outUser                   // settled by the turn's result
	outControl                // our control_request: settled by its control_response
	outAnswer                 // our control_response to a permission request
)

type outMeta struct {
	kind      outKind
	requestID string
	toolUseID string
}

type controlResult struct {
	response json.RawMessage
	err      error
}

type permState struct {
	cancel context.CancelFunc
	turn   *turnState
}

type turnState struct {
	prompt  string
	uuid    string
	pending *Pending
	sent    bool
	msgs    []json.RawMessage
	errs    []error       // permission callback failures
	limit   time.Duration // this turn's timeout (0: none)
	timer   *time.Timer
	timeout bool // the limit passed
}

// transport carries lines between the session and the CLI and owns the CLI
// process.
type transport interface {
	// send writes one line (newline included). It may block; it is only
	// called from the session's writer goroutine.
	send(ctx context.Context, o outbound) error
	// stop ends the CLI and its process tree and releases the transport.
	stop() error
}

// Start launches the CLI on the daemon c and returns once it answered the
// initialize request. The session must be closed.
func Start(ctx context.Context, c *client.Client, opt Options) (*Session, error) {
	if opt.Transport == "" {
		opt.Transport = TransportStdio
	}
	if opt.Transport != TransportStdio && opt.Transport != TransportWebSocket {
		return nil, fmt.Errorf("agent: transport %q: want %q or %q", opt.Transport, TransportStdio, TransportWebSocket)
	}
	if opt.Transport == TransportWebSocket && !opt.LocalHost && !c.Local() {
		return nil, errors.New("agent: transport \"websocket\" needs the CLI on this machine (the daemon is remote, so the CLI could not reach sous's loopback endpoint); use transport=\"stdio\"")
	}
	if len(opt.CLI) == 0 {
		opt.CLI = []string{"claude"}
	}
	if opt.CLI[0] == "" {
		return nil, errors.New("agent: cli: empty program name")
	}
	if opt.Fork && opt.Resume == "" {
		return nil, errors.New("agent: fork needs resume (the session id to fork)")
	}
	if opt.SessionID != "" {
		if opt.Resume != "" {
			return nil, errors.New("agent: a session id is for a fresh session; a resumed one keeps its id and a fork gets a new one from the CLI")
		}
		if _, err := uuid.Parse(opt.SessionID); err != nil {
			return nil, fmt.Errorf("agent: session id %q: the CLI wants a UUID: %w", opt.SessionID, err)
		}
	}
	if opt.MaxTurns < 0 {
		return nil, fmt.Errorf("agent: max turns %d: want a positive number", opt.MaxTurns)
	}
	if opt.ProcessID == "" {
		opt.ProcessID = "claude-" + uuid.NewString()
	}
	if opt.StartTimeout <= 0 {
		opt.StartTimeout = defaultStartTimeout
	}
	s := &Session{
		opt:        opt,
		inbox:      newQueue[inbound](),
		out:        newQueue[outbound](),
		controls:   make(map[string]chan controlResult),
		perms:      make(map[string]*permState),
		loopDone:   make(chan struct{}),
		writerDone: make(chan struct{}),
	}
	s.ctx, s.cancel = context.WithCancel(context.Background())
	// A fresh session gets its id from us, so ID is known before the first
	// turn; a resumed one keeps its id; a fork learns its new id from the
	// CLI's system/init.
	sessionID := ""
	switch {
	case opt.Resume == "":
		sessionID = opt.SessionID
		if sessionID == "" {
			sessionID = uuid.NewString()
		}
		s.id = sessionID
	case !opt.Fork:
		s.id = opt.Resume
	}
	args := buildArgs(opt, sessionID)

	sctx, cancel := context.WithTimeout(ctx, opt.StartTimeout)
	defer cancel()
	var err error
	switch opt.Transport {
	case TransportStdio:
		s.tr, err = startStdio(sctx, c, s, args)
	default:
		s.tr, err = startWebSocket(sctx, c, s, args)
	}
	if err != nil {
		s.cancel()
		return nil, err
	}
	go s.loop()
	go s.writer()

	init := map[string]any{}
	if opt.SystemPrompt != "" {
		init["systemPrompt"] = opt.SystemPrompt
	}
	if opt.AppendSystemPrompt != "" {
		init["appendSystemPrompt"] = opt.AppendSystemPrompt
	}
	if _, err := s.control(sctx, "initialize", init); err != nil {
		// What a CLI that never answered printed instead (a wrong program,
		// a banner, a crash trace) is the best clue to why; gone, its exit
		// error already carries it.
		var said string
		if t, ok := s.tr.(interface{ cli() *cliProc }); ok && !errors.Is(err, ErrCLIExited) {
			said = t.cli().stderr.String()
		}
		s.Close()
		if ws, ok := s.tr.(*wsTransport); ok {
			err = ws.explainStartFailure(err)
		}
		if said != "" {
			err = fmt.Errorf("%w; its output: %s", err, said)
		}
		return nil, fmt.Errorf("agent: start %s: %w", strings.Join(opt.CLI, " "), err)
	}
	return s, nil
}

// buildArgs is the CLI's command line after the program. Flag names were
// checked against the --help of 2.1.81 and 2.1.330 (--max-turns and
// --permission-prompt-tool are accepted but hidden from --help).
func buildArgs(opt Options, sessionID string) []string {
	args := append([]string(nil), opt.CLI[1:]...)
	args = append(args, "--print", "--input-format", "stream-json", "--output-format", "stream-json", "--verbose")
	if opt.Transport == TransportStdio {
		args = append(args, "--permission-prompt-tool", "stdio")
	}
	if opt.Model != "" {
		args = append(args, "--model", opt.Model)
	}
	if opt.PermissionMode != "" {
		args = append(args, "--permission-mode", opt.PermissionMode)
	}
	// One argument per rule: the flags are variadic and each value is split
	// on commas and spaces outside parentheses, so "Bash(go test:*)" stays
	// whole.
	if len(opt.AllowedTools) > 0 {
		args = append(args, "--allowedTools")
		args = append(args, opt.AllowedTools...)
	}
	if len(opt.DisallowedTools) > 0 {
		args = append(args, "--disallowedTools")
		args = append(args, opt.DisallowedTools...)
	}
	if opt.MaxTurns > 0 {
		args = append(args, "--max-turns", strconv.Itoa(opt.MaxTurns))
	}
	if opt.Resume != "" {
		args = append(args, "--resume", opt.Resume)
		if opt.Fork {
			args = append(args, "--fork-session")
		}
	}
	if sessionID != "" {
		args = append(args, "--session-id", sessionID)
	}
	return append(args, opt.ExtraArgs...)
}

// ID is the CLI's session id ("" for a fork until its first turn starts).
func (s *Session) ID() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.id
}

// Err is why the session stopped working, or nil.
func (s *Session) Err() error {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.dead
}

// Pending is a turn under way.
type Pending struct {
	s    *Session
	ts   *turnState
	done chan struct{}
	turn *Turn
	err  error
}

// Done is closed when the turn finished (or failed).
func (p *Pending) Done() <-chan struct{} { return p.done }

// Result is the turn's outcome once Done is closed.
func (p *Pending) Result() (*Turn, error) {
	<-p.done
	return p.turn, p.err
}

// Wait blocks until the turn finishes or ctx ends. Ending ctx does not stop
// the turn; Send does.
func (p *Pending) Wait(ctx context.Context) (*Turn, error) {
	select {
	case <-p.done:
		return p.turn, p.err
	case <-ctx.Done():
		return nil, fmt.Errorf("agent: waiting for the turn: %w", ctx.Err())
	}
}

func (p *Pending) finish(t *Turn, err error) {
	p.turn, p.err = t, err
	close(p.done)
}

// Send sends prompt as a user message and waits for the turn's result. When
// ctx ends first the turn is interrupted (or dropped if it had not started).
func (s *Session) Send(ctx context.Context, prompt string) (*Turn, error) {
	p := s.Start(prompt)
	select {
	case <-p.done:
		return p.turn, p.err
	case <-ctx.Done():
	}
	s.abandon(p.ts)
	return nil, fmt.Errorf("agent: send: %w", ctx.Err())
}

// Start sends prompt as a user message without waiting. Turns run one after
// another: a prompt started while another turn runs is sent when that turn
// ends, so every result belongs to exactly one prompt.
func (s *Session) Start(prompt string) *Pending {
	return s.StartWith(prompt, TurnOptions{})
}

// TurnOptions adjust one turn.
type TurnOptions struct {
	// Timeout bounds this turn instead of Options.TurnTimeout (0: the
	// session's). It counts from when the prompt is sent, not from when it
	// was queued behind an earlier turn.
	Timeout time.Duration
}

// StartWith is Start with options for this turn.
func (s *Session) StartWith(prompt string, o TurnOptions) *Pending {
	limit := o.Timeout
	if limit <= 0 {
		limit = s.opt.TurnTimeout
	}
	ts := &turnState{prompt: prompt, uuid: uuid.NewString(), limit: limit}
	p := &Pending{s: s, ts: ts, done: make(chan struct{})}
	ts.pending = p
	s.mu.Lock()
	if s.dead != nil {
		err := s.dead
		s.mu.Unlock()
		p.finish(nil, err)
		return p
	}
	s.turns = append(s.turns, ts)
	head := len(s.turns) == 1
	s.mu.Unlock()
	if head {
		s.sendTurn(ts)
	}
	return p
}

// sendTurn writes a turn's user message and arms its timeout.
func (s *Session) sendTurn(ts *turnState) {
	s.mu.Lock()
	if ts.sent || s.dead != nil {
		s.mu.Unlock()
		return
	}
	ts.sent = true
	sid := s.id
	if ts.limit > 0 {
		ts.timer = time.AfterFunc(ts.limit, func() { s.turnTimedOut(ts) })
	}
	s.mu.Unlock()
	s.enqueue(map[string]any{
		"type":               "user",
		"message":            map[string]any{"role": "user", "content": ts.prompt},
		"parent_tool_use_id": nil,
		"session_id":         sid,
		"uuid":               ts.uuid,
	}, outMeta{kind: outUser})
}

// turnTimedOut interrupts a turn that ran too long. If the CLI does not
// stop it within interruptGrace, the CLI is considered stuck and the
// session ends.
func (s *Session) turnTimedOut(ts *turnState) {
	s.mu.Lock()
	if len(s.turns) == 0 || s.turns[0] != ts || s.dead != nil {
		s.mu.Unlock()
		return
	}
	ts.timeout = true
	s.mu.Unlock()
	ctx, cancel := context.WithTimeout(s.ctx, interruptGrace)
	defer cancel()
	s.control(ctx, "interrupt", nil)
	select {
	case <-ts.pending.done:
	case <-ctx.Done():
		s.fail(fmt.Errorf("agent: %w after %s and %w within %s of the interrupt; the session was ended", ErrTurnTimeout, ts.limit, ErrCLIStuck, interruptGrace))
		go s.Close()
	}
}

// abandon gives up on a turn whose caller stopped waiting: a queued turn is
// dropped, a running one interrupted.
func (s *Session) abandon(ts *turnState) {
	s.mu.Lock()
	for i, t := range s.turns {
		if t != ts || i == 0 && ts.sent {
			continue
		}
		s.turns = append(s.turns[:i:i], s.turns[i+1:]...)
		s.mu.Unlock()
		ts.pending.finish(nil, errors.New("agent: turn abandoned before it started"))
		return
	}
	running := len(s.turns) > 0 && s.turns[0] == ts
	s.mu.Unlock()
	if running {
		go func() {
			ctx, cancel := context.WithTimeout(s.ctx, interruptGrace)
			defer cancel()
			s.control(ctx, "interrupt", nil)
		}()
	}
}

// Interrupt stops the running turn; its Send returns a Turn with subtype
// error_during_execution.
func (s *Session) Interrupt(ctx context.Context) error {
	_, err := s.control(ctx, "interrupt", nil)
	return err
}

// SetModel switches the model for the following requests ("default"
// resets it).
func (s *Session) SetModel(ctx context.Context, model string) error {
	_, err := s.control(ctx, "set_model", map[string]any{"model": model})
	return err
}

// SetPermissionMode changes the permission mode (default, acceptEdits,
// plan, bypassPermissions, dontAsk, ...; the CLI decides which it accepts).
func (s *Session) SetPermissionMode(ctx context.Context, mode string) error {
	_, err := s.control(ctx, "set_permission_mode", map[string]any{"mode": mode})
	return err
}

// Control sends any control request (e.g. "mcp_status", "get_settings")
// and returns the CLI's response payload.
func (s *Session) Control(ctx context.Context, subtype string, fields map[string]any) (json.RawMessage, error) {
	return s.control(ctx, subtype, fields)
}

func (s *Session) control(ctx context.Context, subtype string, fields map[string]any) (json.RawMessage, error) {
	rid := "sous-" + strconv.FormatUint(s.reqSeq.Add(1), 10)
	req := map[string]any{"subtype": subtype}
	for k, v := range fields {
		req[k] = v
	}
	ch := make(chan controlResult, 1)
	s.mu.Lock()
	if s.dead != nil {
		err := s.dead
		s.mu.Unlock()
		return nil, fmt.Errorf("agent: %s: %w", subtype, err)
	}
	s.controls[rid] = ch
	s.mu.Unlock()
	defer func() {
		s.mu.Lock()
		delete(s.controls, rid)
		s.mu.Unlock()
	}()
	s.enqueue(map[string]any{"type": "control_request", "request_id": rid, "request": req}, outMeta{kind: outControl, requestID: rid})
	select {
	case r := <-ch:
		if r.err != nil {
			return nil, fmt.Errorf("agent: %s: %w", subtype, r.err)
		}
		return r.response, nil
	case <-ctx.Done():
		return nil, fmt.Errorf("agent: %s: no answer from the CLI: %w", subtype, ctx.Err())
	}
}

// enqueue hands a message to the writer goroutine, which keeps the order.
func (s *Session) enqueue(v any, meta outMeta) {
	b, err := json.Marshal(v)
	if err != nil {
		// Only a permission callback's UpdatedInput can be unmarshalable
		// here; it is checked before. Anything else is a bug worth a loud
		// failure rather than a silent hang.
		s.fail(fmt.Errorf("agent: encode message: %w", err))
		return
	}
	// Observed and queued under one lock, so the Observer sees outgoing
	// messages in the order they are written.
	s.outMu.Lock()
	defer s.outMu.Unlock()
	s.observe(Event{Dir: Out, Type: typeOf(v), Message: b})
	s.out.push(outbound{line: append(b, '\n'), meta: meta})
}

func typeOf(v any) string {
	if m, ok := v.(map[string]any); ok {
		t, _ := m["type"].(string)
		return t
	}
	return ""
}

func (s *Session) writer() {
	defer close(s.writerDone)
	for {
		o, ok := s.out.pop()
		if !ok {
			return
		}
		if err := s.tr.send(s.ctx, o); err != nil {
			if s.ctx.Err() != nil {
				continue // closing: drain without writing
			}
			s.fail(s.writeError(err))
		}
	}
}

// exitReportWait is how long a failed write waits for the daemon to report
// the CLI's exit.
const exitReportWait = 2 * time.Second

// writeError explains a failed write. Most often the CLI exited (a flag it
// refuses, a crash), and its exit code and stderr say why where the write's
// own error ("Process not running") does not; but the write can fail before
// the daemon reported the exit, so that is waited for a little.
func (s *Session) writeError(err error) error {
	if t, ok := s.tr.(interface{ cli() *cliProc }); ok {
		cp := t.cli()
		select {
		case <-cp.p.Done():
			return cp.exitError()
		case <-time.After(exitReportWait):
		}
	}
	return fmt.Errorf("agent: write to the CLI: %w", err)
}

func (s *Session) observe(e Event) {
	if s.opt.Observer == nil {
		return
	}
	s.obsMu.Lock()
	defer s.obsMu.Unlock()
	s.opt.Observer(e)
}

// deliver is called by transports for each line from the CLI.
func (s *Session) deliver(line []byte) { s.inbox.push(inbound{line: line}) }

// ended is called by transports when the CLI's output ended for good.
func (s *Session) ended(err error) { s.inbox.push(inbound{end: err}) }

// loop dispatches the CLI's messages in order.
func (s *Session) loop() {
	defer close(s.loopDone)
	for {
		in, ok := s.inbox.pop()
		if !ok {
			return
		}
		if in.end != nil {
			s.mu.Lock()
			closing := s.closing
			s.mu.Unlock()
			if closing {
				s.fail(ErrClosed)
			} else {
				s.fail(in.end)
			}
			continue
		}
		s.handle(in.line)
	}
}

// envelope is the part of every message the dispatcher looks at.
type envelope struct {
	Type      string          `json:"type"`
	Subtype   string          `json:"subtype"`
	SessionID string          `json:"session_id"`
	RequestID string          `json:"request_id"`
	Request   json.RawMessage `json:"request"`
	Response  json.RawMessage `json:"response"`
}

func (s *Session) handle(line []byte) {
	var env envelope
	if err := json.Unmarshal(line, &env); err != nil || env.Type == "" {
		// Not a protocol message (a stray print from the CLI or a tool):
		// keep it where error messages will show it, never fail on it.
		if t, ok := s.tr.(interface{ note(string) }); ok {
			t.note("stdout: " + string(line))
		}
		q, _ := json.Marshal(string(line))
		s.observe(Event{Dir: In, Message: q})
		return
	}
	msg := json.RawMessage(line)
	s.observe(Event{Dir: In, Type: env.Type, Message: msg})
	if env.Type == "keep_alive" {
		return
	}
	s.mu.Lock()
	if env.SessionID != "" && (env.Type == "system" || s.id == "") {
		s.id = env.SessionID
	}
	var cur *turnState
	if len(s.turns) > 0 && s.turns[0].sent {
		cur = s.turns[0]
	}
	switch {
	case cur != nil:
		cur.msgs = append(cur.msgs, msg)
	case env.Type != "control_response":
		// Between turns: kept for the next turn, except the answers to
		// sous's own control requests, which belong to no turn. Bounded,
		// so a CLI chattering while idle cannot grow memory.
		if len(s.stray) >= maxStray {
			s.stray = append(s.stray[:0], s.stray[1:]...)
		}
		s.stray = append(s.stray, msg)
	}
	s.mu.Unlock()

	switch env.Type {
	case "control_request":
		s.controlRequest(env, cur)
	case "control_response":
		s.controlResponse(env.Response)
	case "control_cancel_request":
		s.mu.Lock()
		ps := s.perms[env.RequestID]
		delete(s.perms, env.RequestID)
		s.mu.Unlock()
		if ps != nil {
			ps.cancel()
		}
	case "result":
		s.result(line)
	case "user":
		s.maybeInterrupt(line)
	}
}

// maybeInterrupt interrupts the turn when a tool result arrives for a tool
// use whose permission callback failed.
func (s *Session) maybeInterrupt(line []byte) {
	s.mu.Lock()
	want := len(s.interruptAfter) > 0
	s.mu.Unlock()
	if !want {
		return
	}
	var m struct {
		Message struct {
			Content json.RawMessage `json:"content"`
		} `json:"message"`
	}
	json.Unmarshal(line, &m)
	var blocks []struct {
		Type      string `json:"type"`
		ToolUseID string `json:"tool_use_id"`
	}
	json.Unmarshal(m.Message.Content, &blocks)
	hit := false
	s.mu.Lock()
	for _, b := range blocks {
		if b.Type == "tool_result" && s.interruptAfter[b.ToolUseID] {
			delete(s.interruptAfter, b.ToolUseID)
			hit = true
		}
	}
	s.mu.Unlock()
	if hit {
		go func() {
			ctx, cancel := context.WithTimeout(s.ctx, interruptGrace)
			defer cancel()
			s.control(ctx, "interrupt", nil)
		}()
	}
}

func (s *Session) controlResponse(raw json.RawMessage) {
	var r struct {
		Subtype   string          `json:"subtype"`
		RequestID string          `json:"request_id"`
		Response  json.RawMessage `json:"response"`
		Error     string          `json:"error"`
	}
	if json.Unmarshal(raw, &r) != nil {
		return
	}
	s.mu.Lock()
	ch := s.controls[r.RequestID]
	delete(s.controls, r.RequestID)
	s.mu.Unlock()
	if ch == nil {
		return // an answer nobody waits for any more
	}
	if r.Subtype == "error" {
		msg := r.Error
		if msg == "" {
			msg = "the CLI answered with an error"
		}
		ch <- controlResult{err: errors.New(msg)}
		return
	}
	ch <- controlResult{response: r.Response}
}

// controlRequest answers the CLI's own control requests: tool permissions go
// to the callback; anything else gets an error response so the CLI never
// waits on sous for something it cannot do.
func (s *Session) controlRequest(env envelope, cur *turnState) {
	var req struct {
		Subtype     string          `json:"subtype"`
		ToolName    string          `json:"tool_name"`
		Input       map[string]any  `json:"input"`
		ToolUseID   string          `json:"tool_use_id"`
		Description string          `json:"description"`
		Suggestions json.RawMessage `json:"permission_suggestions"`
	}
	json.Unmarshal(env.Request, &req)
	if req.Subtype != "can_use_tool" {
		s.enqueue(map[string]any{"type": "control_response", "response": map[string]any{
			"subtype": "error", "request_id": env.RequestID,
			"error": fmt.Sprintf("sous does not handle control request %q", req.Subtype),
		}}, outMeta{kind: outAnswer, requestID: env.RequestID})
		return
	}
	if req.Input == nil {
		req.Input = map[string]any{}
	}
	s.permSeq++
	pr := Request{
		Kind: "tool", Tool: req.ToolName, Input: req.Input, ToolUseID: req.ToolUseID,
		Description: req.Description, SessionID: s.ID(), Suggestions: req.Suggestions,
		RequestID: env.RequestID, Raw: env.Request, Seq: s.permSeq,
	}
	ctx, cancel := context.WithCancel(s.ctx)
	s.mu.Lock()
	s.perms[env.RequestID] = &permState{cancel: cancel, turn: cur}
	s.mu.Unlock()
	go func() {
		defer cancel()
		d, err := s.decide(ctx, pr)
		s.mu.Lock()
		_, live := s.perms[env.RequestID]
		delete(s.perms, env.RequestID)
		// A callback that fails because the CLI withdrew its request
		// (the turn was interrupted, or the CLI moved on) fails nothing:
		// nobody waits for that answer.
		if err != nil && cur != nil && live {
			cur.errs = append(cur.errs, err)
		}
		s.mu.Unlock()
		s.observe(Event{Dir: Out, Type: "permission", Request: &pr, Decision: &d, Err: err})
		if !live {
			return // the CLI withdrew the request: it wants no answer
		}
		resp := map[string]any{"behavior": d.Behavior, "toolUseID": pr.ToolUseID}
		if d.Behavior == "allow" {
			in := d.UpdatedInput
			if in == nil {
				in = pr.Input
			}
			resp["updatedInput"] = in
			if len(d.UpdatedPermissions) > 0 {
				resp["updatedPermissions"] = d.UpdatedPermissions
			}
		} else {
			resp["message"] = d.Message
			if d.Interrupt {
				resp["interrupt"] = true
			}
		}
		s.enqueue(map[string]any{"type": "control_response", "response": map[string]any{
			"subtype": "success", "request_id": env.RequestID, "response": resp,
		}}, outMeta{kind: outAnswer, requestID: env.RequestID, toolUseID: pr.ToolUseID})
		if err != nil {
			// Stop the turn so the failure surfaces now, but only once the
			// deny has become the tool's result: an interrupt that overtakes
			// it (the CLI reads control requests eagerly) or a deny with
			// interrupt:true makes the CLI replace the message with its
			// stock "user doesn't want to proceed" text.
			s.mu.Lock()
			if s.interruptAfter == nil {
				s.interruptAfter = make(map[string]bool)
			}
			s.interruptAfter[pr.ToolUseID] = true
			s.mu.Unlock()
		}
	}()
}

// decide runs the permission callback and turns every failure into a deny:
// a request must never be left unanswered.
func (s *Session) decide(ctx context.Context, req Request) (d Decision, err error) {
	if s.opt.Permission == nil {
		return Deny("no approver allowed this request", false), nil
	}
	defer func() {
		if r := recover(); r != nil {
			err = fmt.Errorf("permission callback panicked: %v", r)
		}
		if err != nil {
			d = Deny(fmt.Sprintf("sous could not decide on this tool use: %v", err), false)
			err = fmt.Errorf("agent: permission for %s (%s): %w", req.Tool, req.ToolUseID, err)
		}
	}()
	d, err = s.opt.Permission(ctx, req)
	if err != nil {
		return d, err
	}
	switch d.Behavior {
	case "allow":
		if d.UpdatedInput != nil {
			if _, merr := json.Marshal(d.UpdatedInput); merr != nil {
				return d, fmt.Errorf("updated input: %w", merr)
			}
		}
	case "deny":
		if d.Message == "" {
			d.Message = "denied"
		}
	default:
		return d, fmt.Errorf("decision behavior %q: want \"allow\" or \"deny\"", d.Behavior)
	}
	return d, nil
}

// result ends the running turn.
func (s *Session) result(line []byte) {
	var r struct {
		Subtype      string          `json:"subtype"`
		IsError      bool            `json:"is_error"`
		Result       *string         `json:"result"`
		TotalCostUSD float64         `json:"total_cost_usd"`
		NumTurns     int             `json:"num_turns"`
		DurationMs   int64           `json:"duration_ms"`
		SessionID    string          `json:"session_id"`
		Usage        map[string]any  `json:"usage"`
		Errors       json.RawMessage `json:"errors"`
		Denials      []struct {
			ToolName  string         `json:"tool_name"`
			ToolUseID string         `json:"tool_use_id"`
			ToolInput map[string]any `json:"tool_input"`
		} `json:"permission_denials"`
	}
	if err := json.Unmarshal(line, &r); err != nil {
		s.fail(fmt.Errorf("agent: malformed result message: %w", err))
		return
	}
	s.mu.Lock()
	if len(s.turns) == 0 || !s.turns[0].sent {
		s.mu.Unlock()
		return // a result for no turn of ours (kept in stray)
	}
	ts := s.turns[0]
	s.turns = s.turns[1:]
	var next *turnState
	if len(s.turns) > 0 {
		next = s.turns[0]
	}
	msgs := ts.msgs
	if len(s.stray) > 0 {
		msgs = append(s.stray, msgs...)
		s.stray = nil
	}
	errs := ts.errs
	timedOut := ts.timeout
	s.mu.Unlock()
	if ts.timer != nil {
		ts.timer.Stop()
	}

	t := &Turn{
		Subtype: r.Subtype, IsError: r.IsError, CostUSD: r.TotalCostUSD, NumTurns: r.NumTurns,
		DurationMs: r.DurationMs, SessionID: r.SessionID, Usage: r.Usage, Messages: msgs,
	}
	if r.Result != nil {
		t.Text = *r.Result
	}
	if t.Usage == nil {
		t.Usage = map[string]any{}
	}
	for _, d := range r.Denials {
		t.Denials = append(t.Denials, Denial{Tool: d.ToolName, ToolUseID: d.ToolUseID, Input: d.ToolInput})
	}
	var err error
	switch {
	case timedOut:
		err = fmt.Errorf("agent: %w after %s; the turn was interrupted", ErrTurnTimeout, ts.limit)
	case len(errs) > 0:
		err = errors.Join(errs...)
	}
	ts.pending.finish(t, err)
	if next != nil {
		s.sendTurn(next)
	}
}

// fail ends the session's usefulness: every waiter gets err.
func (s *Session) fail(err error) {
	s.mu.Lock()
	if s.dead != nil {
		s.mu.Unlock()
		return
	}
	s.dead = err
	turns := s.turns
	s.turns = nil
	controls := s.controls
	s.controls = make(map[string]chan controlResult)
	s.mu.Unlock()
	s.cancel()
	for _, ts := range turns {
		if ts.timer != nil {
			ts.timer.Stop()
		}
		ts.pending.finish(nil, err)
	}
	for _, ch := range controls {
		ch <- controlResult{err: err}
	}
}

// Close ends the CLI and its whole process tree (SIGTERM to the group, then
// SIGKILL after 3 s) and fails whatever still waits on the session. It is
// safe to call more than once.
func (s *Session) Close() error {
	s.closeOnce.Do(func() {
		s.mu.Lock()
		s.closing = true
		s.mu.Unlock()
		s.cancel()
		s.closeErr = s.tr.stop()
		s.fail(ErrClosed)
		s.inbox.close()
		s.out.close()
		<-s.loopDone
		<-s.writerDone
		// Permission callbacks are not waited for: their ctx is cancelled,
		// and one that ignores it must not keep Close (often called from
		// the very thread the callback waits for) from returning.
	})
	return s.closeErr
}
