// Command sous runs Starlark recipes that drive processes, git worktrees,
// archives and Claude Code sessions through claustrum's daemon protocol.
//
// The command tree is built as the GitHub CLI builds its own. root.go lists
// every top-level command. Each command is made by newCmdX(f, runF) from the
// Factory (factory.go: the streams, the environment, the way to a daemon),
// keeps its flags and arguments in an XOptions struct, and runs in its run
// function (xRun(opts)); a test that sets runF gets the parsed options
// instead (flags_test.go). Only main's factory reads the process's
// environment.
package main

import (
	"fmt"
	"io"
	"os"
	"runtime/pprof"

	"github.com/seed5ad92d46/sous/daemon/sandbox"
)

func main() {
	// First: re-executed as the helper of a sandboxed child, this binary
	// confines itself and execs the child (see package sandbox).
	sandbox.MaybeRunHelper()
	f := newFactory(os.Stdin, os.Stdout, os.Stderr)
	f.Exits = true
	stop := startProfile(f.Getenv("SOUS_CPUPROFILE"), f.IO.ErrOut)
	code := execute(f, os.Args[1:])
	stop()
	os.Exit(code)
}

// Main runs the sous command line with the given streams and the process's
// environment, and returns the process exit code.
func Main(args []string, stdin io.Reader, stdout, stderr io.Writer) int {
	return execute(newFactory(stdin, stdout, stderr), args)
}

// startProfile writes a CPU profile of this run to path (for `go tool
// pprof`), when set: how the figures in docs/PERFORMANCE.md were profiled. A
// daemon's profile is complete once it stops (sous daemon stop, SIGTERM).
func startProfile(path string, stderr io.Writer) (stop func()) {
	if path == "" {
		return func() {}
	}
	f, err := os.Create(path)
	if err == nil {
		err = pprof.StartCPUProfile(f)
	}
	if err != nil {
		fmt.Fprintln(stderr, "sous: SOUS_CPUPROFILE:", err)
		return func() {}
	}
	return func() {
		pprof.StopCPUProfile()
		f.Close()
	}
}
