package builtins

import (
	"bytes"
	"context"
	"errors"
	"path/filepath"
	"syscall"
	"testing"
	"time"

	"github.com/seed5ad92d46/sous/internal/daemontest"
	"github.com/seed5ad92d46/sous/internal/testutil"
	"github.com/seed5ad92d46/sous/runtime"
)

// retryCounter is a command that counts its runs in DIR/count and
// succeeds from the run numbered $1 on.
const retryCounter = `
d = args["dir"]
def attempt(succeed_from):
    def once():
        return run(["sh", "-c", 'n=$(($(cat "$0/count" 2>/dev/null || echo 0) + 1)); echo $n > "$0/count"; echo "run $n"; [ $n -ge $1 ]', d, str(succeed_from)], check=True)
    return once
`

// TestRetryUntilItSucceeds: a command that succeeds on its third run is
// run three times and retry returns its Result.
func TestRetryUntilItSucceeds(t *testing.T) {
	t.Parallel()
	f := newFixture(t).withEmbeddedDaemon()
	f.run(retryCounter+`
r = retry(attempt(3), attempts=5, backoff=0.01)
print("got", r.stdout.strip())
`).expect(t, 0, "got run 3")
}

// TestRetryFailsWithTheCount: a command that never succeeds is run
// attempts times; the error has the count and the last error.
func TestRetryFailsWithTheCount(t *testing.T) {
	t.Parallel()
	f := newFixture(t).withEmbeddedDaemon()
	f.run(retryCounter+`
defer(lambda: print("runs:", run(["cat", d + "/count"]).stdout.strip()))
retry(attempt(99), backoff=0.01)
`).expect(t, 1, "retry: 3 attempts failed; last: run: `sh -c", "exit code 1", "runs: 3")
}

// TestRetryUntil: until decides when a value is good enough; fail() in fn
// is caught like a failed builtin.
func TestRetryUntil(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	f.run(`
calls = []
def fn():
    calls.append(1)
    if len(calls) == 1:
        fail("first call fails")
    return len(calls)
print("value", retry(fn, attempts=4, backoff=0, until=lambda v: v >= 3), "after", len(calls))
`).expect(t, 0, "value 3 after 3")
	f.run(`retry(lambda: 1, attempts=2, backoff=0, until=lambda v: v > 1)`).
		expect(t, 1, "retry: 2 attempts failed; last: until(1) returned False")
	f.run(`retry(print, attempts=0)`).expect(t, 1, "retry: attempts: want at least 1, got 0")
}

// TestRetryWaits: the waits double, are capped by max_backoff and
// jittered by at most ±20%, never past the cap.
func TestRetryWaits(t *testing.T) {
	t.Parallel()
	s := time.Second
	tests := []struct {
		k    int
		r    float64
		want time.Duration
	}{
		{0, 0.5, s}, {1, 0.5, 2 * s}, {3, 0.5, 8 * s}, {10, 0.5, 60 * s},
		{0, 0, 800 * time.Millisecond}, {0, 1, 1200 * time.Millisecond},
		{10, 0, 48 * s}, {10, 1, 60 * s}, {5, 1, 38400 * time.Millisecond},
		{1000, 0.5, 60 * s},
	}
	for _, tt := range tests {
		if got := retryWait(s, 60*s, tt.k, tt.r); got != tt.want {
			t.Errorf("retryWait(1s, 60s, %d, %v) = %s, want %s", tt.k, tt.r, got, tt.want)
		}
	}
}

// TestRetryStopsOnInterrupt: an interrupt during retry's wait ends the
// run at once, interrupted, with no further attempt.
func TestRetryStopsOnInterrupt(t *testing.T) {
	t.Parallel()
	dir := testutil.WriteTree(t, map[string]string{"main.star": `
def fn():
    print("attempt")
    fail("no")
retry(fn, attempts=5, backoff=30)
`})
	ctx, cancel := context.WithCancelCause(context.Background())
	var stderr bytes.Buffer
	done := make(chan error, 1)
	go func() {
		done <- runtime.Run(ctx, runtime.Options{
			Recipe: filepath.Join(dir, "main.star"), Stdout: &bytes.Buffer{}, Stderr: &stderr,
			Table: DefaultTable(), Host: daemontest.EmbeddedTarget(),
		})
	}()
	time.Sleep(300 * time.Millisecond)
	cancel(&runtime.Interrupt{Signal: syscall.SIGINT, Code: 130})
	select {
	case err := <-done:
		var ee *runtime.ExitError
		if !errors.As(err, &ee) || ee.Code != 130 {
			t.Fatalf("Run = %v, want exit code 130", err)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("retry went on waiting after the interrupt")
	}
	if got := bytes.Count(stderr.Bytes(), []byte("attempt\n")); got != 1 {
		t.Errorf("%d attempts, want 1:\n%s", got, stderr.String())
	}
}
