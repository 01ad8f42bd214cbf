// Package testutil holds the few helpers that the test suites of several
// packages share. Only tests import it.
package testutil

import (
	"bytes"
	"os"
	"path/filepath"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/seed5ad92d46/sous/daemon/procstat"
)

// ShortTempDir returns a fresh directory, removed when the test ends. It is
// made under os.TempDir() rather than by t.TempDir(), whose paths carry the
// test's name: a Unix socket's path must fit in 108 bytes.
func ShortTempDir(tb testing.TB) string {
	tb.Helper()
	dir, err := os.MkdirTemp("", "sous-")
	if err != nil {
		tb.Fatal(err)
	}
	tb.Cleanup(func() { os.RemoveAll(dir) })
	return dir
}

// SyncBuffer is a bytes.Buffer that a writer goroutine (a child's output, a
// logger) and the test's readers can share.
type SyncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *SyncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *SyncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

// BenchBytes is the output size of a stream benchmark: SOUS_BENCH_BYTES when
// set (CI sets 64 MiB), else def.
func BenchBytes(tb testing.TB, def int64) int64 {
	s := os.Getenv("SOUS_BENCH_BYTES")
	if s == "" {
		return def
	}
	n, err := strconv.ParseInt(s, 10, 64)
	if err != nil || n <= 0 {
		tb.Fatalf("SOUS_BENCH_BYTES=%q: want a positive number of bytes", s)
	}
	return n
}

// Exits waits up to d for pid to stop being Alive, and reports whether it
// did.
func Exits(pid int, d time.Duration) bool {
	for deadline := time.Now().Add(d); Alive(pid); time.Sleep(10 * time.Millisecond) {
		if time.Now().After(deadline) {
			return false
		}
	}
	return true
}

// Alive reports whether pid is a running process: it exists and is not a
// zombie (one that exited and waits to be reaped).
func Alive(pid int) bool {
	s, err := procstat.Read(pid)
	return err == nil && s.Field(3) != "Z"
}

// OpenFDs counts this process's open descriptors (for leak checks), not
// counting the one that reads them; the test is skipped without /proc.
func OpenFDs(tb testing.TB) int {
	tb.Helper()
	ents, err := os.ReadDir("/proc/self/fd")
	if err != nil {
		tb.Skipf("no /proc/self/fd: %v", err)
	}
	return len(ents) - 1 // the directory being read
}

// Pipe returns a pipe whose ends are closed when the test ends (a test may
// close either end itself before then).
func Pipe(tb testing.TB) (r, w *os.File) {
	tb.Helper()
	r, w, err := os.Pipe()
	if err != nil {
		tb.Fatal(err)
	}
	tb.Cleanup(func() { r.Close(); w.Close() })
	return r, w
}

// WriteTree writes name -> content (names may hold directories) under a
// fresh temporary directory and returns it.
func WriteTree(tb testing.TB, files map[string]string) string {
	tb.Helper()
	dir := tb.TempDir()
	for name, content := range files {
		p := filepath.Join(dir, name)
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			tb.Fatal(err)
		}
		if err := os.WriteFile(p, []byte(content), 0o644); err != nil {
			tb.Fatal(err)
		}
	}
	return dir
}
