package runtime

import (
	"crypto/rand"

	"golang.org/x/sys/unix"
)

// randomBytes fills b from getrandom(2) itself: the source crypto/rand
// reads, without what crypto/rand sets up on its first use (a vDSO state
// mapping and a watchdog timer), which was about 2% of the time a one-line
// recipe takes to run (docs/PERFORMANCE.md, the start row).
func randomBytes(b []byte) {
	if got, err := unix.Getrandom(b, 0); err != nil || got != len(b) {
		rand.Read(b) // never fails (crypto/rand)
	}
}
