package main

import (
	"errors"
	"fmt"
	"strings"

	"github.com/spf13/cobra"
)

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

// flagError wraps errors from flag parsing so Main can give them exit code 2.
type flagError struct{ err error }

func (e *flagError) Error() string { return e.err.Error() }
func (e *flagError) Unwrap() error { return e.err }

// isCobraUsageError recognises cobra's own usage errors: bad flags (through
// the flag error func) and unknown subcommands (cobra builds those with
// fmt.Errorf, so the text is all there is to go on).
func isCobraUsageError(err error) bool {
	var fe *flagError
	return errors.As(err, &fe) || strings.HasPrefix(err.Error(), "unknown command ")
}

// exactArgs is cobra.ExactArgs with a usage error (exit code 2) that shows
// the expected form.
func exactArgs(n int, form string) cobra.PositionalArgs {
	return func(cmd *cobra.Command, args []string) error {
		if len(args) != n {
			return usageErrorf("%s: want %d argument(s), got %d (usage: sous %s)", cmd.Name(), n, len(args), form)
		}
		return nil
	}
}
