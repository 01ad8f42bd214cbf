// Command sous runs Starlark recipes that drive processes, git worktrees,
// archives and Claude Code sessions through claustrum's daemon protocol.
package main

import (
	"os"
)

func main() {
	os.Exit(Main(os.Args[1:], os.Stdin, os.Stdout, os.Stderr))
}
