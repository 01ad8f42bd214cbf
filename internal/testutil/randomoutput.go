package testutil

import (
	"crypto/rand"
	"os"
	"path/filepath"
	"strconv"
	"testing"
)

// RandomOutputScript writes files of random bytes of the given sizes in
// dir and returns a shell script that cats them, every other one to
// stderr (stdout first), with the bytes each stream must carry: a child
// whose output a transport must deliver exact, stdout and stderr
// interleaved.
func RandomOutputScript(tb testing.TB, dir string, sizes ...int) (script string, stdout, stderr []byte) {
	tb.Helper()
	for i, n := range sizes {
		b := make([]byte, n)
		rand.Read(b)
		name := filepath.Join(dir, "random"+strconv.Itoa(i))
		if err := os.WriteFile(name, b, 0o600); err != nil {
			tb.Fatal(err)
		}
		script += "cat '" + name + "'"
		if i%2 == 1 {
			script += " >&2"
			stderr = append(stderr, b...)
		} else {
			stdout = append(stdout, b...)
		}
		script += "; "
	}
	return script, stdout, stderr
}
