package runtime

import (
	"bytes"
	"encoding/base64"
	"encoding/json"
	"io"
	"time"
	"unicode/utf8"

	"github.com/seed5ad92d46/sous/runtime/event"
)

// jsonSink writes the --json stream: one JSON object per line on stdout,
// "event" and "time" first (RECIPES.md, "--json"). Errors and prompts
// still go to stderr as they are.
type jsonSink struct {
	stdout, stderr io.Writer
	state          *event.State // the run so far (the end event's budget)
	buf            []byte
	// The time of the last event, formatted: every line of a chunk of
	// output is an event of the same time.
	lastAt   time.Time
	lastTime []byte
}

// budgetJSON is the end event's budget: what the sessions spent and the
// --max-cost, in dollars.
type budgetJSON struct {
	Spent float64 `json:"spent"`
	Limit float64 `json:"limit"`
}

// lostHostJSON is a parallel event's lost_host: a host taken out of the
// fan-out's pool, why, and how many of its tasks start again elsewhere.
type lostHostJSON struct {
	Host  string `json:"host"`
	Error string `json:"error"`
	Moved int    `json:"moved"`
}

// field is one member of an event after "event" and "time".
type field struct {
	key   string
	value any
}

// Handle implements event.Sink.
func (j *jsonSink) Handle(at time.Time, e event.Event) {
	switch e := e.(type) {
	case *event.Start:
		fields := []field{{"recipe", e.Recipe}, {"args", e.Args}}
		if e.Run != "" {
			fields = append(fields, field{"run", e.Run})
		}
		j.event(at, "start", fields...)
	case *event.Log:
		j.event(at, "log", field{"text", e.Text})
	case *event.Error:
		j.line(e.Text)
	case *event.Failure:
		j.line(e.Text)
		j.event(at, "log", field{"text", e.Text})
	case *event.Prompt:
		j.stderr.Write(append(j.buf[:0], e.Text...))
	case *event.Spawn:
		fields := []field{{"id", e.ID}, {"command", e.Command}, {"host", e.Host}}
		if e.Pid != 0 {
			fields = append(fields, field{"pid", e.Pid})
		}
		if e.Reattached {
			fields = append(fields, field{"reattached", true})
		}
		if e.Lost > 0 {
			fields = append(fields, field{"lost_frames", e.Lost})
		}
		j.event(at, "spawn", fields...)
	case *event.Output:
		j.output(at, e)
	case *event.Exit:
		j.event(at, "exit", field{"id", e.ID}, field{"exit_code", e.ExitCode})
	case *event.Agent:
		if json.Valid(e.Message) { // the engine only hands on JSON; anything else would break the stream
			j.event(at, "agent", field{"session", e.Session}, field{"dir", e.Dir}, field{"message", e.Message})
		}
	case *event.Approval:
		decision := "deny"
		if e.Allow {
			decision = "allow"
		}
		fields := []field{{"session", nullable(e.Session)}, {"tool", e.Tool}, {"decision", decision}, {"by", e.By},
			{"kind", e.Kind}, {"tool_use_id", e.ToolUseID}, {"summary", e.Summary}}
		if !e.Allow {
			fields = append(fields, field{"message", e.Message})
		}
		if e.ID != "" {
			fields = append(fields, field{"id", e.ID})
		}
		j.event(at, "approval", fields...)
	case *event.Pending:
		// Only a request that waits for a person: one a policy decides at
		// once would be noise. Its id is what `sous approvals` answers by.
		if e.ID != "" {
			input := e.Input
			if input == nil {
				input = map[string]any{}
			}
			j.event(at, "pending", field{"id", e.ID}, field{"session", nullable(e.Session)}, field{"tool", e.Tool},
				field{"kind", e.Kind}, field{"tool_use_id", e.ToolUseID}, field{"summary", e.Summary},
				field{"description", e.Description}, field{"input", input})
		}
	case *event.Hook:
		// "hook_event" names the hook event: "event" is the line's own kind.
		var output any // null: no opinion
		if len(e.Output) > 0 && json.Valid(e.Output) {
			output = e.Output
		}
		fields := []field{{"session", nullable(e.Session)}, {"hook_event", e.Event}}
		if e.Tool != "" {
			fields = append(fields, field{"tool", e.Tool}, field{"tool_use_id", e.ToolUseID}, field{"summary", e.Summary})
		}
		j.event(at, "hook", append(fields, field{"output", output})...)
	case *event.Progress:
		fields := []field{{"done", e.Done}, {"running", e.Running}, {"failed", e.Failed},
			{"remaining", e.Remaining}, {"total", e.Total}}
		if l := e.LostHost; l != nil {
			fields = append(fields, field{"lost_host", lostHostJSON{Host: l.Target, Error: l.Error, Moved: l.Moved}})
		}
		j.event(at, "parallel", fields...)
	case *event.Tool:
		j.event(at, "tool", field{"session", nullable(e.Session)}, field{"tool", e.Tool}, field{"ok", e.OK})
	case *event.End:
		var errValue any
		if e.Error != "" {
			errValue = e.Error
		}
		fields := []field{{"status", e.Status}, {"exit_code", e.ExitCode}, {"error", errValue}}
		if j.state != nil && j.state.MaxCost > 0 {
			// What budget() says at the end (sous run --max-cost).
			fields = append(fields, field{"budget", budgetJSON{Spent: j.state.Cost(), Limit: j.state.MaxCost}})
		}
		j.event(at, "end", fields...)
	}
}

// output writes one output event per line of the chunk (and one for a
// piece of a line).
func (j *jsonSink) output(at time.Time, e *event.Output) {
	j.buf = j.buf[:0]
	data := e.Data
	for len(data) > 0 {
		n := bytes.IndexByte(data, '\n') + 1
		if n == 0 {
			n = len(data)
		}
		j.buf = j.appendOutputEvent(j.buf, at, e, data[:n])
		data = data[n:]
	}
	if len(j.buf) > 0 {
		j.stdout.Write(j.buf)
	}
}

func (j *jsonSink) appendOutputEvent(b []byte, at time.Time, e *event.Output, line []byte) []byte {
	b = j.appendHead(b, at, "output")
	b = append(b, `,"id":`...)
	b = appendJSONString(b, e.ID)
	b = append(b, `,"stream":`...)
	b = appendJSONString(b, e.Stream.String())
	b = append(b, `,"data":`...)
	b = appendJSONBytes(b, line)
	if !utf8.Valid(line) {
		// data, a JSON string, cannot hold these bytes: base64 keeps
		// them exactly for whoever needs them.
		b = append(b, `,"base64":"`...)
		b = base64.StdEncoding.AppendEncode(b, line)
		b = append(b, '"')
	}
	return append(b, "}\n"...)
}

// event writes one event line.
func (j *jsonSink) event(at time.Time, name string, fields ...field) {
	b := j.appendHead(j.buf[:0], at, name)
	for _, f := range fields {
		b = append(b, ',')
		b = appendJSON(b, f.key)
		b = append(b, ':')
		b = appendJSON(b, f.value)
	}
	j.buf = append(b, "}\n"...)
	j.stdout.Write(j.buf)
}

// appendHead appends `{"event":NAME,"time":"TIME"`. Members come in a
// fixed order, "event" and "time" first, so the stream is easy to read
// and to diff.
func (j *jsonSink) appendHead(b []byte, at time.Time, name string) []byte {
	if !at.Equal(j.lastAt) || j.lastTime == nil {
		j.lastAt, j.lastTime = at, at.AppendFormat(j.lastTime[:0], timeFormat)
	}
	b = append(b, `{"event":`...)
	b = appendJSONString(b, name)
	b = append(b, `,"time":"`...)
	b = append(b, j.lastTime...)
	return append(b, '"')
}

// line writes text and a newline to stderr.
func (j *jsonSink) line(text string) {
	j.buf = append(append(j.buf[:0], text...), '\n')
	j.stderr.Write(j.buf)
}

// timeFormat is RFC 3339 with milliseconds.
const timeFormat = "2006-01-02T15:04:05.000Z07:00"

// nullable is s, or JSON null for "".
func nullable(s string) any {
	if s == "" {
		return nil
	}
	return s
}

// appendJSON appends v's JSON without HTML escaping (output is text for
// people and programs, not for a web page). Strings that are not UTF-8
// have their bad bytes replaced, as encoding/json does.
func appendJSON(b []byte, v any) []byte {
	if s, ok := v.(string); ok {
		return appendJSONString(b, s)
	}
	var buf bytes.Buffer
	enc := json.NewEncoder(&buf)
	enc.SetEscapeHTML(false)
	if err := enc.Encode(v); err != nil {
		// Only values the sinks build reach here; they always encode.
		panic(err)
	}
	return append(b, bytes.TrimSuffix(buf.Bytes(), []byte{'\n'})...)
}

const hexDigits = "0123456789abcdef"

// appendJSONString appends s as a JSON string in one pass, without
// allocating; bytes that are not UTF-8 become U+FFFD, as with encoding/json.
func appendJSONString(b []byte, s string) []byte { return appendJSONText(b, s) }

// appendJSONBytes is appendJSONString for bytes (output data), without
// making a string of them.
func appendJSONBytes(b []byte, s []byte) []byte { return appendJSONText(b, s) }

func appendJSONText[T string | []byte](b []byte, s T) []byte {
	b = append(b, '"')
	start := 0
	for i := 0; i < len(s); {
		if c := s[i]; c < utf8.RuneSelf {
			if c >= 0x20 && c != '"' && c != '\\' {
				i++
				continue
			}
			b = appendEscaped(append(b, s[start:i]...), c)
			i++
			start = i
			continue
		}
		// At most 4 bytes: for []byte the conversion uses a buffer on the
		// stack, for a string it is no conversion at all.
		r, size := utf8.DecodeRuneInString(string(s[i:min(i+utf8.UTFMax, len(s))]))
		if r == utf8.RuneError && size == 1 {
			b = append(append(b, s[start:i]...), `\ufffd`...)
			i++
			start = i
			continue
		}
		i += size
	}
	return append(append(b, s[start:]...), '"')
}

// appendEscaped appends the JSON escape of an ASCII byte that needs one.
func appendEscaped(b []byte, c byte) []byte {
	switch c {
	case '"', '\\':
		return append(b, '\\', c)
	case '\n':
		return append(b, '\\', 'n')
	case '\r':
		return append(b, '\\', 'r')
	case '\t':
		return append(b, '\\', 't')
	}
	return append(b, '\\', 'u', '0', '0', hexDigits[c>>4], hexDigits[c&0xf])
}
