package rules

import (
	"os"
	"testing"

	"github.com/seed5ad92d46/sous/daemon/sandbox"
)

// TestMain lets this test binary be the sandbox helper: the bash oracle
// runs bash in a throwaway sandbox where the host has one.
func TestMain(m *testing.M) {
	sandbox.MaybeRunHelper()
	os.Exit(m.Run())
}
