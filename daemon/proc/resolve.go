package proc

import (
	"path/filepath"

	"github.com/seed5ad92d46/sous/internal/envlist"
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
