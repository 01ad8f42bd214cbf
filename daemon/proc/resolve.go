package proc

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"

	"github.com/seed5ad92d46/sous/daemon/envlist"
)

// Resolve finds the program a spawn of command would run, with the
// environment and working directory the child would get: the path of a
// command found on PATH, or the command made absolute against the working
// directory when it holds a slash. The daemon checks its allowed commands
// against it.
//
// program is what the spawn is to exec (lookPath's answer, before it is
// made absolute and cleaned: a relative one is resolved by the kernel after
// the child's chdir, where cleaning "link/.." lexically could name another
// file). Passed back as Spec.Program, the spawn runs the file that was
// checked instead of looking it up a second time.
func (r *Registry) Resolve(command string, env map[string]*string, cwd string) (abs, program string, err error) {
	dir := cwd
	if dir == "" {
		dir = r.opt.Dir
	}
	program, err = lookPath(command, envlist.Merge(r.opt.Env, env), dir)
	if err != nil {
		return "", "", err
	}
	abs = program
	if !filepath.IsAbs(abs) {
		abs = filepath.Join(dir, abs)
	}
	return filepath.Clean(abs), program, nil
}

// program is the path a plain spawn execs: Spec.Program when the caller
// resolved it already (Resolve), a command with a slash as it is, else
// the command looked up on the child's PATH. Nothing is cached between
// spawns: a file that appears on PATH or goes, or a new PATH, counts for
// the next spawn, as in a shell without a hash table.
//
// A command with a slash is not looked at here: exec finds out whether it
// is there, and only a spawn that failed pays for the stat that words the
// error as before (startErr). A sandboxed spawn still stats it first: its
// helper, not exec, would report a missing program.
func (r *Registry) program(spec Spec, env []string, dir string) (string, error) {
	switch {
	case spec.Program != "":
		return spec.Program, nil
	case spec.Sandbox == nil && strings.Contains(spec.Command, "/"):
		return spec.Command, nil
	}
	return lookPath(spec.Command, env, dir)
}

// lookPath resolves command the way a shell would, with the child's PATH.
func lookPath(command string, env []string, dir string) (string, error) {
	if command == "" {
		return "", errors.New("spawn: empty command")
	}
	if strings.Contains(command, "/") {
		path := command
		if !filepath.IsAbs(path) && dir != "" {
			path = filepath.Join(dir, path)
		}
		if _, err := os.Stat(path); err != nil {
			return "", fmt.Errorf("spawn %s: %w", command, err)
		}
		// Exec the name as given: the child resolves a relative one after
		// its chdir, so it sees the same argv[0]/$0 a shell would give it.
		return command, nil
	}
	pathEnv, _ := envlist.Lookup(env, "PATH")
	for _, d := range filepath.SplitList(pathEnv) {
		if d == "" {
			d = "."
		}
		if !filepath.IsAbs(d) && dir != "" {
			d = filepath.Join(dir, d)
		}
		p := filepath.Join(d, command)
		if fi, err := os.Stat(p); err == nil && !fi.IsDir() && fi.Mode()&0o111 != 0 {
			return p, nil
		}
	}
	return "", fmt.Errorf("spawn %s: executable file not found in $PATH", command)
}
