// Command sous runs Starlark recipes that drive processes, git worktrees,
// archives and Claude Code sessions through claustrum's daemon protocol.
package main

import (
	"os"

	"github.com/seed5ad92d46/sous/daemon/sandbox"
)

func main() {
	// First: re-executed as the helper of a sandboxed child, this binary
	// confines itself and execs the child (see package sandbox).
	sandbox.MaybeRunHelper()
	os.Exit(Main(os.Args[1:], os.Stdin, os.Stdout, os.Stderr))
}
