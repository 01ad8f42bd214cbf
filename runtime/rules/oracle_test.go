package rules

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/seed5ad92d46/sous/daemon/sandbox"
)

// bashOracle runs shell commands in real bash and reports every command
// bash executed, with its words. Nothing the commands name is run: PATH is
// an empty directory, every builtin is disabled (so `echo`, `eval`, `exec`
// and the rest are looked up like programs), and bash's
// command_not_found_handle records the words of each command it could not
// find. Keywords, expansions and substitutions still work as in any bash,
// so what is recorded is exactly what bash would have run. Bash also
// traces (set -x) every simple command it executes, so a command that runs
// no program (an assignment, `((..))`, `[[..]]`, a function) shows too.
//
// Where the host can sandbox (daemon/sandbox: Landlock, a private network
// namespace), bash runs in a throwaway one: it may write only its own
// empty working directory, its log, trace and TMPDIR, and has no network.
// The fuzz target needs it, since its lines are anyone's; the fixed tests
// run unconfined where it is missing.
//
// A command name with a slash is not looked up: bash runs that file. The
// commands given to the oracle must name no real program by path; bin()
// is a directory of recording stubs for tests that need one (bin()+"/rm").
type bashOracle struct {
	bash string
	dir  string // holds the prelude, the recorder, the empty PATH, the stubs
	// sandboxed: every run is confined (sandbox.Supported() held).
	sandboxed bool
}

// bin is a directory where every name in stubNames records its argv.
func (o *bashOracle) bin() string { return filepath.Join(o.dir, "bin") }

var stubNames = []string{"rm", "go"}

func newBashOracle(t testing.TB) *bashOracle {
	t.Helper()
	bash, err := exec.LookPath("bash")
	if err != nil {
		t.Skip("bash is not installed: the shell model cannot be checked against it")
	}
	dir := t.TempDir()
	files := map[string]string{
		// The recorder writes the count of words, then the words, each
		// ending in NUL (words may hold newlines). /bin/sh, not bash, so
		// the prelude's BASH_ENV does not apply to it.
		"record": "#!/bin/sh\nprintf '%s\\0' \"$#\" \"$@\" >> \"$SOUS_ORACLE_LOG\"\n",
		// The trace goes to its own file, one entry per command, each
		// starting with \x01 (PS4's first character, repeated per level
		// of command substitution); `enable -n` is the prelude's last.
		"prelude": "command_not_found_handle() { \"$SOUS_ORACLE_RECORD\" \"$@\"; }\n" +
			"exec 9>>\"$SOUS_ORACLE_TRACE\"; BASH_XTRACEFD=9; PS4=$'\\001+ '; set -x\n" +
			"enable -n $(compgen -b)\n",
	}
	for name, text := range files {
		if err := os.WriteFile(filepath.Join(dir, name), []byte(text), 0o755); err != nil {
			t.Fatal(err)
		}
	}
	for _, sub := range []string{"empty", "bin"} {
		if err := os.Mkdir(filepath.Join(dir, sub), 0o755); err != nil {
			t.Fatal(err)
		}
	}
	o := &bashOracle{bash: bash, dir: dir, sandboxed: sandbox.Supported() == nil}
	stub := "#!/bin/sh\nprintf '%s\\0' \"$(($# + 1))\" \"$0\" \"$@\" >> \"$SOUS_ORACLE_LOG\"\n"
	for _, name := range stubNames {
		if err := os.WriteFile(filepath.Join(o.bin(), name), []byte(stub), 0o755); err != nil {
			t.Fatal(err)
		}
	}
	return o
}

// bashRun is what bash did with one command line.
type bashRun struct {
	execs   [][]string // the commands bash ran, in the order they started
	created []string   // files that appeared in the (empty) working directory
	stderr  string
	// traced are the simple commands bash traced (set -x), as it quotes
	// them, but for the recorder's own: each command run is one, and so is
	// each that runs no program. A command whose trace is redirected away
	// (`9>&-`) is missing.
	traced []string
}

// run runs cmd as `bash -c cmd` in a fresh empty directory under work.
// It may be called from several goroutines; it reports its own failures
// as errors (ok false), never by stopping the goroutine.
func (o *bashOracle) run(t testing.TB, work, cmd string) (r bashRun, ok bool) {
	t.Helper()
	fail := func(format string, args ...any) (bashRun, bool) {
		t.Errorf("bash -c %q: "+format, append([]any{cmd}, args...)...)
		return bashRun{}, false
	}
	if o.namesRealProgram(cmd) {
		return fail("the oracle runs no command line that names a real program by path")
	}
	// Each run has a directory of its own: the working directory, which
	// starts empty, the log, the trace and TMPDIR (here-documents).
	base, err := os.MkdirTemp(work, "run")
	if err != nil {
		return fail("%v", err)
	}
	cwd, tmp := filepath.Join(base, "cwd"), filepath.Join(base, "tmp")
	log, trace := filepath.Join(base, "log"), filepath.Join(base, "trace")
	for _, d := range []string{cwd, tmp} {
		if err := os.Mkdir(d, 0o755); err != nil {
			return fail("%v", err)
		}
	}
	for _, f := range []string{log, trace} { // write roots must exist
		if err := os.WriteFile(f, nil, 0o644); err != nil {
			return fail("%v", err)
		}
	}
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	// "--": a line that starts with - or + is a command, not an option.
	c := exec.CommandContext(ctx, o.bash, "-c", "--", cmd)
	c.Dir = cwd
	c.Env = []string{
		"PATH=" + filepath.Join(o.dir, "empty"), "HOME=" + cwd, "LC_ALL=C", "TMPDIR=" + tmp,
		"BASH_ENV=" + filepath.Join(o.dir, "prelude"),
		"SOUS_ORACLE_RECORD=" + filepath.Join(o.dir, "record"), "SOUS_ORACLE_LOG=" + log,
		"SOUS_ORACLE_TRACE=" + trace,
	}
	// A buffer, not a file: Wait then also waits for background commands
	// (`a & b`), which hold the pipe open until they finish.
	var stderr bytes.Buffer
	c.Stdout, c.Stderr = &stderr, &stderr
	c.WaitDelay = 10 * time.Second
	var policy *sandbox.Policy
	if o.sandboxed {
		policy = &sandbox.Policy{Write: []string{cwd, tmp, log, trace}}
	}
	if err := sandbox.Start(c, policy); err != nil {
		return fail("start bash: %v", err)
	}
	c.Wait() // bash's own status does not matter, only what it ran
	r.stderr = stderr.String()
	entries, err := os.ReadDir(cwd)
	if err != nil {
		return fail("%v", err)
	}
	for _, e := range entries {
		r.created = append(r.created, e.Name())
	}
	data, err := os.ReadFile(log)
	if err != nil && !os.IsNotExist(err) {
		return fail("%v", err)
	}
	fields := strings.Split(string(data), "\x00")
	for i := 0; i+1 < len(fields); {
		n, err := strconv.Atoi(fields[i])
		if err != nil || i+1+n > len(fields)-1 {
			return fail("unreadable record log %q", data)
		}
		r.execs = append(r.execs, fields[i+1:i+1+n])
		i += 1 + n
	}
	if r.traced, err = o.readTrace(trace); err != nil {
		return fail("%v", err)
	}
	return r, true
}

// namesRealProgram reports a line that names a program outside the stubs
// by path: bash would run it, and the recorder would not see it.
func (o *bashOracle) namesRealProgram(cmd string) bool {
	outside := strings.ReplaceAll(cmd, o.bin()+"/", "")
	return strings.Contains(outside, "/bin/") || strings.Contains(outside, "/sbin/") || strings.Contains(outside, "/usr/")
}

// traceEntry starts each entry of the trace: a newline (none for the
// first), PS4's \x01 once per level, its "+ ".
var traceEntry = regexp.MustCompile(`(?:^|\n)\x01+\+ `)

// readTrace returns the commands traced after the prelude's, without the
// recorder's own.
func (o *bashOracle) readTrace(path string) ([]string, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	entries := traceEntry.Split(strings.TrimSuffix(string(data), "\n"), -1)
	prelude := slices.IndexFunc(entries, func(e string) bool { return strings.HasPrefix(e, "enable -n ") })
	if prelude < 0 {
		return nil, fmt.Errorf("the trace lacks the prelude's enable: %q", data)
	}
	var out []string
	record := filepath.Join(o.dir, "record")
	for _, e := range entries[prelude+1:] {
		if e != record && !strings.HasPrefix(e, record+" ") {
			out = append(out, e)
		}
	}
	return out, nil
}

// ran reports whether bash ran a command named name.
func (r bashRun) ran(name string) bool {
	for _, e := range r.execs {
		if len(e) > 0 && e[0] == name {
			return true
		}
	}
	return false
}
