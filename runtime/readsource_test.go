package runtime

import (
	"bytes"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestReadSourceReadsAsOSReadFile: readSource, which reads recipes without
// an *os.File, returns what os.ReadFile returns, errors included, for
// files of every size, a /proc file whose size stat does not know, a
// directory and a missing file.
func TestReadSourceReadsAsOSReadFile(t *testing.T) {
	dir := t.TempDir()
	paths := []string{dir, filepath.Join(dir, "missing.star"), "/proc/self/status"}
	for _, size := range []int{0, 1, 511, 512, 513, 70000} {
		p := filepath.Join(dir, fmt.Sprintf("size%d.star", size))
		if err := os.WriteFile(p, bytes.Repeat([]byte("x = 1\n"), size/6+1)[:size], 0o644); err != nil {
			t.Fatal(err)
		}
		paths = append(paths, p)
	}
	for _, p := range paths {
		want, wantErr := os.ReadFile(p)
		got, err := readSource(p)
		if strings.HasPrefix(p, "/proc/") {
			// Two reads of /proc/self/status differ (the process's own
			// figures); it is read whole, as os.ReadFile reads it.
			if err != nil || !bytes.HasPrefix(got, []byte("Name:")) || !bytes.HasSuffix(got, []byte("\n")) {
				t.Errorf("%s: %q, %v", p, got, err)
			}
			continue
		}
		if !bytes.Equal(got, want) || (err == nil) != (wantErr == nil) || err != nil && err.Error() != wantErr.Error() {
			t.Errorf("%s: %d bytes, %v; os.ReadFile: %d bytes, %v", p, len(got), err, len(want), wantErr)
		}
		if err != nil && reason(err).Error() != reason(wantErr).Error() {
			t.Errorf("%s: reason %v, want %v", p, reason(err), reason(wantErr))
		}
	}
}
