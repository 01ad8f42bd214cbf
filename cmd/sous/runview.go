package main

import (
	"fmt"
	"io"
	"os"
	"os/signal"
	"strconv"
	"syscall"

	"golang.org/x/sys/unix"
	"golang.org/x/term"

	"github.com/seed5ad92d46/sous/runtime"
	"github.com/seed5ad92d46/sous/runtime/view"
)

// colorFlag is --color: auto, always or never.
type colorFlag string

func (c *colorFlag) String() string { return string(*c) }
func (c *colorFlag) Type() string   { return "when" }
func (c *colorFlag) Set(s string) error {
	switch s {
	case "auto", "always", "never":
		*c = colorFlag(s)
		return nil
	}
	return fmt.Errorf("want auto, always or never, got %q", s)
}

// runView decides how `sous run` shows itself, from its streams, flags and
// environment (the Factory's, never the process's own):
//
//   - the live status area when stderr is a terminal that can move its
//     cursor (TERM set and not "dumb"), unless --json or --quiet;
//   - colours of "[id] " prefixes by --color: auto colours a stream that is
//     a terminal that takes colours (NO_COLOR set to anything turns them
//     off, CLICOLOR_FORCE on off a terminal), always and never mean it;
//   - the final summary on a terminal, and with --verbose anywhere;
//   - GitHub Actions annotations and step summary with GITHUB_ACTIONS=true.
//
// stop ends what it started (the SIGWINCH watch).
func runView(opts *RunOptions, stdout, stderr io.Writer, getenv func(string) string, environ []string) (v runtime.View, stop func()) {
	stop = func() {}
	streams := opts.IO
	outFd, outTTY := terminalFd(streams.Out)
	errFd, errTTY := terminalFd(streams.ErrOut)
	v.Quiet, v.Verbose = opts.Quiet, opts.Verbose
	switch opts.Color {
	case "always":
		v.ColorStdout, v.ColorStderr = true, true
	case "auto", "":
		v.ColorStdout = colorAuto(outTTY, getenv, environ)
		v.ColorStderr = colorAuto(errTTY, getenv, environ)
	}
	if getenv("GITHUB_ACTIONS") == "true" {
		v.GitHub = &runtime.GitHub{SummaryPath: getenv("GITHUB_STEP_SUMMARY"), Workspace: getenv("GITHUB_WORKSPACE")}
	}
	if opts.JSON {
		return v, stop
	}
	v.Summary = errTTY || opts.Verbose
	if !errTTY || !cursorTerm(getenv("TERM")) {
		return v, stop
	}
	size := func() (int, int) {
		cols, rows, err := term.GetSize(errFd)
		if err != nil || cols <= 0 || rows <= 0 {
			return 80, 24
		}
		return cols, rows
	}
	// A terminal takes no EPIPE: the area writes to it directly, which
	// lets it write a batch of lines and the area in one writev.
	t := &view.TerminalOptions{Stderr: streams.ErrOut, Stdout: stdout, Size: size, Color: v.ColorStderr}
	if outTTY && sameDevice(outFd, errFd) {
		t.Stdout, t.StdoutOnScreen = streams.Out, true
	}
	resized := make(chan struct{}, 1)
	winch := make(chan os.Signal, 1)
	signal.Notify(winch, syscall.SIGWINCH)
	done := make(chan struct{})
	go func() {
		for {
			select {
			case <-winch:
				select {
				case resized <- struct{}{}:
				default:
				}
			case <-done:
				return
			}
		}
	}()
	t.Resized = resized
	v.Terminal = t
	return v, func() {
		signal.Stop(winch)
		close(done)
	}
}

// colorAuto is --color=auto for a stream: colours on a terminal that takes
// them (colorTerminal reads TERM, COLORTERM, CLICOLOR and NO_COLOR), none
// when NO_COLOR is set to anything at all (no-color.org), and off a
// terminal only with CLICOLOR_FORCE.
func colorAuto(tty bool, getenv func(string) string, environ []string) bool {
	if getenv("NO_COLOR") != "" {
		return false
	}
	if !tty {
		forced, _ := strconv.ParseBool(getenv("CLICOLOR_FORCE"))
		return forced
	}
	return colorTerminal(environ)
}

// cursorTerm reports whether a terminal of this TERM moves its cursor: not
// "dumb" (Emacs shells, some CI consoles), nor unset.
func cursorTerm(term string) bool { return term != "" && term != "dumb" }

// sameDevice reports whether two descriptors are the same terminal.
func sameDevice(a, b int) bool {
	var sa, sb unix.Stat_t
	if unix.Fstat(a, &sa) != nil || unix.Fstat(b, &sb) != nil {
		return false
	}
	return sa.Rdev == sb.Rdev
}
