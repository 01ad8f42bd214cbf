package main

import (
	"io"
	"os"

	"golang.org/x/term"
)

// isTerminal reports whether r is a terminal. It asks for the terminal's
// settings rather than looking for a character device, which /dev/null is
// too: sous run prompts for approvals only on a terminal, since a pipe, a
// file or /dev/null has nobody to answer.
func isTerminal(r io.Reader) bool {
	f, ok := r.(*os.File)
	return ok && term.IsTerminal(int(f.Fd()))
}
