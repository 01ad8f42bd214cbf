package main

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"sync"
	"testing"

	"github.com/seed5ad92d46/sous/daemon/sandbox"
)

func TestMain(m *testing.M) {
	if sc := os.Getenv(fakeCLIEnv); sc != "" {
		os.Exit(fakeCLI(sc)) // this binary runs as a fake Claude Code CLI (fakecli_test.go)
	}
	// This test binary runs the embedded daemon, so it is the helper of its
	// sandboxed children, as the sous binary is (see main).
	sandbox.MaybeRunHelper()
	code := m.Run()
	if builtDir != "" {
		os.RemoveAll(builtDir)
	}
	os.Exit(code)
}

// The sous binary, built once for the tests and benchmarks that need a
// real executable (subprocess daemons, ssh bridges, signals), and removed
// by TestMain.
var (
	buildOnce sync.Once
	builtDir  string
	builtBin  string
	buildErr  error
)

// sousBinary builds cmd/sous once per test binary and returns its path.
func sousBinary(tb testing.TB) string {
	tb.Helper()
	buildOnce.Do(func() {
		builtDir, buildErr = os.MkdirTemp("", "sous-bin-")
		if buildErr != nil {
			return
		}
		builtBin = filepath.Join(builtDir, "sous")
		if out, err := exec.Command("go", "build", "-o", builtBin, ".").CombinedOutput(); err != nil {
			buildErr = fmt.Errorf("go build: %v\n%s", err, out)
		}
	})
	if buildErr != nil {
		tb.Fatal(buildErr)
	}
	return builtBin
}
