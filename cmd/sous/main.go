// Command sous runs Starlark recipes that drive processes, git worktrees,
// archives and Claude Code sessions through claustrum's daemon protocol.
package main

import (
	"fmt"
	"os"
	"runtime/pprof"

	"github.com/seed5ad92d46/sous/daemon/sandbox"
)

func main() {
	// First: re-executed as the helper of a sandboxed child, this binary
	// confines itself and execs the child (see package sandbox).
	sandbox.MaybeRunHelper()
	stop := startProfile(os.Getenv("SOUS_CPUPROFILE"))
	code := Main(os.Args[1:], os.Stdin, os.Stdout, os.Stderr)
	stop()
	os.Exit(code)
}

// startProfile writes a CPU profile of this run to path (for `go tool
// pprof`), when set: how the figures in docs/PERFORMANCE.md were profiled. A
// daemon's profile is complete once it stops (sous daemon stop, SIGTERM).
func startProfile(path string) (stop func()) {
	if path == "" {
		return func() {}
	}
	f, err := os.Create(path)
	if err == nil {
		err = pprof.StartCPUProfile(f)
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, "sous: SOUS_CPUPROFILE:", err)
		return func() {}
	}
	return func() {
		pprof.StopCPUProfile()
		f.Close()
	}
}
