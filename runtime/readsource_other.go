//go:build !unix

package runtime

import "os"

// readSource reads a recipe file (readsource_unix.go says why there is a
// function of its own for it).
func readSource(path string) ([]byte, error) { return os.ReadFile(path) }
