//go:build !linux

package runtime

import "crypto/rand"

// randomBytes fills b from crypto/rand (random_linux.go says why Linux
// asks getrandom(2) itself).
func randomBytes(b []byte) {
	rand.Read(b) // never fails (crypto/rand)
}
