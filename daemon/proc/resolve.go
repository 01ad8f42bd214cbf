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
func (r *Registry) Resolve(command string, env map[string]*string, cwd string) (string, error) {
	dir := cwd
	if dir == "" {
		dir = r.opt.Dir
	}
	path, err := lookPath(command, envlist.Merge(r.opt.Env, env), dir)
	if err != nil {
		return "", err
	}
	if !filepath.IsAbs(path) {
		path = filepath.Join(dir, path)
	}
	return filepath.Clean(path), nil
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
