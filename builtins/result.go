package builtins

import (
	"fmt"
	"strings"
	"syscall"
	"time"

	"go.starlark.net/starlark"
	"go.starlark.net/starlarkstruct"
	"golang.org/x/sys/unix"

	"github.com/seed5ad92d46/sous/runtime"
)

// The statuses of a Result.
const (
	StatusOK      = "ok"
	StatusFailed  = "failed"
	StatusTimeout = "timeout"
	StatusDenied  = "denied"
)

// Result is what a finished command gives: the value of run, sh, pipeline
// and Process.wait. Its attributes come from the "Result.*" entries.
type Result struct {
	env             *runtime.Env
	status          string
	exitCode        int
	stdout, stderr  string
	stdoutTruncated bool
	stderrTruncated bool
	stages          []Stage
	duration        time.Duration
	timeout         time.Duration // the limit that was hit, for status "timeout"
	signal          int           // the signal that ended it, where the daemon says (for messages only)
}

// Stage is one command of a pipeline (a run has one).
type Stage struct {
	ExitCode int
	Stderr   string
}

var _ starlark.HasAttrs = (*Result)(nil)

func (r *Result) String() string {
	return fmt.Sprintf("<Result status=%s exit_code=%d>", r.status, r.exitCode)
}
func (r *Result) Type() string          { return "Result" }
func (r *Result) Freeze()               {} // immutable
func (r *Result) Truth() starlark.Bool  { return starlark.True }
func (r *Result) Hash() (uint32, error) { return 0, fmt.Errorf("unhashable type: Result") }

func (r *Result) Attr(name string) (starlark.Value, error) {
	return r.env.Table.Attr(r.env, "Result", r, nil, name)
}

func (r *Result) AttrNames() []string { return r.env.Table.AttrNames("Result") }

// stageList is Result.stages: a fresh list of struct(exit_code, stderr).
func (r *Result) stageList() starlark.Value {
	l := make([]starlark.Value, len(r.stages))
	for i, s := range r.stages {
		l[i] = starlarkstruct.FromStringDict(starlarkstruct.Default, starlark.StringDict{
			"exit_code": starlark.MakeInt(s.ExitCode),
			"stderr":    starlark.String(s.Stderr),
		})
	}
	return starlark.NewList(l)
}

// stderrTailLines is how much of stderr a failed command's error shows.
const stderrTailLines = 10

// failure describes a command whose status is not ok, for check=True: the
// command, the status and the last lines of stderr.
func (r *Result) failure(cmdline string) string {
	var b strings.Builder
	switch r.status {
	case StatusTimeout:
		fmt.Fprintf(&b, "%s: timed out after %s (status %q)", cmdline, formatSeconds(r.timeout), r.status)
	case StatusDenied:
		fmt.Fprintf(&b, "%s: denied (status %q)", cmdline, r.status)
	default:
		fmt.Fprintf(&b, "%s: exit code %d", cmdline, r.exitCode)
		if r.signal > 0 {
			fmt.Fprintf(&b, ", killed by %s", unix.SignalName(syscall.Signal(r.signal)))
		}
		fmt.Fprintf(&b, " (status %q)", r.status)
		for i, s := range r.stages {
			if len(r.stages) > 1 && s.ExitCode != 0 {
				fmt.Fprintf(&b, "; stage %d exit code %d", i+1, s.ExitCode)
			}
		}
	}
	stderr := r.stderr
	if len(r.stages) > 1 {
		// The failing stage's stderr says more than the last stage's.
		for _, s := range r.stages {
			if s.ExitCode != 0 && s.Stderr != "" {
				stderr = s.Stderr
				break
			}
		}
	}
	if tail := lastLines(stderr, stderrTailLines); tail != "" {
		b.WriteString("\nlast lines of stderr:\n")
		b.WriteString(tail)
	}
	return b.String()
}

// lastLines returns the last n lines of s, each indented, without a final
// newline.
func lastLines(s string, n int) string {
	s = strings.TrimRight(s, "\n")
	if s == "" {
		return ""
	}
	lines := strings.Split(s, "\n")
	if len(lines) > n {
		lines = lines[len(lines)-n:]
	}
	return "    " + strings.Join(lines, "\n    ")
}

// formatSeconds prints a duration as recipes give them: in seconds.
func formatSeconds(d time.Duration) string {
	return fmt.Sprintf("%gs", d.Round(time.Millisecond).Seconds())
}

func resultEntries() []runtime.Entry {
	return []runtime.Entry{
		{Name: "Result", Sig: "Result", Doc: "What a finished command gives: the value of run, sh, pipeline and Process.wait."},
		{Name: "Result.status", Sig: "Result.status -> string",
			Doc:  `"ok", "failed" (a non-zero exit), "timeout" or "denied".`,
			Attr: attr(func(r *Result) starlark.Value { return starlark.String(r.status) })},
		{Name: "Result.ok", Sig: "Result.ok -> bool", Doc: `Whether status is "ok".`,
			Attr: attr(func(r *Result) starlark.Value { return starlark.Bool(r.status == StatusOK) })},
		{Name: "Result.exit_code", Sig: "Result.exit_code -> int",
			Doc: "The exit code; -1 when a signal ended the process. For a pipeline, the last stage's code as a shell " +
				"reports it ($?): 128+n when signal n ended it, as in .stages.",
			Attr: attr(func(r *Result) starlark.Value { return starlark.MakeInt(r.exitCode) })},
		{Name: "Result.stdout", Sig: "Result.stdout -> string",
			Doc:  "The first output_cap bytes of stdout (the last stage's for a pipeline).",
			Attr: attr(func(r *Result) starlark.Value { return starlark.String(r.stdout) })},
		{Name: "Result.stderr", Sig: "Result.stderr -> string",
			Doc:  "The first output_cap bytes of stderr (the last stage's for a pipeline).",
			Attr: attr(func(r *Result) starlark.Value { return starlark.String(r.stderr) })},
		{Name: "Result.stdout_truncated", Sig: "Result.stdout_truncated -> bool",
			Doc:  "Whether stdout had more than output_cap bytes (only the first were kept).",
			Attr: attr(func(r *Result) starlark.Value { return starlark.Bool(r.stdoutTruncated) })},
		{Name: "Result.stderr_truncated", Sig: "Result.stderr_truncated -> bool",
			Doc:  "Whether stderr had more than output_cap bytes (only the first were kept).",
			Attr: attr(func(r *Result) starlark.Value { return starlark.Bool(r.stderrTruncated) })},
		{Name: "Result.stages", Sig: "Result.stages -> list of struct(exit_code, stderr)",
			Doc:  "One entry per pipeline stage (one for run and sh).",
			Attr: attr((*Result).stageList)},
		{Name: "Result.duration", Sig: "Result.duration -> float",
			Doc:  "Seconds from start to exit.",
			Attr: attr(func(r *Result) starlark.Value { return starlark.Float(r.duration.Seconds()) })},
	}
}
