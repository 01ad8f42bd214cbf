package main

import (
	"errors"
	"fmt"
	"strings"

	"github.com/spf13/cobra"
)

// topLevelCommand is a top-level command's name and how to build it.
type topLevelCommand struct {
	name  string
	build func(*Factory) *cobra.Command
}

// topLevelCommands lists every top-level command, in the order `sous
// --help` shows them (cobra sorts them by name); each is made by its own
// newCmdX(f, runF), as the GitHub CLI does, and none registers itself.
// TestTopLevelCommandsAreNamedAsTheyAreBuilt holds each name to its command.
func topLevelCommands() []topLevelCommand {
	return []topLevelCommand{
		{"approvals", func(f *Factory) *cobra.Command { return newCmdApprovals(f, nil) }},
		{"attach", func(f *Factory) *cobra.Command { return newCmdAttach(f, nil) }},
		{"check", func(f *Factory) *cobra.Command { return newCmdCheck(f, nil) }},
		{"completion", func(f *Factory) *cobra.Command { return newCmdCompletion(f, nil) }},
		{"daemon", newCmdDaemon},
		{"doc", func(f *Factory) *cobra.Command { return newCmdDoc(f, nil) }},
		{"exec", func(f *Factory) *cobra.Command { return newCmdExec(f, nil) }},
		{"files", newCmdFiles},
		{"git", newCmdGit},
		{"kill", func(f *Factory) *cobra.Command { return newCmdKill(f, nil) }},
		{"model", newCmdModel},
		{"ps", func(f *Factory) *cobra.Command { return newCmdPs(f, nil) }},
		{"rpc", func(f *Factory) *cobra.Command { return newCmdRPC(f, nil) }},
		{"resume", func(f *Factory) *cobra.Command { return newCmdResume(f, nil) }},
		{"run", func(f *Factory) *cobra.Command { return newCmdRun(f, nil) }},
		{"runs", func(f *Factory) *cobra.Command { return newCmdRuns(f, nil) }},
		{"version", func(f *Factory) *cobra.Command { return newCmdVersion(f, nil) }},
	}
}

// newCmdRoot builds the whole command tree: the root and every top-level
// command.
func newCmdRoot(f *Factory) *cobra.Command {
	root := newRootOnly()
	for _, c := range topLevelCommands() {
		root.AddCommand(c.build(f))
	}
	refuseUnknownSubcommands(root)
	return root
}

// newCmdRootFor builds the tree args need. A command line whose first
// word names a top-level command (`sous run x.star`) is parsed by that
// command alone, so the root gets only that one: building the other
// sixteen with their flags cost about a tenth of a one-line recipe's run
// (docs/PERFORMANCE.md, the start row). Anything else (a flag first,
// help, completion, an unknown or misspelt command that wants
// suggestions) gets the whole tree.
func newCmdRootFor(f *Factory, args []string) *cobra.Command {
	if len(args) == 0 {
		return newCmdRoot(f)
	}
	for _, c := range topLevelCommands() {
		if c.name != args[0] || c.name == "completion" {
			continue
		}
		root := newRootOnly()
		// cobra would add its own completion command to a root without
		// ours; the command line named another command, so none is needed.
		root.CompletionOptions.DisableDefaultCmd = true
		root.AddCommand(c.build(f))
		refuseUnknownSubcommands(root)
		return root
	}
	return newCmdRoot(f)
}

// newRootOnly builds the root command without its subcommands.
func newRootOnly() *cobra.Command {
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
	return root
}

// execute runs the sous command line with f and returns the process exit
// code: what main exits with.
func execute(f *Factory, args []string) int {
	return executeRoot(f, newCmdRootFor(f, args), args)
}

// executeRoot runs args on root (newCmdRoot's tree; tests swap a command
// in it for one that only parses) and turns the outcome into the exit
// code, printing the error.
func executeRoot(f *Factory, root *cobra.Command, args []string) int {
	stderr := f.IO.ErrOut
	root.SetArgs(args)
	root.SetIn(f.IO.In)
	root.SetOut(f.IO.Out)
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
			err = refuseRunJSON(f.IO, recipe, err)
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
