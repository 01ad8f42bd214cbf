package main

import (
	"errors"
	"fmt"
	"io"
	"runtime"
	"runtime/debug"
	"strings"

	"github.com/spf13/cobra"
)

// Build information, set by the linker:
//
//	go build -ldflags "-X main.version=1.2.3 -X main.commit=abc -X main.buildTime=2026-11-22T10:00:00Z"
//
// Without them, version and commit come from the module's build info.
var (
	version   = ""
	commit    = ""
	buildTime = ""
)

// buildInfo is what `sous version` prints and the daemon reports.
type buildInfo struct {
	Version, Commit, Time string
}

func currentBuild() buildInfo {
	b := buildInfo{Version: version, Commit: commit, Time: buildTime}
	if info, ok := debug.ReadBuildInfo(); ok {
		if b.Version == "" && info.Main.Version != "" && info.Main.Version != "(devel)" {
			b.Version = info.Main.Version
		}
		for _, s := range info.Settings {
			switch s.Key {
			case "vcs.revision":
				if b.Commit == "" {
					b.Commit = s.Value
				}
			case "vcs.time":
				if b.Time == "" {
					b.Time = s.Value
				}
			}
		}
	}
	if b.Version == "" {
		b.Version = "dev"
	}
	if b.Commit == "" {
		b.Commit = "unknown"
	}
	if b.Time == "" {
		b.Time = "unknown"
	}
	return b
}

// IO is where a command reads and writes; tests give it buffers.
type IO struct {
	In     io.Reader
	Out    io.Writer
	ErrOut io.Writer
	// Env is the environment recipes and the embedded daemon see (nil:
	// the process's), so tests can run agents against their own model.
	Env []string
}

// exitError carries a specific exit code out of a command.
type exitError struct {
	code  int
	err   error // nil: nothing more to print
	plain bool  // print err as is, without the "sous: " prefix
}

func (e *exitError) Error() string {
	if e.err == nil {
		return fmt.Sprintf("exit status %d", e.code)
	}
	return e.err.Error()
}

func (e *exitError) Unwrap() error { return e.err }

// usageError marks errors in how the command was called (exit code 2).
type usageError struct{ err error }

func (e *usageError) Error() string { return e.err.Error() }
func (e *usageError) Unwrap() error { return e.err }

func usageErrorf(format string, args ...any) error {
	return &usageError{fmt.Errorf(format, args...)}
}

// Main runs the sous command line and returns the process exit code.
func Main(args []string, stdin io.Reader, stdout, stderr io.Writer) int {
	return mainIO(args, &IO{In: stdin, Out: stdout, ErrOut: stderr})
}

// mainIO is Main with every stream and the environment given.
func mainIO(args []string, streams *IO) int {
	stderr := streams.ErrOut
	root := newRootCmd(streams)
	root.SetArgs(args)
	root.SetIn(streams.In)
	root.SetOut(streams.Out)
	root.SetErr(stderr)
	cmd, err := root.ExecuteC()
	if err == nil {
		return 0
	}
	var fe *flagError
	var ue *usageError
	if (errors.As(err, &fe) || errors.As(err, &ue)) && cmd.Name() == "run" && cmd.Parent() == root {
		// A flag cobra could not parse, or the wrong number of arguments,
		// stops `sous run --json` before its events start; the stream
		// still gets its start and end. (runRecipe reports its own usage
		// errors in the stream, and returns them as exitErrors.)
		if json, recipe := scanRunArgs(cmd.Flags(), args); json {
			err = refuseRunJSON(streams, recipe, err)
		}
	}
	var ee *exitError
	if errors.As(err, &ee) {
		switch {
		case ee.err != nil && ee.plain:
			fmt.Fprintln(stderr, ee.err)
		case ee.err != nil:
			fmt.Fprintln(stderr, "sous:", ee.err)
		}
		return ee.code
	}
	fmt.Fprintln(stderr, "sous:", err)
	if errors.As(err, &ue) || isCobraUsageError(err) {
		return 2
	}
	return 1
}

// isCobraUsageError recognises cobra's own usage errors: bad flags (through
// the flag error func) and unknown subcommands (cobra builds those with
// fmt.Errorf, so the text is all there is to go on).
func isCobraUsageError(err error) bool {
	var fe *flagError
	return errors.As(err, &fe) || strings.HasPrefix(err.Error(), "unknown command ")
}

// flagError wraps errors from flag parsing so Main can give them exit code 2.
type flagError struct{ err error }

func (e *flagError) Error() string { return e.err.Error() }
func (e *flagError) Unwrap() error { return e.err }

func newRootCmd(streams *IO) *cobra.Command {
	root := &cobra.Command{
		Use:   "sous",
		Short: "Script multi-step agent workflows in Starlark",
		Long: `sous runs Starlark recipes whose builtins spawn processes, feed stdin with
exactly-once offsets, reattach to running processes, create git worktrees,
extract archives and drive Claude Code sessions. Every builtin speaks
claustrum's protocol to a daemon: embedded in sous by default, or a standalone
one over a Unix socket, ssh or a WebSocket.`,
		Example: `  sous run recipes/hello.star
  sous run build.star -a pkg=./... --socket /run/sous.sock
  sous doc spawn`,
		SilenceUsage:  true,
		SilenceErrors: true,
		// A bare "sous" prints help; an unknown subcommand gets suggestions.
		SuggestionsMinimumDistance: 2,
		// sous --version, as most tools answer; 'sous version' says more.
		Version: currentBuild().Version,
	}
	root.SetVersionTemplate("sous {{.Version}}\n")
	root.SetFlagErrorFunc(func(c *cobra.Command, err error) error {
		return &flagError{fmt.Errorf("%w\nRun '%s --help' for usage.", err, c.CommandPath())}
	})
	root.AddCommand(newVersionCmd(streams))
	for _, add := range commandGroups {
		root.AddCommand(add(streams))
	}
	root.InitDefaultCompletionCmd()
	addCompletionExamples(root)
	refuseUnknownSubcommands(root)
	return root
}

// addCompletionExamples gives cobra's completion commands the examples
// every other command has.
func addCompletionExamples(root *cobra.Command) {
	comp, _, err := root.Find([]string{"completion"})
	if err != nil || comp == root {
		return
	}
	comp.Example = `  source <(sous completion bash)
  sous completion zsh > "${fpath[1]}/_sous"
  sous completion fish > ~/.config/fish/completions/sous.fish`
	examples := map[string]string{
		"bash": `  source <(sous completion bash)                  # this shell
  sous completion bash > /etc/bash_completion.d/sous  # every new shell`,
		"zsh":        `  sous completion zsh > "${fpath[1]}/_sous"       # then start a new shell`,
		"fish":       `  sous completion fish > ~/.config/fish/completions/sous.fish`,
		"powershell": `  sous completion powershell | Out-String | Invoke-Expression`,
	}
	for _, c := range comp.Commands() {
		if ex, ok := examples[c.Name()]; ok {
			c.Example = ex
		}
	}
}

// refuseUnknownSubcommands makes every command group (git, files, daemon,
// git worktree, completion) treat an unknown subcommand as the usage error
// it is, as the root does: cobra would print the group's help and exit 0.
// A bare group still prints its help.
func refuseUnknownSubcommands(c *cobra.Command) {
	for _, sub := range c.Commands() {
		refuseUnknownSubcommands(sub)
	}
	if c.Parent() == nil || !c.HasSubCommands() || c.Runnable() {
		return
	}
	c.SuggestionsMinimumDistance = 2
	c.Args = func(cmd *cobra.Command, args []string) error {
		if len(args) == 0 {
			return nil
		}
		msg := fmt.Sprintf("unknown command %q for %q", args[0], cmd.CommandPath())
		if s := cmd.SuggestionsFor(args[0]); len(s) > 0 {
			msg += "\n\nDid you mean this?\n\t" + strings.Join(s, "\n\t")
		}
		return errors.New(msg + "\nRun '" + cmd.CommandPath() + " --help' for usage.")
	}
	c.RunE = func(cmd *cobra.Command, _ []string) error { return cmd.Help() }
}

// commandGroups lists the constructors of the top-level commands beyond
// version; each command file registers its own in an init function so the
// files stay independent. The slice is written only during package
// initialisation.
var commandGroups []func(*IO) *cobra.Command

func newVersionCmd(streams *IO) *cobra.Command {
	return &cobra.Command{
		Use:     "version",
		Short:   "Print the version, commit, build time and platform",
		Example: "  sous version",
		Args:    cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			b := currentBuild()
			fmt.Fprintf(streams.Out, "sous %s\ncommit: %s\nbuilt: %s\ngo: %s %s/%s\n",
				b.Version, b.Commit, b.Time, runtime.Version(), runtime.GOOS, runtime.GOARCH)
			return nil
		},
	}
}
