package main

import (
	"fmt"

	"github.com/spf13/cobra"
)

// CompletionOptions are the arguments of `sous completion SHELL`.
type CompletionOptions struct {
	IO             *IO
	Shell          string // bash, zsh, fish or powershell: the subcommand run
	NoDescriptions bool   // --no-descriptions
	// Root is the command tree to complete, set when the command runs.
	Root *cobra.Command
}

// newCmdCompletion is cobra's default completion command (the same help,
// flags and scripts), built here so that it is made as every other command
// is, and writes to the factory's stdout.
func newCmdCompletion(f *Factory, runF func(*CompletionOptions) error) *cobra.Command {
	opts := &CompletionOptions{IO: f.IO}
	cmd := &cobra.Command{
		Use:   "completion",
		Short: "Generate the autocompletion script for the specified shell",
		Long: `Generate the autocompletion script for sous for the specified shell.
See each sub-command's help for details on how to use the generated script.
`,
		Example: `  source <(sous completion bash)
  sous completion zsh > "${fpath[1]}/_sous"
  sous completion fish > ~/.config/fish/completions/sous.fish`,
		Args:              cobra.NoArgs,
		ValidArgsFunction: cobra.NoFileCompletions,
	}
	for _, sh := range []struct{ name, long, example string }{
		{"bash", completionBashLong, `  source <(sous completion bash)                  # this shell
  sous completion bash > /etc/bash_completion.d/sous  # every new shell`},
		{"zsh", completionZshLong, `  sous completion zsh > "${fpath[1]}/_sous"       # then start a new shell`},
		{"fish", completionFishLong, `  sous completion fish > ~/.config/fish/completions/sous.fish`},
		{"powershell", completionPowershellLong, `  sous completion powershell | Out-String | Invoke-Expression`},
	} {
		sub := &cobra.Command{
			Use:               sh.name,
			Short:             "Generate the autocompletion script for " + sh.name,
			Long:              sh.long,
			Example:           sh.example,
			Args:              cobra.NoArgs,
			ValidArgsFunction: cobra.NoFileCompletions,
			// As cobra's: only bash leaves "[flags]" out of its usage line.
			DisableFlagsInUseLine: sh.name == "bash",
			RunE: func(cmd *cobra.Command, _ []string) error {
				opts.Shell, opts.Root = sh.name, cmd.Root()
				if runF != nil {
					return runF(opts)
				}
				return completionRun(opts)
			},
		}
		sub.Flags().BoolVar(&opts.NoDescriptions, "no-descriptions", false, "disable completion descriptions")
		cmd.AddCommand(sub)
	}
	return cmd
}

func completionRun(opts *CompletionOptions) error {
	out, desc := opts.IO.Out, !opts.NoDescriptions
	switch opts.Shell {
	case "bash":
		return opts.Root.GenBashCompletionV2(out, desc)
	case "zsh":
		if !desc {
			return opts.Root.GenZshCompletionNoDesc(out)
		}
		return opts.Root.GenZshCompletion(out)
	case "fish":
		return opts.Root.GenFishCompletion(out, desc)
	case "powershell":
		if !desc {
			return opts.Root.GenPowerShellCompletion(out)
		}
		return opts.Root.GenPowerShellCompletionWithDesc(out)
	}
	return fmt.Errorf("completion: no script for %q", opts.Shell)
}

// The shells' help, as cobra words it.
const (
	completionBashLong = `Generate the autocompletion script for the bash shell.

This script depends on the 'bash-completion' package.
If it is not installed already, you can install it via your OS's package manager.

To load completions in your current shell session:

	source <(sous completion bash)

To load completions for every new session, execute once:

#### Linux:

	sous completion bash > /etc/bash_completion.d/sous

#### macOS:

	sous completion bash > $(brew --prefix)/etc/bash_completion.d/sous

You will need to start a new shell for this setup to take effect.
`
	completionZshLong = `Generate the autocompletion script for the zsh shell.

If shell completion is not already enabled in your environment you will need
to enable it.  You can execute the following once:

	echo "autoload -U compinit; compinit" >> ~/.zshrc

To load completions in your current shell session:

	source <(sous completion zsh)

To load completions for every new session, execute once:

#### Linux:

	sous completion zsh > "${fpath[1]}/_sous"

#### macOS:

	sous completion zsh > $(brew --prefix)/share/zsh/site-functions/_sous

You will need to start a new shell for this setup to take effect.
`
	completionFishLong = `Generate the autocompletion script for the fish shell.

To load completions in your current shell session:

	sous completion fish | source

To load completions for every new session, execute once:

	sous completion fish > ~/.config/fish/completions/sous.fish

You will need to start a new shell for this setup to take effect.
`
	completionPowershellLong = `Generate the autocompletion script for powershell.

To load completions in your current shell session:

	sous completion powershell | Out-String | Invoke-Expression

To load completions for every new session, add the output of the above command
to your powershell profile.
`
)
