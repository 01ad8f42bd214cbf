package proc

import (
	"os"

	"github.com/seed5ad92d46/sous/daemon/mirror"
)

// MsgStdioToTerminal says why a terminal's child cannot take passed stdio
// (mirror.Spec.Stdin, mirror.Spec.Direct).
const MsgStdioToTerminal = "a terminal's child reads and writes its terminal: its stdio cannot be passed to it"

// Mirror is the mirror spec under its old name here, for callers not yet
// moved to package mirror (cmd/sous/exec.go).
//
// Deprecated: use mirror.Spec.
type Mirror = mirror.Spec

// IsPipe is mirror.IsPipe.
//
// Deprecated: use mirror.IsPipe.
func IsPipe(f *os.File) bool { return mirror.IsPipe(f) }

// IsPipeOrRegular is mirror.IsPipeOrRegular.
//
// Deprecated: use mirror.IsPipeOrRegular.
func IsPipeOrRegular(f *os.File) bool { return mirror.IsPipeOrRegular(f) }
