package rules

import (
	"bytes"
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"
)

// bashOracle runs shell commands in real bash and reports every command
// bash executed, with its words. Nothing the commands name is run: PATH is
// an empty directory, every builtin is disabled (so `echo`, `eval`, `exec`
// and the rest are looked up like programs), and bash's
// command_not_found_handle records the words of each command it could not
// find. Keywords, expansions and substitutions still work as in any bash,
// so what is recorded is exactly what bash would have run.
//
// A command name with a slash is not looked up: bash runs that file. The
// commands given to the oracle must name no real program by path; bin()
// is a directory of recording stubs for tests that need one (bin()+"/rm").
type bashOracle struct {
	bash string
	dir  string // holds the prelude, the recorder, the empty PATH, the stubs
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
		"record":  "#!/bin/sh\nprintf '%s\\0' \"$#\" \"$@\" >> \"$SOUS_ORACLE_LOG\"\n",
		"prelude": "command_not_found_handle() { \"$SOUS_ORACLE_RECORD\" \"$@\"; }\nenable -n $(compgen -b)\n",
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
	o := &bashOracle{bash: bash, dir: dir}
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
	outside := strings.ReplaceAll(cmd, o.bin()+"/", "")
	if strings.Contains(outside, "/bin/") || strings.Contains(outside, "/sbin/") || strings.Contains(outside, "/usr/") {
		return fail("the oracle runs no command line that names a real program by path")
	}
	cwd, err := os.MkdirTemp(work, "cwd")
	if err != nil {
		return fail("%v", err)
	}
	log := cwd + ".log"
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	c := exec.CommandContext(ctx, o.bash, "-c", cmd)
	c.Dir = cwd
	c.Env = []string{
		"PATH=" + filepath.Join(o.dir, "empty"), "HOME=" + cwd, "LC_ALL=C",
		"BASH_ENV=" + filepath.Join(o.dir, "prelude"),
		"SOUS_ORACLE_RECORD=" + filepath.Join(o.dir, "record"), "SOUS_ORACLE_LOG=" + log,
	}
	// A buffer, not a file: Wait then also waits for background commands
	// (`a & b`), which hold the pipe open until they finish.
	var stderr bytes.Buffer
	c.Stdout, c.Stderr = &stderr, &stderr
	c.WaitDelay = 10 * time.Second
	c.Run() // bash's own status does not matter, only what it ran
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
	return r, true
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
