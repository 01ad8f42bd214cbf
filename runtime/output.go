package runtime

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"sync"
	"time"
	"unicode/utf8"
)

// output writes everything a run says: the recipe's log, its processes'
// echo, its errors and, in --json mode, the event stream. One mutex orders
// every write, so lines never interleave mid-line and, in --json mode,
// stdout carries whole JSON objects only.
type output struct {
	stdout, stderr io.Writer
	json           bool
	now            func() time.Time

	mu      sync.Mutex
	echoing int // processes echoing now
	// prefixed turns on "[id] " prefixes once a second process echoes
	// while another does, and keeps them on for the rest of the run: a
	// process's lines must not lose their id because another ended, nor
	// a reader have to guess which process a bare line came from.
	prefixed bool
	closed   bool // the end event is out; anything later is dropped
	buf      []byte
}

var _ Output = (*output)(nil)

func newOutput(stdout, stderr io.Writer, jsonMode bool) *output {
	return &output{stdout: stdout, stderr: stderr, json: jsonMode, now: time.Now}
}

// field is one member of an event after "event" and "time".
type field struct {
	key   string
	value any
}

// appendEvent appends one JSON event line. Members come in a fixed order,
// "event" and "time" first, so the stream is easy to read and to diff.
func (o *output) appendEvent(b []byte, name string, fields ...field) []byte {
	b = append(b, `{"event":`...)
	b = appendJSON(b, name)
	b = append(b, `,"time":`...)
	b = appendJSON(b, o.now().Format(timeFormat))
	for _, f := range fields {
		b = append(b, ',')
		b = appendJSON(b, f.key)
		b = append(b, ':')
		b = appendJSON(b, f.value)
	}
	return append(b, "}\n"...)
}

// timeFormat is RFC 3339 with milliseconds.
const timeFormat = "2006-01-02T15:04:05.000Z07:00"

// appendJSON appends v's JSON without HTML escaping (output is text for
// people and programs, not for a web page). Strings that are not UTF-8
// have their bad bytes replaced, as encoding/json does.
func appendJSON(b []byte, v any) []byte {
	if s, ok := v.(string); ok {
		return appendJSONString(b, s) // the hot path: output event data
	}
	var buf bytes.Buffer
	enc := json.NewEncoder(&buf)
	enc.SetEscapeHTML(false)
	if err := enc.Encode(v); err != nil {
		// Only values this file builds reach here; they always encode.
		panic(err)
	}
	return append(b, bytes.TrimSuffix(buf.Bytes(), []byte{'\n'})...)
}

const hexDigits = "0123456789abcdef"

// appendJSONString appends s as a JSON string in one pass, without
// allocating; bytes that are not UTF-8 become U+FFFD, as with encoding/json.
func appendJSONString(b []byte, s string) []byte {
	b = append(b, '"')
	start := 0
	for i := 0; i < len(s); {
		c := s[i]
		if c < utf8.RuneSelf {
			if c >= 0x20 && c != '"' && c != '\\' {
				i++
				continue
			}
			b = append(b, s[start:i]...)
			switch c {
			case '"', '\\':
				b = append(b, '\\', c)
			case '\n':
				b = append(b, '\\', 'n')
			case '\r':
				b = append(b, '\\', 'r')
			case '\t':
				b = append(b, '\\', 't')
			default:
				b = append(b, '\\', 'u', '0', '0', hexDigits[c>>4], hexDigits[c&0xf])
			}
			i++
			start = i
			continue
		}
		r, size := utf8.DecodeRuneInString(s[i:])
		if r == utf8.RuneError && size == 1 {
			b = append(b, s[start:i]...)
			b = append(b, `\ufffd`...)
			i++
			start = i
			continue
		}
		i += size
	}
	b = append(b, s[start:]...)
	return append(b, '"')
}

// event writes one event in --json mode.
func (o *output) event(name string, fields ...field) {
	o.mu.Lock()
	defer o.mu.Unlock()
	if o.closed || !o.json {
		return
	}
	o.buf = o.appendEvent(o.buf[:0], name, fields...)
	o.stdout.Write(o.buf)
}

// start opens the run: the first line of the event stream.
func (o *output) start(recipe string, args map[string]string) {
	if args == nil {
		args = map[string]string{}
	}
	o.event("start", field{"recipe", recipe}, field{"args", args})
}

// end closes the run: the last line of the event stream. errText is empty
// when the recipe finished.
func (o *output) end(status string, exitCode int, errText string) {
	var errValue any
	if errText != "" {
		errValue = errText
	}
	o.event("end", field{"status", status}, field{"exit_code", exitCode}, field{"error", errValue})
	o.mu.Lock()
	o.closed = true
	o.mu.Unlock()
}

// Log is the recipe's print: a line on stderr, or a log event.
func (o *output) Log(text string) {
	if o.json {
		o.event("log", field{"text", text})
		return
	}
	o.line(text)
}

// Error writes an error report to stderr, in both modes.
func (o *output) Error(text string) { o.line(text) }

// Failure reports, in one line, something that failed without stopping the
// run (a deferred call): on stderr in both modes, and as a log event in
// --json mode, where stdout is all a reader may see.
func (o *output) Failure(text string) {
	o.line(text)
	o.event("log", field{"text", text})
}

// line writes text and a newline to stderr.
func (o *output) line(text string) {
	o.mu.Lock()
	defer o.mu.Unlock()
	o.buf = append(append(o.buf[:0], text...), '\n')
	o.stderr.Write(o.buf)
}

// Spawned implements Output.
func (o *output) Spawned(info SpawnInfo) {
	fields := []field{{"id", info.ID}, {"command", info.Command}, {"host", info.Host}}
	if info.Pid != 0 {
		fields = append(fields, field{"pid", info.Pid})
	}
	if info.Reattached {
		fields = append(fields, field{"reattached", true})
	}
	if info.Lost > 0 {
		fields = append(fields, field{"lost_frames", info.Lost})
		if !o.json {
			// Otherwise silent: the recipe would read an output that starts
			// in the middle as if it were all of it.
			why := ""
			if info.Host == "embedded" {
				why = " (sous run's own daemon keeps the newest 4 MiB of each process's output; `sous daemon` spills the rest to disk)"
			}
			o.line(fmt.Sprintf("sous: reattach %s: the daemon no longer had %d frames of the output asked for; the replay starts after them%s",
				info.ID, info.Lost, why))
		}
	}
	o.event("spawn", fields...)
}

// Exited implements Output.
func (o *output) Exited(id string, exitCode int) {
	o.event("exit", field{"id", id}, field{"exit_code", exitCode})
}

// Echo implements Output.
func (o *output) Echo(id string) Echo {
	o.mu.Lock()
	defer o.mu.Unlock()
	o.echoing++
	if o.echoing > 1 {
		o.prefixed = true
	}
	return &echo{o: o, id: id}
}

// Agent implements Output: in --json mode, an agent event carrying
// the protocol message as it is. Human output leaves the protocol out (a
// recipe prints what it wants from the Turn).
func (o *output) Agent(session, dir string, message json.RawMessage) {
	if !o.json || !json.Valid(message) {
		return // the engine only hands on JSON; anything else would break the stream
	}
	o.event("agent", field{"session", session}, field{"dir", dir}, field{"message", message})
}

// Approval implements Output: an approval event, or one line on
// stderr such as
//
//	approval: deny Bash rm -rf /tmp/x (by default: no approver allowed this request) [session 1a2b3c4d]
func (o *output) Approval(a ApprovalInfo) {
	decision := "deny"
	if a.Allow {
		decision = "allow"
	}
	if o.json {
		fields := []field{{"session", nullable(a.Session)}, {"tool", a.Tool}, {"decision", decision}, {"by", a.By},
			{"kind", a.Kind}, {"tool_use_id", a.ToolUseID}, {"summary", a.Summary}}
		if !a.Allow {
			fields = append(fields, field{"message", a.Message})
		}
		o.event("approval", fields...)
		return
	}
	line := "approval: " + decision + " " + a.Tool
	if a.Summary != "" {
		line += " " + a.Summary
	}
	line += " (by " + a.By
	if !a.Allow && a.Message != "" {
		line += ": " + a.Message
	}
	line += ")" + sessionTag(a.Session)
	// The summary and the message come from the request: escaped, they
	// cannot redraw the terminal's lines.
	o.Error(visible(line))
}

// Hook implements Output: a hook event, or, when the hook gave an
// answer, one line on stderr in the approval line's style, such as
//
//	hook: PreToolUse deny Bash rm -rf /tmp/x (no deleting here) [session 1a2b3c4d]
//
// A hook without an opinion shows only as an event. The event's
// "hook_event" names the hook event ("event" is the line's own kind).
func (o *output) Hook(h HookInfo) {
	if o.json {
		var output any // null: no opinion
		if len(h.Output) > 0 && json.Valid(h.Output) {
			output = h.Output
		}
		fields := []field{{"session", nullable(h.Session)}, {"hook_event", h.Event}}
		if h.Tool != "" {
			fields = append(fields, field{"tool", h.Tool}, field{"tool_use_id", h.ToolUseID}, field{"summary", h.Summary})
		}
		o.event("hook", append(fields, field{"output", output})...)
		return
	}
	if len(h.Output) == 0 {
		return
	}
	verdict, why := hookVerdict(h.Output)
	line := "hook: " + h.Event + " " + verdict
	if h.Tool != "" {
		line += " " + h.Tool
		if h.Summary != "" {
			line += " " + h.Summary
		}
	}
	if why != "" {
		line += " (" + why + ")"
	}
	o.Error(visible(line + sessionTag(h.Session)))
}

// Tool implements Output: a tool event, or one line on stderr such as
//
//	tool: mcp__sous__add ok [session 1a2b3c4d]
func (o *output) Tool(session, tool string, ok bool) {
	if o.json {
		o.event("tool", field{"session", nullable(session)}, field{"tool", tool}, field{"ok", ok})
		return
	}
	verdict := " ok"
	if !ok {
		verdict = " error"
	}
	o.Error(visible("tool: " + tool + verdict + sessionTag(session)))
}

// nullable is s, or JSON null for "".
func nullable(s string) any {
	if s == "" {
		return nil
	}
	return s
}

// sessionTag is " [session 1a2b3c4d]" (the id's first 8 characters), or ""
// without a session.
func sessionTag(session string) string {
	if session == "" {
		return ""
	}
	if len(session) > 8 {
		session = session[:8]
	}
	return " [session " + session + "]"
}

// Prompt writes text to stderr as it is (no newline added): a question
// whose answer is typed on the same line.
func (o *output) Prompt(text string) {
	o.mu.Lock()
	defer o.mu.Unlock()
	o.buf = append(o.buf[:0], text...)
	o.stderr.Write(o.buf)
}
