package main

import (
	"strconv"
	"strings"
)

// colorTerminal reports whether a terminal with this environment takes
// colours: what charmbracelet/colorprofile's Env(environ) >= ANSI says,
// written out for that one question (colorterm_test.go holds the two to
// the same answer). colorprofile brings charmbracelet/x/ansi and with it
// mattn/go-runewidth, whose package inits every start of sous would pay
// (about 110 µs here), colours or not.
//
// In order: NO_COLOR set true turns colours off; CLICOLOR_FORCE set true
// turns them on; TERM unset or "dumb" is no terminal; any other TERM
// takes colours; an empty TERM takes them only when COLORTERM, WT_SESSION,
// GOOGLE_CLOUD_SHELL or CLICOLOR says so.
func colorTerminal(environ []string) bool {
	isTrue := func(key string) bool {
		v, _ := lookupEnviron(environ, key)
		b, _ := strconv.ParseBool(v)
		return b
	}
	if isTrue("NO_COLOR") {
		return false
	}
	if isTrue("CLICOLOR_FORCE") {
		return true
	}
	term, ok := lookupEnviron(environ, "TERM")
	switch {
	case !ok || term == "dumb":
		return false
	case term != "":
		return true
	}
	wt, _ := lookupEnviron(environ, "WT_SESSION")
	ct, _ := lookupEnviron(environ, "COLORTERM")
	switch strings.ToLower(ct) {
	case "truecolor", "24bit", "yes", "true":
		return true
	}
	return wt != "" || isTrue("GOOGLE_CLOUD_SHELL") || isTrue("CLICOLOR")
}

// lookupEnviron finds key in environ as colorprofile reads it: the last
// entry for a key wins, and an entry without "=" sets it empty.
func lookupEnviron(environ []string, key string) (value string, ok bool) {
	for _, e := range environ {
		if k, v, _ := strings.Cut(e, "="); k == key {
			value, ok = v, true
		}
	}
	return value, ok
}
