// Package ansitext measures, strips and cuts terminal text that may hold
// escape sequences: the three functions of github.com/charmbracelet/x/ansi
// v0.11.7 the status area uses (Strip, StringWidth, Truncate), copied with
// their DEC parser's transition table (MIT licence, Charmbracelet, Inc.:
// LICENSE in this directory).
//
// Why a copy: every package linked into sous runs its package init at
// every start, used or not. x/ansi brings mattn/go-runewidth, whose init
// merges its width tables (about 80 µs here), and its parser, whose init
// builds the 4 KiB transition table (about 30 µs): together 3% of a `sous
// run` of a one-line recipe, which draws nothing. Here the table is built
// on first use and the widths come from clipperhouse/displaywidth, as
// x/ansi's own GraphemeWidth method takes them, so a run pays for them
// only once it draws the area. The tests hold every function to x/ansi's
// on the same inputs.
package ansitext
