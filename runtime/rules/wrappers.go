package rules

import (
	"path"
	"strings"
)

// Deny and ask rules look through what runs another command: a deny rule
// for `rm` also matches `sudo rm`, `env -i rm`, `FOO=1 rm`, `timeout 5 rm`,
// `xargs rm`, `/bin/rm`, `find . -exec rm {} ;` and `sh -c 'rm x'`. This
// is best effort: a wrapper the list does not know, an alias or a script
// hides a command from deny rules. Allow rules never look through: an
// allow for `rm:*` does not allow `sudo rm`.

// wrappers run the command their later arguments name. Their options are
// not parsed: every later word that is not an option may be where the
// command starts, which is what a deny rule wants (too broad at worst). A
// word that starts with "-" but holds a "/" counts as a command too: after
// "--" (sudo -- -/rm) it is one, and /bin/rm's base-name match reaches it
// when it stands first.
var wrappers = map[string]bool{
	"builtin": true, "busybox": true, "caffeinate": true, "chroot": true, "chrt": true, "command": true,
	"doas": true, "env": true, "exec": true, "fakeroot": true, "faketime": true, "firejail": true,
	"flock": true, "ionice": true, "ltrace": true, "nice": true, "nohup": true, "nsenter": true,
	"numactl": true, "pkexec": true, "runuser": true, "setpriv": true, "setsid": true, "stdbuf": true,
	"strace": true, "sudo": true, "systemd-run": true, "taskset": true, "time": true, "timeout": true,
	"unbuffer": true, "unshare": true, "valgrind": true, "watch": true, "xargs": true,
}

// shells run the script that follows a -c option.
var shells = map[string]bool{
	"ash": true, "bash": true, "dash": true, "ksh": true, "mksh": true, "sh": true, "zsh": true,
	"su": true, "script": true,
}

// maxScriptDepth bounds how deep sh -c and eval scripts are read.
const maxScriptDepth = 4

// touchesWords reports whether a deny or ask rule's content matches a
// command's words at any place where a command starts: the first word,
// after leading assignments and keywords, after a wrapper, after find's
// -exec; and inside the script of sh -c or eval.
func touchesWords(content string, words []string, depth int) bool {
	rw, prefix, ok := ruleCommand(content)
	if !ok {
		return false
	}
	for _, start := range commandStarts(words) {
		if matchesAt(rw.texts(), prefix, words[start:]) {
			return true
		}
		if depth < maxScriptDepth {
			if script, ok := scriptOf(words[start:]); ok && touchesScript(content, script, depth+1) {
				return true
			}
		}
	}
	return false
}

// touchesScript matches a rule against every command of a shell script.
func touchesScript(content, script string, depth int) bool {
	if touchesWords(content, strings.Fields(script), depth) {
		return true
	}
	for _, c := range parseShell(script).cmds {
		if touchesWords(content, c.texts(), depth) {
			return true
		}
	}
	return false
}

// matchesAt compares a rule's words with a command's: the command word
// also matches by its base name (/bin/rm is rm).
func matchesAt(rw []string, prefix bool, words []string) bool {
	if len(words) == 0 || len(words) < len(rw) || !prefix && len(words) != len(rw) {
		return false
	}
	for i, w := range rw {
		if words[i] == w || i == 0 && !strings.Contains(w, "/") && path.Base(words[i]) == w {
			continue
		}
		return false
	}
	return true
}

// commandStarts are the indexes of words where a command may start.
func commandStarts(words []string) []int {
	reach := make([]bool, len(words)+1)
	reach[0] = true
	wrapped := false // every later non-option word is reachable already
	var starts []int
	for i, w := range words {
		if !reach[i] {
			continue
		}
		starts = append(starts, i)
		name := path.Base(w)
		switch {
		case reserved[w] || isAssignment(w):
			reach[i+1] = true
		case wrappers[name]:
			if !wrapped {
				for j := i + 1; j < len(words); j++ {
					reach[j] = reach[j] || !strings.HasPrefix(words[j], "-") || strings.Contains(words[j], "/")
				}
				wrapped = true
			}
		case name == "find":
			for j := i + 1; j < len(words); j++ {
				switch words[j] {
				case "-exec", "-execdir", "-ok", "-okdir":
					reach[j+1] = true
				}
			}
		}
	}
	return starts
}

// scriptOf is the shell script a command runs: sh -c SCRIPT (also -ec,
// -lc, ...) or eval ARGS.
func scriptOf(words []string) (string, bool) {
	name := path.Base(words[0])
	if name == "eval" {
		return strings.Join(words[1:], " "), len(words) > 1
	}
	if !shells[name] {
		return "", false
	}
	// The options come first: a script is never far.
	for i := 1; i+1 < len(words) && i <= 16; i++ {
		w := words[i]
		if strings.HasPrefix(w, "-") && !strings.HasPrefix(w, "--") && strings.ContainsRune(w, 'c') {
			return words[i+1], true
		}
	}
	return "", false
}
