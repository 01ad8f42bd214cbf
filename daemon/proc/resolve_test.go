package proc

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/seed5ad92d46/sous/daemon/wire"
)

// stdoutOf spawns spec and returns what the child wrote to stdout.
func stdoutOf(t *testing.T, r *Registry, spec Spec) string {
	t.Helper()
	p, err := r.Spawn(spec)
	if err != nil {
		t.Fatalf("spawn %s: %v", spec.Command, err)
	}
	var out strings.Builder
	for _, f := range frames(t, p) {
		if f.Stream == wire.Stdout {
			out.Write(f.Data)
		}
	}
	return out.String()
}

// TestSpawnLooksUpEverySpawn: each spawn looks the command up on its own
// PATH anew, so a program that appears on PATH, one that goes, and a new
// PATH all count for the next spawn; none runs a path remembered from an
// earlier one (a shell's hash table would run b's after a's appears).
func TestSpawnLooksUpEverySpawn(t *testing.T) {
	r := newTestRegistry(t)
	a, b := t.TempDir(), t.TempDir()
	write := func(dir, says string) {
		if err := os.WriteFile(filepath.Join(dir, "prog"), []byte("#!/bin/sh\necho "+says+"\n"), 0o755); err != nil {
			t.Fatal(err)
		}
	}
	write(b, "b")
	path := func(dirs ...string) map[string]*string {
		p := strings.Join(append(dirs, "/usr/bin:/bin"), ":")
		return map[string]*string{"PATH": &p}
	}
	for i, step := range []struct {
		do   func()
		env  map[string]*string
		want string
	}{
		{nil, path(a, b), "b\n"},
		{func() { write(a, "a") }, path(a, b), "a\n"},                       // appeared earlier on PATH
		{nil, path(b, a), "b\n"},                                            // PATH changed
		{func() { os.Remove(filepath.Join(b, "prog")) }, path(b, a), "a\n"}, // removed
		{func() { write(b, "b2") }, path(a, b), "a\n"},
		{func() { os.Remove(filepath.Join(a, "prog")) }, path(a, b), "b2\n"},
	} {
		if step.do != nil {
			step.do()
		}
		if got := stdoutOf(t, r, Spec{ID: "p", Command: "prog", Env: step.env}); got != step.want {
			t.Fatalf("step %d: ran %q, want %q", i, got, step.want)
		}
	}
	os.Remove(filepath.Join(b, "prog"))
	if _, err := r.Spawn(Spec{ID: "p", Command: "prog", Env: path(a, b)}); err == nil || err.Error() != "spawn prog: executable file not found in $PATH" {
		t.Fatalf("spawn of a program gone from PATH: %v", err)
	}
}

// TestSpawnMissingProgramErrors: a program with a slash is no longer
// stat'ed before the fork (exec finds out), yet a spawn of one that is not
// there, or in a cwd that is not there, fails with the words it had.
func TestSpawnMissingProgramErrors(t *testing.T) {
	r := newTestRegistry(t)
	dir := t.TempDir()
	missing := filepath.Join(dir, "nope")
	for _, c := range []struct {
		spec Spec
		want string
	}{
		{Spec{ID: "a", Command: missing}, "spawn " + missing + ": stat " + missing + ": no such file or directory"},
		{Spec{ID: "b", Command: "./nope", Cwd: dir}, "spawn ./nope: stat " + missing + ": no such file or directory"},
		{Spec{ID: "c", Command: "/bin/true", Cwd: missing}, "spawn /bin/true: cwd: stat " + missing + ": no such file or directory"},
		{Spec{ID: "d", Command: dir}, "spawn " + dir + ": fork/exec " + dir + ": permission denied"},
	} {
		if _, err := r.Spawn(c.spec); err == nil || err.Error() != c.want {
			t.Errorf("spawn %s in %q: %v, want %q", c.spec.Command, c.spec.Cwd, err, c.want)
		}
	}
	// And one that is there runs, with the name it was given as argv[0].
	os.WriteFile(filepath.Join(dir, "prog"), []byte("#!/bin/sh\necho $0\n"), 0o755)
	if got := stdoutOf(t, r, Spec{ID: "e", Command: "./prog", Cwd: dir}); got != "./prog\n" {
		t.Fatalf("./prog said %q", got)
	}
}

// TestSpawnRunsProgramGiven: Spec.Program, the path Resolve found for the
// daemon's allowed-commands check, is what runs: the spawn does not look
// the command up a second time.
func TestSpawnRunsProgramGiven(t *testing.T) {
	r := newTestRegistry(t)
	a, b := t.TempDir(), t.TempDir()
	os.WriteFile(filepath.Join(a, "prog"), []byte("#!/bin/sh\necho a\n"), 0o755)
	os.WriteFile(filepath.Join(b, "prog"), []byte("#!/bin/sh\necho b\n"), 0o755)
	p := a + ":" + b
	env := map[string]*string{"PATH": &p}
	abs, program, err := r.Resolve("prog", env, "")
	if err != nil || abs != filepath.Join(a, "prog") || program != filepath.Join(a, "prog") {
		t.Fatalf("Resolve: %q %q %v", abs, program, err)
	}
	if got := stdoutOf(t, r, Spec{ID: "p", Command: "prog", Env: env, Program: program}); got != "a\n" {
		t.Fatalf("ran %q", got)
	}
	// The path given runs, not what PATH finds.
	if got := stdoutOf(t, r, Spec{ID: "p", Command: "prog", Env: env, Program: filepath.Join(b, "prog")}); got != "b\n" {
		t.Fatalf("ran %q", got)
	}
}
