package builtins

import (
	"bytes"
	"context"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/seed5ad92d46/sous/internal/daemontest"

	"github.com/seed5ad92d46/sous/runtime"
)

// fixture runs recipes as `sous run` does, with this package's plugins,
// as Tilt's starkit fixture does: it writes the recipe's files into a temp
// dir, runs main.star with runtime.Run and captures what the run printed.
// The daemon is a fakeDaemon unless withEmbeddedDaemon says otherwise,
// for the tests that need real processes.
type fixture struct {
	t      *testing.T
	dir    string
	daemon *fakeDaemon // nil: the runtime's own, the embedded daemon
	json   bool        // --json: stdout carries the events
	args   map[string]string
}

func newFixture(t *testing.T) *fixture {
	t.Helper()
	dir := t.TempDir()
	return &fixture{t: t, dir: dir, daemon: newFakeDaemon(), args: map[string]string{"dir": dir}}
}

// withEmbeddedDaemon runs the recipes on the embedded daemon: real
// processes, files and repositories.
func (f *fixture) withEmbeddedDaemon() *fixture {
	f.daemon = nil
	return f
}

// withJSON runs the recipes in --json mode.
func (f *fixture) withJSON() *fixture {
	f.json = true
	return f
}

// file writes content at name under the fixture's directory and returns
// its path.
func (f *fixture) file(name, content string) string {
	f.t.Helper()
	p := filepath.Join(f.dir, name)
	if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
		f.t.Fatal(err)
	}
	if err := os.WriteFile(p, []byte(content), 0o644); err != nil {
		f.t.Fatal(err)
	}
	return p
}

// ran is what one run did: Run's error, the exit code it means (0, or the
// *runtime.ExitError's), and what the run wrote, with the fixture's
// directory shown as DIR.
type ran struct {
	err            error
	code           int
	stdout, stderr string
}

// run writes src as main.star and runs it, with args["dir"] the fixture's
// directory.
func (f *fixture) run(src string) ran {
	f.t.Helper()
	recipe := f.file("main.star", src)
	var stdout, stderr bytes.Buffer
	opt := runtime.Options{
		Recipe: recipe, Args: f.args, Stdout: &stdout, Stderr: &stderr, JSON: f.json, Table: DefaultTable(),
		Host: daemontest.EmbeddedTarget(),
	}
	if f.daemon != nil {
		opt.Connector = f.daemon
	}
	err := runtime.Run(context.Background(), opt)
	return ran{
		err: err, code: exitCode(err),
		stdout: strings.ReplaceAll(stdout.String(), f.dir, "DIR"),
		stderr: strings.ReplaceAll(stderr.String(), f.dir, "DIR"),
	}
}

// expect checks the exit code and that stderr contains every want.
func (r ran) expect(t *testing.T, code int, stderrHas ...string) {
	t.Helper()
	if r.code != code {
		t.Errorf("exit code %d, want %d\nstdout:\n%s\nstderr:\n%s", r.code, code, r.stdout, r.stderr)
		return
	}
	for _, w := range stderrHas {
		if !strings.Contains(r.stderr, w) {
			t.Errorf("stderr does not contain %q:\n%s", w, r.stderr)
		}
	}
}

// exitCode is the exit code Run's error means: -1 for an error that is not
// an *runtime.ExitError.
func exitCode(err error) int {
	var ee *runtime.ExitError
	if errors.As(err, &ee) {
		return ee.Code
	}
	if err != nil {
		return -1
	}
	return 0
}
