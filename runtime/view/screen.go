// Package view renders a run's events for people: the live status area on
// a terminal, the colours of "[id] " prefixes, the final summary, and the
// GitHub Actions annotations and step summary. It reads the run's
// event.State and never keeps an account of the run of its own.
//
// The human lines themselves (what a process echoed, the recipe's print,
// the approval lines) are the runtime's (package runtime formats them as
// they always were); they reach the person through a Screen, which is
// either Plain (the lines as they are: not a terminal, or no status area)
// or a Terminal, which keeps the status area under them.
package view

import (
	"io"

	"github.com/seed5ad92d46/sous/daemon/wire"
)

// Screen is where the human output goes. Write gets whole lines, a piece
// of a line longer than the echo holds, or a prompt; stream says whether
// they belong on stdout or stderr. Calls are serialised by the caller (the
// bus's lock).
type Screen interface {
	Write(stream wire.Stream, p []byte)
}

// Plain writes the lines as they are, with nothing around them.
type Plain struct {
	Stdout, Stderr io.Writer
}

// Write implements Screen.
func (p Plain) Write(stream wire.Stream, b []byte) {
	if stream == wire.Stderr {
		p.Stderr.Write(b)
		return
	}
	p.Stdout.Write(b)
}
