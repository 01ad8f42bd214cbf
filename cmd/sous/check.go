package main

import (
	"fmt"

	"github.com/spf13/cobra"

	"github.com/seed5ad92d46/sous/builtins"
	"github.com/seed5ad92d46/sous/runtime"
)

// CheckOptions are the arguments of `sous check`.
type CheckOptions struct {
	IO      *IO
	Recipes []string
}

func newCmdCheck(f *Factory, runF func(*CheckOptions) error) *cobra.Command {
	opts := &CheckOptions{IO: f.IO}
	return &cobra.Command{
		Use:   "check RECIPE.star...",
		Short: "Check recipes without running them",
		Long: `Check parses each recipe and every file it loads and resolves every name
against the builtins, without running anything: the errors sous run would stop
at before starting. It also checks the keyword arguments of builtin calls
against the builtins' signatures (spawn("true", cwdd="/")), where the callee is
statically the builtin: a global or module member the file does not rebind, a
method of a variable assigned once from a builtin (h = host(...); h.spawn(...)),
or the function given to defer. Each error is printed as file:line:col: message,
and the exit code is 2 when there is any; each good recipe prints "ok RECIPE".`,
		Example: `  sous check recipes/*.star`,
		Args: func(cmd *cobra.Command, args []string) error {
			if len(args) == 0 {
				return usageErrorf("%s needs at least one recipe\nRun '%s --help' for usage.", cmd.CommandPath(), cmd.CommandPath())
			}
			return nil
		},
		RunE: func(cmd *cobra.Command, args []string) error {
			opts.Recipes = args
			if runF != nil {
				return runF(opts)
			}
			return checkRun(opts)
		},
	}
}

func checkRun(opts *CheckOptions) error {
	streams := opts.IO
	table := builtins.DefaultTable()
	failed := false
	for _, path := range opts.Recipes {
		if err := runtime.Check(path, table); err != nil {
			fmt.Fprintln(streams.ErrOut, err)
			failed = true
			continue
		}
		fmt.Fprintf(streams.Out, "ok %s\n", path)
	}
	if failed {
		return &exitError{code: 2}
	}
	return nil
}
