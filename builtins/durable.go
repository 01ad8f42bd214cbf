package builtins

import (
	"encoding/base64"
	"encoding/json"
	"fmt"
	"strconv"
	"time"

	starlarktime "go.starlark.net/lib/time"
	"go.starlark.net/starlark"
	"go.starlark.net/starlarkstruct"

	"github.com/seed5ad92d46/sous/daemon/wire"
	"github.com/seed5ad92d46/sous/runtime"
)

// What the builtins give a durable run's journal (runtime/durable.go):
// how a Result is kept and made again, what a replayed getenv and dotenv
// redact, and a time module whose now() is journaled.

// resultKind names Result values in a journal.
const resultKind = "Result"

var _ runtime.Recordable = (*Result)(nil)

// keptResult is a Result as the journal keeps it. Output is bytes, not
// text: a command may write anything.
type keptResult struct {
	Status          string        `json:"status"`
	ExitCode        int           `json:"exit_code"`
	Stdout          []byte        `json:"stdout,omitempty"`
	Stderr          []byte        `json:"stderr,omitempty"`
	StdoutTruncated bool          `json:"stdout_truncated,omitempty"`
	StderrTruncated bool          `json:"stderr_truncated,omitempty"`
	Stages          []keptStage   `json:"stages,omitempty"`
	Duration        time.Duration `json:"duration"`
	Timeout         time.Duration `json:"timeout,omitempty"`
	Signal          int           `json:"signal,omitempty"`
}

type keptStage struct {
	ExitCode int    `json:"exit_code"`
	Stderr   []byte `json:"stderr,omitempty"`
}

// Record implements runtime.Recordable.
func (r *Result) Record() (string, any, error) {
	k := keptResult{Status: r.status, ExitCode: r.exitCode, Stdout: []byte(r.stdout), Stderr: []byte(r.stderr),
		StdoutTruncated: r.stdoutTruncated, StderrTruncated: r.stderrTruncated, Duration: r.duration,
		Timeout: r.timeout, Signal: r.signal}
	for _, s := range r.stages {
		k.Stages = append(k.Stages, keptStage{ExitCode: s.ExitCode, Stderr: []byte(s.Stderr)})
	}
	return resultKind, k.appendJSON(nil), nil
}

// appendJSON appends k as json.Marshal encodes it, byte for byte: every
// run() of a durable run keeps its Result, and encoding/json's reflection
// cost the runner more than the rest of the record
// (TestKeptResultJSONMatchesEncodingJSON).
func (k *keptResult) appendJSON(dst []byte) json.RawMessage {
	dst = append(dst, `{"status":`...)
	dst = wire.AppendJSONString(dst, k.Status)
	dst = append(dst, `,"exit_code":`...)
	dst = strconv.AppendInt(dst, int64(k.ExitCode), 10)
	dst = appendBytesField(dst, `,"stdout":"`, k.Stdout)
	dst = appendBytesField(dst, `,"stderr":"`, k.Stderr)
	if k.StdoutTruncated {
		dst = append(dst, `,"stdout_truncated":true`...)
	}
	if k.StderrTruncated {
		dst = append(dst, `,"stderr_truncated":true`...)
	}
	if len(k.Stages) > 0 {
		dst = append(dst, `,"stages":[`...)
		for i, st := range k.Stages {
			if i > 0 {
				dst = append(dst, ',')
			}
			dst = append(dst, `{"exit_code":`...)
			dst = strconv.AppendInt(dst, int64(st.ExitCode), 10)
			dst = appendBytesField(dst, `,"stderr":"`, st.Stderr)
			dst = append(dst, '}')
		}
		dst = append(dst, ']')
	}
	dst = append(dst, `,"duration":`...)
	dst = strconv.AppendInt(dst, int64(k.Duration), 10)
	if k.Timeout != 0 {
		dst = append(dst, `,"timeout":`...)
		dst = strconv.AppendInt(dst, int64(k.Timeout), 10)
	}
	if k.Signal != 0 {
		dst = append(dst, `,"signal":`...)
		dst = strconv.AppendInt(dst, int64(k.Signal), 10)
	}
	return append(dst, '}')
}

// appendBytesField appends key (which opens the string) and b in base64,
// as encoding/json writes a []byte, unless b is empty (omitempty).
func appendBytesField(dst []byte, key string, b []byte) []byte {
	if len(b) == 0 {
		return dst
	}
	dst = append(dst, key...)
	dst = base64.StdEncoding.AppendEncode(dst, b)
	return append(dst, '"')
}

// decodeResult is the Decoder of Result values.
func decodeResult(env *runtime.Env, data json.RawMessage) (starlark.Value, error) {
	var k keptResult
	if err := json.Unmarshal(data, &k); err != nil {
		return nil, fmt.Errorf("a Result: %w", err)
	}
	r := &Result{env: env, status: k.Status, exitCode: k.ExitCode, stdout: string(k.Stdout), stderr: string(k.Stderr),
		stdoutTruncated: k.StdoutTruncated, stderrTruncated: k.StderrTruncated, duration: k.Duration,
		timeout: k.Timeout, signal: k.Signal}
	for _, s := range k.Stages {
		r.stages = append(r.stages, Stage{ExitCode: s.ExitCode, Stderr: string(s.Stderr)})
	}
	return r, nil
}

// getenvReplayed redacts what a replayed getenv(secret=True) returns, as
// the call did.
func getenvReplayed(c *runtime.Call, v starlark.Value) {
	if s, ok := v.(starlark.String); ok && kwargTrue(c, "secret") {
		c.Env.Output.Redact(string(s))
	}
}

// dotenvReplayed redacts the values of a replayed dotenv, unless it was
// called with secret=False.
func dotenvReplayed(c *runtime.Call, v starlark.Value) {
	d, ok := v.(*starlark.Dict)
	if !ok || kwargFalse(c, "secret") {
		return
	}
	for _, item := range d.Items() {
		if s, ok := item[1].(starlark.String); ok {
			c.Env.Output.Redact(string(s))
		}
	}
}

func kwargTrue(c *runtime.Call, name string) bool {
	for _, kw := range c.Kwargs {
		if string(kw[0].(starlark.String)) == name {
			return bool(kw[1].Truth())
		}
	}
	return false
}

func kwargFalse(c *runtime.Call, name string) bool {
	for _, kw := range c.Kwargs {
		if string(kw[0].(starlark.String)) == name {
			return !bool(kw[1].Truth())
		}
	}
	return false
}

// timeModule is go.starlark.net's time module with a now() that a
// durable run journals: a resumed run reads the clock it read.
func timeModule(env *runtime.Env) starlark.Value {
	members := make(starlark.StringDict, len(starlarktime.Module.Members))
	for name, v := range starlarktime.Module.Members {
		members[name] = v
	}
	now := members["now"].(*starlark.Builtin)
	members["now"] = runtime.Journaled(env, &runtime.Entry{Name: "time.now", Journal: runtime.JournalAnswer,
		Fn: func(c *runtime.Call) (starlark.Value, error) {
			return starlark.Call(c.Thread, now, c.Args, c.Kwargs)
		}})
	return &starlarkstruct.Module{Name: "time", Members: members}
}
