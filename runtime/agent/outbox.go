package agent

import (
	"encoding/json"
	"fmt"
	"time"
)

// exitReportWait is how long a failed write waits for the daemon to report
// the CLI's exit.
const exitReportWait = 2 * time.Second

// enqueue hands a message to the writer goroutine, which keeps the order.
// meta tells the transport what settles it (see outKind).
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

// writer writes the queued messages to the transport, one at a time.
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

// writeError explains a failed write. Most often the CLI exited (a flag it
// refuses, a crash), and its exit code and stderr say why where the write's
// own error ("Process not running") does not; but the write can fail before
// the daemon reported the exit, so that is waited for a little.
func (s *Session) writeError(err error) error {
	if exit := s.tr.waitExit(exitReportWait); exit != nil {
		return exit
	}
	return fmt.Errorf("agent: write to the CLI: %w", err)
}
