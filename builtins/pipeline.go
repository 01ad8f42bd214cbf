package builtins

import (
	"fmt"
	"strconv"
	"strings"

	"go.starlark.net/starlark"

	"github.com/seed5ad92d46/sous/daemon/wire"
	"github.com/seed5ad92d46/sous/runtime"
)

func pipelineEntries() []runtime.Entry {
	return []runtime.Entry{
		{Name: "pipeline", Journal: runtime.JournalEffect, Host: true, Sig: "pipeline(stages, *, " + runKeywordsSig + ") -> Result",
			Doc: "Runs [[cmd, arg...], ...] as a | b | c with real pipes between the stages on the host, in one process group. " +
				"Result.stdout is the last stage's, Result.stderr and .exit_code too; Result.stages has every stage's " +
				"exit code (128+n for a stage that signal n ended) and stderr (each capped at output_cap, all echoed live). " +
				"The status is \"ok\" when every stage exits 0 (a stage before the last that " +
				"ends by SIGPIPE, exit code 141, counts as 0: the next stage chose to stop reading). The daemon joins the " +
				"stages where it has the process.spawn.pipeline extension; an older one runs them under sh -c, each stage " +
				"leaving its status and stderr in a temporary directory on the host. " + runDoc,
			Fn: pipelineBuiltin},
	}
}

// splitPipelineArgv is pipelineArgv undone: the stages of a command whose
// stages are separated by "|".
func splitPipelineArgv(c *runtime.Call, argv []string) ([][]string, error) {
	var stages [][]string
	start := 0
	for i := 0; i <= len(argv); i++ {
		if i < len(argv) && argv[i] != "|" {
			continue
		}
		if i == start || argv[start] == "" {
			return nil, c.Errorf("the approver's input: command: want stages separated by \"|\", each a program and its arguments, got %s", describeInput(argv))
		}
		stages = append(stages, argv[start:i])
		start = i + 1
	}
	return stages, nil
}

// sigpipeExit is the shell's exit status of a command killed by SIGPIPE.
const sigpipeExit = 128 + 13

func pipelineBuiltin(c *runtime.Call) (starlark.Value, error) {
	var stages [][]string
	o := defaultRunOptions()
	if err := bind(c, 1, append([]binding{req("stages", stageLists(&stages))}, o.bindings()...)...); err != nil {
		return nil, err
	}
	argv, denied, err := o.authorize(c, pipelineArgv(stages))
	if err != nil || denied != nil {
		if err != nil {
			return nil, err
		}
		return denied, denied.check(c, &o, describePipeline(stages))
	}
	if stages, err = splitPipelineArgv(c, argv); err != nil { // an approver may have replaced it
		return nil, err
	}
	if o.privileged {
		stages = privilegedStages(stages)
	}
	native, err := hostHasFeature(c, wire.FeatureSpawnPipeline)
	if err != nil {
		return nil, err
	}
	if native { // the daemon joins the stages itself (spawn_ext.go)
		r, err := executeSpec(c, c.Host, spawnSpec{argv: pipelineArgv(stages), ext: spawnExt{pipeline: stages}}, &o)
		if err != nil {
			return nil, err
		}
		return r, r.check(c, &o, describePipeline(stages))
	}
	// An older daemon: sh joins the stages, each wrapped to leave its exit
	// status and stderr in files that are read back.
	dir, err := hostTempDir(c)
	if err != nil {
		return nil, err
	}
	defer removeHostDir(c, dir)
	o.sandbox = o.sandboxWithWrite(dir) // the stages' status files are written there

	r, err := execute(c, c.Host, []string{"sh", "-c", pipelineScript(dir, stages)}, &o)
	if err != nil {
		return nil, err
	}
	if err := r.readStages(c, dir, len(stages), int(min(o.outputCap, int64(maxCap)))); err != nil {
		return nil, err
	}
	return r, r.check(c, &o, describePipeline(stages))
}

// stageLists binds a non-empty list of non-empty lists of strings.
func stageLists(dst *[][]string) param {
	return paramFunc(func(v starlark.Value) error {
		seq, ok := v.(starlark.Indexable)
		if _, isStr := v.(starlark.String); !ok || isStr {
			return want("list of stages", v)
		}
		if seq.Len() == 0 {
			return fmt.Errorf("want at least one stage, got none")
		}
		// Grow while checking (see strList): never allocate a range's Len().
		n := seq.Len()
		out := make([][]string, 0, min(n, 64))
		for i := range n {
			out = append(out, nil)
			path := fmt.Sprintf("[%d]", i)
			if err := strList(&out[i]).set(seq.Index(i)); err != nil {
				if ae, ok := err.(*argError); ok {
					return &argError{path: path + ae.path, msg: ae.msg}
				}
				return &argError{path: path, msg: err.Error()}
			}
			if len(out[i]) == 0 || out[i][0] == "" {
				return &argError{path: path, msg: "empty command"}
			}
		}
		*dst = out
		return nil
	})
}

// pipelineScript wraps each stage so that its stderr reaches both the
// runner (through the script's stderr) and the file DIR/N.err, and its
// exit status lands in DIR/N.rc:
//
//	{ { CMD 2>&1 >&3 3>&-; echo $? >N.rc; } | tee N.err >&2 3>&-; } 3>&1
//
// Inside, fd 3 is the stage's real stdout (the pipe to the next stage):
// CMD's stderr goes into tee and its stdout to fd 3; nothing else keeps fd
// 3 open, so the next stage sees end of file when CMD's side is done. Every
// word is single-quoted: stage arguments are never shell syntax.
func pipelineScript(dir string, stages [][]string) string {
	var b strings.Builder
	for i, st := range stages {
		if i > 0 {
			b.WriteString(" | ")
		}
		words := make([]string, len(st))
		for j, w := range st {
			words[j] = shellQuote(w)
		}
		fmt.Fprintf(&b, "{ { %s 2>&1 >&3 3>&-; echo $? >%s; } | tee %s >&2 3>&-; } 3>&1",
			strings.Join(words, " "), shellQuote(stageFile(dir, i, "rc")), shellQuote(stageFile(dir, i, "err")))
	}
	return b.String()
}

func stageFile(dir string, i int, ext string) string { return fmt.Sprintf("%s/%d.%s", dir, i, ext) }

func describePipeline(stages [][]string) string {
	parts := make([]string, len(stages))
	for i, st := range stages {
		parts[i] = quoteArgs(st)
	}
	return "`" + strings.Join(parts, " | ") + "`"
}

// readStages fills in the stages from the files the script left: exit
// codes, and stderr capped like the rest of the output. A stage that left
// no exit status (its group was killed) reports -1.
func (r *Result) readStages(c *runtime.Call, dir string, n, limit int) error {
	r.stages = make([]Stage, n)
	truncated := false
	for i := range r.stages {
		rc, ok, err := readHostFile(c, stageFile(dir, i, "rc"), 64)
		if err != nil {
			return err
		}
		r.stages[i].ExitCode = -1
		if code, err := strconv.Atoi(strings.TrimSpace(rc)); ok && err == nil {
			r.stages[i].ExitCode = code
		}
		if r.stages[i].Stderr, truncated, err = readCapped(c, stageFile(dir, i, "err"), limit); err != nil {
			return err
		}
	}
	last := r.stages[n-1]
	r.exitCode, r.stderr, r.stderrTruncated = last.ExitCode, last.Stderr, truncated
	r.stageStatus()
	return nil
}

// stageStatus sets a pipeline's status from its stages: "ok" when every
// stage exited 0, a stage before the last ended by SIGPIPE counting as 0.
// A timeout stays a timeout.
func (r *Result) stageStatus() {
	if r.status == StatusTimeout {
		return
	}
	r.status = StatusOK
	for i, s := range r.stages {
		if s.ExitCode != 0 && (i == len(r.stages)-1 || s.ExitCode != sigpipeExit) {
			r.status = StatusFailed
		}
	}
}

// readHostFile reads a file on the host; ok is false when it is missing.
func readHostFile(c *runtime.Call, path string, maxBytes int64) (content string, ok bool, err error) {
	var res wire.ReadResult
	if err := hostCall(c, path, "files.read", wire.PathParams{Path: path, MaxBytes: &maxBytes}, &res); err != nil {
		return "", false, err
	}
	return res.Content, res.Exists, nil
}

// readCapped reads the first limit bytes of a file on the host. The
// protocol's files.read refuses a file over its maxBytes instead of
// cutting it, so a larger file is cut by head(1) on the host.
func readCapped(c *runtime.Call, path string, limit int) (content string, truncated bool, err error) {
	var st wire.StatResult
	if err := hostCall(c, path, "files.stat", wire.PathParams{Path: path}, &st); err != nil || !st.Exists {
		return "", false, err
	}
	if st.Size <= int64(limit) {
		content, _, err := readHostFile(c, path, int64(limit))
		return content, false, err
	}
	out, err := runHelper(c, []string{"head", "-c", strconv.Itoa(limit), path}, limit)
	return out, true, err
}

// hostTempDir makes a private directory on the host with mktemp -d.
func hostTempDir(c *runtime.Call) (string, error) {
	out, err := runHelper(c, []string{"mktemp", "-d"}, 4096)
	if err != nil {
		return "", err
	}
	dir := strings.TrimSpace(out)
	if !strings.HasPrefix(dir, "/") || dir == "/" || strings.ContainsAny(dir, "\n\x00") {
		return "", c.Errorf("mktemp -d on %s gave %q, not a directory path", c.Host.Target(), out)
	}
	return dir, nil
}

// removeHostDir removes what hostTempDir made. It runs after the result is
// read, so a failure here cannot lose anything; it is not reported.
func removeHostDir(c *runtime.Call, dir string) {
	runHelper(c, []string{"rm", "-rf", "--", dir}, 0)
}

// runHelper runs a short command of a builtin's own on the host (no echo,
// no events) and returns its stdout; a non-zero exit is an error.
func runHelper(c *runtime.Call, argv []string, limit int) (string, error) {
	p, err := startProcess(c, c.Host, spawnSpec{argv: argv}, procOptions{internal: true, limit: limit})
	if err != nil {
		return "", err
	}
	stdin := p.feed(c.Env.Ctx, nil)
	if err := wait(c.Env, p.ended, nil); err != nil {
		return "", c.Errorf("%v", err)
	}
	if err := wait(c.Env, stdin.done, nil); err != nil {
		return "", c.Errorf("%v", err)
	}
	r, err := p.result()
	if err != nil {
		return "", c.Errorf("%v", err)
	}
	if r.exitCode != 0 {
		return "", c.Errorf("%s on %s: exit code %d: %s", describe(argv), c.Host.Target(), r.exitCode, strings.TrimSpace(r.stderr))
	}
	return r.stdout, nil
}

// privilegedStages runs every stage of an approved privileged pipeline as
// root.
func privilegedStages(stages [][]string) [][]string {
	out := make([][]string, len(stages))
	for i, st := range stages {
		out[i] = asRoot(st)
	}
	return out
}
