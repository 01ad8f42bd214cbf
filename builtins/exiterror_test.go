package builtins

import (
	"context"
	"errors"
	"path/filepath"
	"strings"
	"testing"

	"github.com/seed5ad92d46/sous/internal/testutil"
	"github.com/seed5ad92d46/sous/runtime"
)

// TestExitErrorRedactsTheRunsSecrets: a program that embeds runtime.Run
// and prints the error it returns prints the run's secrets replaced, as
// the run's own stderr has them.
func TestExitErrorRedactsTheRunsSecrets(t *testing.T) {
	const secret = "tok-5f3c9a0e7d"
	t.Setenv("SOUS_TEST_EXIT_SECRET", secret)
	dir := testutil.WriteTree(t, map[string]string{"main.star": `
tok = getenv("SOUS_TEST_EXIT_SECRET", secret=True)
fail("the token " + tok + " was refused")
`})
	var stdout, stderr strings.Builder
	err := runtime.Run(context.Background(), runtime.Options{
		Recipe: filepath.Join(dir, "main.star"), Stdout: &stdout, Stderr: &stderr, Table: DefaultTable(),
	})
	var ee *runtime.ExitError
	if !errors.As(err, &ee) || ee.Code != runtime.CodeFailed {
		t.Fatalf("err %v, want an ExitError with code 1", err)
	}
	if strings.Contains(err.Error(), secret) || !strings.Contains(err.Error(), "was refused") {
		t.Errorf("the error reads %q: want the message with the secret replaced", err)
	}
	if strings.Contains(stderr.String(), secret) {
		t.Errorf("stderr holds the secret: %q", stderr.String())
	}
	if errors.Unwrap(err) == nil {
		t.Error("the error no longer unwraps to what went wrong")
	}
}
