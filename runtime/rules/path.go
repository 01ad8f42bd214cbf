package rules

import (
	"path"
	"strings"
)

// pathMatch matches a path against a glob after making both absolute (from
// cwd) and clean, so "/wt/../etc/passwd" is "/etc/passwd".
func pathMatch(pattern, p, cwd string) bool {
	if !path.IsAbs(p) {
		if cwd == "" || !path.IsAbs(cwd) {
			if path.IsAbs(pattern) {
				return false
			}
		} else {
			p = path.Join(cwd, p)
		}
	}
	if !path.IsAbs(pattern) && cwd != "" && path.IsAbs(cwd) {
		pattern = cwd + "/" + pattern
	}
	return globMatch(cleanPattern(pattern), path.Clean(p))
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
