package main

import (
	"testing"

	"github.com/charmbracelet/colorprofile"
)

// colorTerminal answers as colorprofile.Env(environ) >= ANSI, which sous
// asked before, for every mix of the variables either reads.
func TestColorTerminalIsColorprofiles(t *testing.T) {
	vars := []struct {
		key    string
		values []string // "-" leaves the variable out
	}{
		{"TERM", []string{"-", "", "dumb", "xterm", "xterm-256color", "screen", "tmux-256color", "alacritty", "linux", "vt100", "xterm-direct"}},
		{"NO_COLOR", []string{"-", "", "1", "0", "yes"}},
		{"CLICOLOR_FORCE", []string{"-", "1", "false", "x"}},
		{"CLICOLOR", []string{"-", "1", "0"}},
		{"COLORTERM", []string{"-", "truecolor", "24BIT", "no"}},
		{"WT_SESSION", []string{"-", "", "abc"}},
		{"GOOGLE_CLOUD_SHELL", []string{"-", "true", "0"}},
	}
	n := 0
	var walk func(i int, environ []string)
	walk = func(i int, environ []string) {
		if i == len(vars) {
			n++
			if got, want := colorTerminal(environ), colorprofile.Env(environ) >= colorprofile.ANSI; got != want {
				t.Errorf("colorTerminal(%q) = %v, colorprofile %v", environ, got, want)
			}
			return
		}
		for _, v := range vars[i].values {
			if v == "-" {
				walk(i+1, environ)
				continue
			}
			walk(i+1, append(environ[:len(environ):len(environ)], vars[i].key+"="+v))
		}
	}
	walk(0, []string{"HOME=/root"})
	// The last entry of a key wins, and one without "=" sets it empty.
	for _, environ := range [][]string{
		{"TERM=xterm", "TERM=dumb"},
		{"TERM=dumb", "TERM=xterm"},
		{"TERM", "COLORTERM=truecolor"},
		{"TERM=xterm", "NO_COLOR=1", "NO_COLOR=0"},
	} {
		n++
		if got, want := colorTerminal(environ), colorprofile.Env(environ) >= colorprofile.ANSI; got != want {
			t.Errorf("colorTerminal(%q) = %v, colorprofile %v", environ, got, want)
		}
	}
	t.Logf("%d environments", n)
}
