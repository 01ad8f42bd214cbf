package main

import (
	"io"
	"os"

	"golang.org/x/term"
)

// Factory is what every command is built from, as the GitHub CLI's
// cmdutil.Factory: the streams, the environment and the way to a daemon.
// Nothing in it starts anything: a command that needs no daemon never
// resolves a target, and tests build one with buffers and an environment
// of their own (the commands read neither os.Getenv nor os.Environ).
type Factory struct {
	IO *IO
	// Getenv reads one variable of the environment sous runs in: the
	// defaults of the target flags (SOUS_SOCKET, SOUS_REMOTE, SOUS_TOKEN,
	// ...), TERM for exec --tty, HOME for the daemon's default socket.
	Getenv func(string) string
	// Environ is that whole environment: what recipes' getenv reads and
	// what the children of a daemon sous starts inherit.
	Environ []string
	// Exits is set when the process exits as soon as the command returns
	// (main's factory, not Main's): what a command asked of the process
	// for itself alone, the signals sous run catches, need not be given
	// back then.
	Exits bool
}

// newFactory is the factory of the sous process: the given streams, and
// the process's environment. It is the only place that reads it.
func newFactory(stdin io.Reader, stdout, stderr io.Writer) *Factory {
	return &Factory{
		IO:      &IO{In: stdin, Out: stdout, ErrOut: stderr},
		Getenv:  os.Getenv,
		Environ: os.Environ(),
	}
}

// newTarget is a command's way to a daemon, resolved from its target flags
// (registered with Target.register) and this environment when the command
// first needs it.
func (f *Factory) newTarget() *Target {
	return &Target{getenv: f.Getenv}
}

// IO is where a command reads and writes; tests give it buffers.
type IO struct {
	In     io.Reader
	Out    io.Writer
	ErrOut io.Writer
}

// IsStdinTTY reports whether stdin is a terminal: sous run prompts for
// approvals only there, and exec forwards stdin unless it is one.
func (s *IO) IsStdinTTY() bool { return isTerminal(s.In) }

// isTerminal reports whether r is a terminal. It asks for the terminal's
// settings rather than looking for a character device, which /dev/null is
// too: a pipe, a file or /dev/null has nobody to answer a prompt.
func isTerminal(r io.Reader) bool {
	_, ok := terminalFd(r)
	return ok
}

// terminalFd returns the descriptor of r or w when it is a terminal.
func terminalFd(v any) (int, bool) {
	f, ok := v.(*os.File)
	if !ok || !term.IsTerminal(int(f.Fd())) {
		return 0, false
	}
	return int(f.Fd()), true
}
