package rules

import (
	"os"
	"path"
	"strings"
)

// Path rules are globs on the tool's path ("**" spans directories, "*" and
// "?" stay within one). Relative paths and patterns are taken from the
// session's cwd, and both are cleaned, so "/wt/../etc/passwd" is
// "/etc/passwd".
//
// Cleaning is lexical; the file system is not: a committed symlink
// wt/docs -> /outside makes "wt/docs/x" a write to /outside/x. When the
// request is Local (its files are on this machine), the path is also
// resolved: its longest existing prefix through every symlink (a dangling
// one included), the rest appended. An allow rule must match the resolved
// path; a deny rule matches the path as written or resolved. For a remote
// host nothing can be resolved from here: rules then match the path as
// written, and a symlink in the tree can take an allowed write outside the
// pattern (a deny rule on the outside path does not see it either).

// pathForms are the forms of one path a rule may match.
type pathForms struct {
	cwd     string
	local   bool
	lexical string
	// resolved are the path with its symlinks resolved, as the tool
	// cleans it first (Claude Code resolves "a/../b" lexically) and as the
	// kernel walks it when that differs. Empty when not Local or relative.
	resolved []string
	// unresolvable: a symlink loop or an unreadable link on the way.
	unresolvable bool
}

func newPathForms(p, cwd string, local bool) pathForms {
	f := pathForms{cwd: cwd, local: local}
	raw := p
	if !path.IsAbs(p) && cwd != "" && path.IsAbs(cwd) {
		raw = cwd + "/" + p
	}
	f.lexical = path.Clean(raw)
	if !local || !path.IsAbs(raw) {
		return f
	}
	for _, q := range []string{f.lexical, raw} {
		r, ok := resolve(q)
		if !ok {
			f.unresolvable = true
			continue
		}
		if len(f.resolved) == 0 || f.resolved[0] != r {
			f.resolved = append(f.resolved, r)
		}
	}
	return f
}

// inGit reports a path inside a .git directory, or a file named .git, in
// any of its forms.
func (f pathForms) inGit() bool {
	for _, p := range append([]string{f.lexical}, f.resolved...) {
		for _, seg := range strings.Split(p, "/") {
			if strings.EqualFold(seg, ".git") {
				return true
			}
		}
	}
	return false
}

// pattern is a rule's glob made absolute from cwd and cleaned.
func (f pathForms) pattern(glob string) string {
	if !path.IsAbs(glob) && f.cwd != "" && path.IsAbs(f.cwd) {
		glob = f.cwd + "/" + glob
	}
	return cleanPattern(glob)
}

// allowedBy reports whether an allow rule's glob covers the path: the
// resolved path when there is one (against the glob as written or with its
// own leading directories resolved), else the path as written.
func (f pathForms) allowedBy(glob string) bool {
	pat := f.pattern(glob)
	if f.unresolvable {
		return false
	}
	if len(f.resolved) == 0 {
		if !path.IsAbs(f.lexical) && path.IsAbs(pat) {
			return false
		}
		return globMatch(pat, f.lexical)
	}
	rpat := resolvePattern(pat)
	for _, r := range f.resolved {
		if !globMatch(pat, r) && !globMatch(rpat, r) {
			return false
		}
	}
	return true
}

// deniedBy reports whether a deny or ask rule's glob touches the path in
// any form. A path that cannot be resolved is touched by every rule that
// could have matched it.
func (f pathForms) deniedBy(glob string) bool {
	pat := f.pattern(glob)
	if (path.IsAbs(f.lexical) || !path.IsAbs(pat)) && globMatch(pat, f.lexical) {
		return true
	}
	if f.unresolvable {
		return true
	}
	if len(f.resolved) == 0 {
		return false
	}
	rpat := resolvePattern(pat)
	for _, r := range f.resolved {
		if globMatch(pat, r) || globMatch(rpat, r) {
			return true
		}
	}
	return false
}

// maxLinks bounds the symlinks followed for one path, as the kernel's
// ELOOP does.
const maxLinks = 40

// resolve returns the absolute path p with every symlink on it resolved,
// walking it as the kernel does ("x/.." after a symlink x is the parent of
// its target). Components past the last existing one are appended as they
// are. ok is false on a symlink loop or a link that cannot be read.
func resolve(p string) (string, bool) {
	todo := strings.Split(p, "/")
	done := "/"
	links := 0
	for len(todo) > 0 {
		seg := todo[0]
		todo = todo[1:]
		switch seg {
		case "", ".":
			continue
		case "..":
			done = path.Dir(done)
			continue
		}
		next := path.Join(done, seg)
		fi, err := os.Lstat(next)
		if err != nil {
			// Not there (or not reachable): nothing further can be a link.
			return path.Join(append([]string{next}, todo...)...), true
		}
		if fi.Mode()&os.ModeSymlink == 0 {
			done = next
			continue
		}
		if links++; links > maxLinks {
			return "", false
		}
		target, err := os.Readlink(next)
		if err != nil {
			return "", false
		}
		if path.IsAbs(target) {
			done = "/"
		}
		todo = append(strings.Split(target, "/"), todo...)
	}
	return done, true
}

// resolvePattern resolves the leading directories of a glob that hold no
// pattern characters, so that a rule on /tmp/wt/** still matches where
// /tmp is a symlink (macOS: /private/tmp). A relative glob is unchanged.
func resolvePattern(pat string) string {
	if !path.IsAbs(pat) {
		return pat
	}
	segs := strings.Split(pat, "/")
	n := 0
	for n < len(segs) && !strings.ContainsAny(segs[n], "*?[\\") {
		n++
	}
	if n <= 1 {
		return pat
	}
	lit, ok := resolve(strings.Join(segs[:n], "/"))
	if !ok {
		return pat
	}
	if n == len(segs) {
		return lit
	}
	return strings.TrimSuffix(lit, "/") + "/" + strings.Join(segs[n:], "/")
}

// cleanPattern cleans a glob like a path but keeps a trailing "/**".
func cleanPattern(p string) string {
	if strings.HasSuffix(p, "/**") {
		return strings.TrimSuffix(path.Clean(strings.TrimSuffix(p, "/**")), "/") + "/**"
	}
	return path.Clean(p)
}

// globMatch matches slash-separated segments: "**" is any number of
// segments (none included), other segments are path.Match patterns.
func globMatch(pattern, name string) bool {
	return segMatch(strings.Split(pattern, "/"), strings.Split(name, "/"))
}

func segMatch(pat, name []string) bool {
	for len(pat) > 0 {
		if pat[0] == "**" {
			rest := pat[1:]
			for len(rest) > 0 && rest[0] == "**" {
				rest = rest[1:]
			}
			if len(rest) == 0 {
				return true
			}
			for i := 0; i <= len(name); i++ {
				if segMatch(rest, name[i:]) {
					return true
				}
			}
			return false
		}
		if len(name) == 0 {
			return false
		}
		// "a**b" within one segment is "a*b".
		seg := strings.ReplaceAll(pat[0], "**", "*")
		if ok, err := path.Match(seg, name[0]); err != nil || !ok {
			return false
		}
		pat, name = pat[1:], name[1:]
	}
	return len(name) == 0
}
