package agent

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"sync"
	"sync/atomic"

	"github.com/seed5ad92d46/sous/daemon/client"
)

// maxStray bounds the messages kept between turns.
const maxStray = 256

// Session is one running Claude Code CLI. Its methods are safe for
// concurrent use.
//
// Two goroutines move its messages: loop reads the CLI's lines in order
// (session.go) and writer writes sous's (outbox.go). Everything else runs
// on the caller's goroutine, a turn's timer (turn.go) or a goroutine per
// incoming control request (incoming.go).
type Session struct {
	opt   Options
	tr    transport
	inbox *queue[inbound]
	out   *queue[outbound]
	outMu sync.Mutex // orders enqueue's observe+push
	obsMu sync.Mutex

	ctx    context.Context // cancelled when the session ends: stops incoming request handlers
	cancel context.CancelFunc
	reqSeq atomic.Uint64 // numbers sous's control requests (control.go)
	// permSeq numbers permission requests as they arrive (Request.Seq);
	// only the reader goroutine takes numbers.
	permSeq uint64
	// toolSeq numbers tool calls as they arrive (ToolCall.Seq), on the
	// reader goroutine too.
	toolSeq uint64
	// mcp serves Options.Tools (nil: the session has none).
	mcp *mcpServer
	// hooks are the registered hook callbacks (hooks.go); hookSeq numbers
	// hook calls as permSeq numbers permission requests.
	hooks   hookRegistry
	hookSeq uint64

	mu       sync.Mutex
	id       string
	turns    []*turnState // FIFO; turns[0] has been sent once sent is set
	stray    []json.RawMessage
	controls map[string]pendingControl   // sous's control requests awaiting their response
	incoming map[string]*incomingRequest // the CLI's control requests being answered
	dead     error                       // why the session no longer works
	// interruptAfter holds the tool uses whose tool_result should be
	// followed by an interrupt (a failed permission callback).
	interruptAfter map[string]bool
	closing        bool
	// info is the CLI's answer to initialize; version its
	// claude_code_version, from that answer (recent CLIs) or system/init
	// (info.go).
	info    json.RawMessage
	version string

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

// Start launches the CLI on the daemon c and returns once it answered the
// initialize request. The session must be closed.
func Start(ctx context.Context, c *client.Client, opt Options) (*Session, error) {
	opt, err := opt.prepare(c.Local())
	if err != nil {
		return nil, err
	}
	s := &Session{
		opt:        opt,
		id:         opt.knownID(),
		hooks:      registerHooks(opt.Hooks),
		inbox:      newQueue[inbound](),
		out:        newQueue[outbound](),
		controls:   make(map[string]pendingControl),
		incoming:   make(map[string]*incomingRequest),
		loopDone:   make(chan struct{}),
		writerDone: make(chan struct{}),
	}
	if len(opt.Tools) > 0 {
		s.mcp = &mcpServer{tools: opt.Tools}
	}
	s.ctx, s.cancel = context.WithCancel(context.Background())

	sctx, cancel := context.WithTimeout(ctx, opt.StartTimeout)
	defer cancel()
	l := launch{
		client: c, cli: opt.CLI, args: buildArgs(opt), cwd: opt.Cwd, env: opt.Env,
		processID: opt.ProcessID, to: s,
	}
	s.tr, err = startTransport(sctx, opt.Transport, l)
	if err != nil {
		s.cancel()
		return nil, err
	}
	go s.loop()
	go s.writer()

	info, err := s.control(sctx, "initialize", initializeRequest(opt, s.hooks.config))
	if err != nil {
		return nil, s.startFailed(err)
	}
	var v struct {
		Version string `json:"claude_code_version"`
	}
	json.Unmarshal(info, &v) // recent CLIs say their version here
	s.mu.Lock()
	s.info = info
	if s.version == "" {
		s.version = v.Version
	}
	s.mu.Unlock()
	if missing := agentsNotTaken(opt.Agents, info); len(missing) > 0 {
		version := s.Version()
		if version == "" {
			version = cliVersion(l) // 2.1.81 says it only in system/init
		}
		s.Close()
		return nil, fmt.Errorf("agent: start %s: Claude Code %s did not take the subagents %s of initialize (its answer does not list them): "+
			"subagents need a CLI that reads them there, as 2.1.81 and later do", strings.Join(opt.CLI, " "), version, strings.Join(missing, ", "))
	}
	return s, nil
}

// startFailed ends a session whose CLI never answered initialize and says
// why as well as can be known.
func (s *Session) startFailed(err error) error {
	// What a CLI that never answered printed instead (a wrong program, a
	// banner, a crash trace) is the best clue to why; gone, its exit error
	// already carries it.
	var said string
	if !errors.Is(err, ErrCLIExited) {
		said = s.tr.output()
	}
	s.Close()
	err = s.tr.explainStartFailure(err)
	if said != "" {
		err = fmt.Errorf("%w; its output: %s", err, said)
	}
	return fmt.Errorf("agent: start %s: %w", strings.Join(s.opt.CLI, " "), err)
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

// deliver is called by the transport for each line from the CLI.
func (s *Session) deliver(line []byte) { s.inbox.push(inbound{line: line}) }

// ended is called by the transport when the CLI's output ended for good.
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

// handle files one message from the CLI with the running turn (or as stray
// between turns) and passes it to what acts on its type.
func (s *Session) handle(line []byte) {
	var env envelope
	if err := json.Unmarshal(line, &env); err != nil || env.Type == "" {
		// Not a protocol message (a stray print from the CLI or a tool):
		// keep it where error messages will show it, never fail on it.
		s.tr.note("stdout: " + string(line))
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
	if env.Type == "system" && env.Version != "" {
		s.version = env.Version
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
		s.incomingControl(env, cur) // incoming.go
	case "control_response":
		s.controlResponse(env.Response) // control.go
	case "control_cancel_request":
		s.cancelIncoming(env.RequestID) // incoming.go
	case "result":
		s.result(line) // turn.go
	case "user":
		s.maybeInterrupt(line) // permission.go
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
	s.controls = make(map[string]pendingControl)
	s.mu.Unlock()
	s.cancel()
	for _, ts := range turns {
		if ts.timer != nil {
			ts.timer.Stop()
		}
		ts.pending.finish(nil, err)
	}
	for _, pc := range controls {
		pc.ch <- controlResult{err: err}
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
		// Incoming request handlers (permission callbacks) are not waited
		// for: their ctx is cancelled, and one that ignores it must not
		// keep Close (often called from the very thread the callback waits
		// for) from returning.
	})
	return s.closeErr
}

// StdinApplied is how many bytes of the CLI's stdin the daemon had
// applied after sous's last write (stdio transport; -1 for another): a
// resumed durable run compares it with what the daemon reports to tell
// whether a prompt reached a CLI it lost.
func (s *Session) StdinApplied() int64 {
	if t, ok := s.tr.(interface{ stdinApplied() int64 }); ok {
		return t.stdinApplied()
	}
	return -1
}
